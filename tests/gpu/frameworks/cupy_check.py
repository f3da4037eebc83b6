"""CuPy on the GPU, natively and through rgpu (tests/gpu/run.sh).

CuPy 14 links the CUDA runtime statically, so every call it makes reaches
the driver through cuGetExportTable; its cuFFT, cuRAND and cuSOLVER do the
same from inside those libraries, while cuBLAS comes from rgpu's stub.
Every kernel CuPy runs, its own elementwise and reduction kernels included,
is compiled at run time by NVRTC: the kernel cache goes to a fresh folder
(CUPY_CACHE_DIR) so that the rgpu run compiles and loads them again.

Checks: elementwise and custom ElementwiseKernel, reductions and a custom
ReductionKernel, streams and pinned copies, cupy.random (legacy seeded
RandomState on cuRAND's host API, and default_rng: printed as hashes of the
numbers, which must match between runs, and their statistics), cupy.fft
against numpy.fft, cupy.linalg (solve, inv, svd, eigh, qr, cholesky, det,
matmul) against numpy.linalg, and RawKernel / RawModule sources compiled
by NVRTC.  See checks.py for the output convention.
"""
from checks import Checks, digest, fresh_cache, need

fresh_cache("CUPY_CACHE_DIR")
np = need("numpy")
cp, cupyx = need("cupy", "cupyx")

N = 1 << 20
c = Checks()


def header():
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else name
    c.say(f"cupy {cp.__version__}, runtime {cp.cuda.runtime.runtimeGetVersion()}, "
          f"driver {cp.cuda.runtime.driverGetVersion()}")
    c.say(f"devices {cp.cuda.runtime.getDeviceCount()}, device 0: {name}, "
          f"cc {props['major']}.{props['minor']}")


def elementwise():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(N), rng.standard_normal(N)
    ga, gb = cp.asarray(a), cp.asarray(b)
    c.close("elementwise sin(a)*b + exp(-a*a) float64",
            (cp.sin(ga) * gb + cp.exp(-ga * ga)).get(), np.sin(a) * b + np.exp(-a * a), 1e-12)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    c.close("elementwise tanh(a)+b float32",
            (cp.tanh(cp.asarray(a32)) + cp.asarray(b32)).get(), np.tanh(a) + b, 1e-5)
    c.equal("elementwise where(a > b, a, b)", cp.where(ga > gb, ga, gb).get(), np.maximum(a, b))
    c.equal("elementwise broadcast add",
            (ga.reshape(1024, -1) + cp.arange(N // 1024)).get(),
            a.reshape(1024, -1) + np.arange(N // 1024))
    c.equal("elementwise int64 arange % 7 * 3",
            (cp.arange(N, dtype=cp.int64) % 7 * 3).get(), np.arange(N, dtype=np.int64) % 7 * 3)
    k = cp.ElementwiseKernel("float64 x, float64 y", "float64 z", "z = x * y + 2.0 * x",
                             "rgpu_check_axpy")
    c.close("ElementwiseKernel x*y + 2x", k(ga, gb).get(), a * b + 2.0 * a, 1e-14)


def reductions():
    rng = np.random.default_rng(1)
    a = rng.random((1024, 1000))
    ga = cp.asarray(a)
    c.close("reduction sum", ga.sum().get(), a.sum(), 1e-12)
    c.close("reduction sum axis 0", ga.sum(axis=0).get(), a.sum(axis=0), 1e-12)
    c.close("reduction mean axis 1", ga.mean(axis=1).get(), a.mean(axis=1), 1e-12)
    c.close("reduction std", ga.std().get(), a.std(), 1e-10)
    c.equal("reduction max, min", cp.stack([ga.max(), ga.min()]).get(),
            np.array([a.max(), a.min()]))
    c.equal("reduction argmax, argmin", cp.stack([ga.argmax(), ga.argmin()]).get(),
            np.array([a.argmax(), a.argmin()]))
    c.equal("reduction count_nonzero(a > 0.5)", int(cp.count_nonzero(ga > 0.5)),
            int(np.count_nonzero(a > 0.5)))
    c.close("reduction cumsum", cp.cumsum(ga[0]).get(), np.cumsum(a[0]), 1e-12)
    k = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "rgpu_check_sumsq")
    c.close("ReductionKernel sum of squares axis 1", k(ga, axis=1).get(),
            (a * a).sum(axis=1), 1e-12)


def streams():
    rng = np.random.default_rng(2)
    a = rng.standard_normal(N).astype(np.float32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        g = cp.asarray(a)
        h = g * 2 + 1
        done = cp.cuda.Event()
        done.record(s)
    out = cupyx.empty_pinned(a.shape, np.float32)
    h.get(stream=s, out=out)
    s.synchronize()
    c.result("stream event done after synchronize", done.done)
    c.equal("stream compute and pinned copy back", out, a * 2 + 1)


def random_legacy():
    cp.random.seed(1234)
    u = cp.random.rand(N)
    c.say(f"cupy.random.rand seed 1234 n={N}: hash {digest(u.get())}")
    c.within("cupy.random.rand mean", float(u.mean()), 0.498, 0.502)
    c.within("cupy.random.rand sd", float(u.std()), 1 / 12 ** 0.5 - 0.002, 1 / 12 ** 0.5 + 0.002)
    c.result("cupy.random.rand in [0, 1)", bool(((u >= 0) & (u < 1)).all()))
    z = cp.random.standard_normal(N, dtype=cp.float32)
    c.say(f"cupy.random.standard_normal float32: hash {digest(z.get())}")
    c.within("cupy.random.standard_normal mean", float(z.mean()), -0.007, 0.007)
    c.within("cupy.random.standard_normal sd", float(z.std()), 0.993, 1.007)
    i = cp.random.randint(0, 100, size=1 << 16)
    c.say(f"cupy.random.randint 0..99: hash {digest(i.get())}")
    c.result("cupy.random.randint in [0, 100)", bool(((i >= 0) & (i < 100)).all()))
    cp.random.seed(1234)
    c.equal("cupy.random.seed repeats", cp.random.rand(N).get(), u.get())


def random_generator():
    g = cp.random.default_rng(42)
    x = g.random(N)
    c.say(f"cupy.random.default_rng(42).random: hash {digest(x.get())}")
    c.within("default_rng random mean", float(x.mean()), 0.498, 0.502)
    z = g.standard_normal(N)
    c.say(f"cupy.random.default_rng(42).standard_normal: hash {digest(z.get())}")
    c.within("default_rng standard_normal sd", float(z.std()), 0.993, 1.007)


def fft():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 1000)) + 1j * rng.standard_normal((3, 1000))
    gx = cp.asarray(x)
    c.close("cupy.fft.fft complex128 n=1000 batch 3", cp.fft.fft(gx).get(), np.fft.fft(x), 1e-11)
    c.close("cupy.fft.fft complex64 n=1000 batch 3",
            cp.fft.fft(gx.astype(cp.complex64)).get(), np.fft.fft(x), 1e-5)
    c.close("cupy.fft.ifft(fft)", cp.fft.ifft(cp.fft.fft(gx)).get(), x, 1e-12)
    y = rng.standard_normal((64, 48)) + 1j * rng.standard_normal((64, 48))
    c.close("cupy.fft.fft2 64x48", cp.fft.fft2(cp.asarray(y)).get(), np.fft.fft2(y), 1e-11)
    z = rng.standard_normal((16, 12, 10))
    c.close("cupy.fft.fftn 16x12x10", cp.fft.fftn(cp.asarray(z)).get(), np.fft.fftn(z), 1e-11)
    r = rng.standard_normal((4, 256))
    gr = cp.asarray(r)
    c.close("cupy.fft.rfft n=256 batch 4", cp.fft.rfft(gr).get(), np.fft.rfft(r), 1e-11)
    c.close("cupy.fft.irfft(rfft)", cp.fft.irfft(cp.fft.rfft(gr), n=256).get(), r, 1e-12)


def linalg():
    rng = np.random.default_rng(4)
    n = 64
    a = rng.standard_normal((n, n)) + n * np.eye(n)
    b = rng.standard_normal((n, 3))
    ga, gb = cp.asarray(a), cp.asarray(b)
    c.close("cupy.linalg.solve float64", cp.linalg.solve(ga, gb).get(),
            np.linalg.solve(a, b), 1e-10)
    c.close("cupy.linalg.solve float32", cp.linalg.solve(ga.astype(cp.float32),
            gb.astype(cp.float32)).get(), np.linalg.solve(a, b), 1e-4)
    c.close("cupy.linalg.inv", cp.linalg.inv(ga).get(), np.linalg.inv(a), 1e-10)
    c.close("cupy.linalg.det", cp.linalg.det(ga / n).get(), np.linalg.det(a / n), 1e-10)
    m = rng.standard_normal((96, 64))
    gm = cp.asarray(m)
    c.close("cupy.linalg.svd singular values", cp.linalg.svd(gm, compute_uv=False).get(),
            np.linalg.svd(m, compute_uv=False), 1e-10)
    u, s, vh = cp.linalg.svd(gm, full_matrices=False)
    c.close("cupy.linalg.svd U S Vh = A", ((u * s) @ vh).get(), m, 1e-10)
    c.close("cupy.linalg.svd float32 singular values",
            cp.linalg.svd(gm.astype(cp.float32), compute_uv=False).get(),
            np.linalg.svd(m, compute_uv=False), 1e-4)
    sym = a + a.T
    w, v = cp.linalg.eigh(cp.asarray(sym))
    c.close("cupy.linalg.eigh eigenvalues", w.get(), np.linalg.eigvalsh(sym), 1e-10)
    c.close("cupy.linalg.eigh V diag(w) V^T = A", ((v * w) @ v.T).get(), sym, 1e-10)
    q, r = cp.linalg.qr(gm)
    c.close("cupy.linalg.qr Q R = A", (q @ r).get(), m, 1e-10)
    spd = a @ a.T
    c.close("cupy.linalg.cholesky", cp.linalg.cholesky(cp.asarray(spd)).get(),
            np.linalg.cholesky(spd), 1e-10)
    c.close("cupy matmul float64 (cuBLAS)", (ga @ gm.T[:n]).get(), a @ m.T[:n], 1e-12)


RAW_SAXPY = r"""
extern "C" __global__ void rgpu_saxpy(float a, const float *x, const float *y, float *out,
                                      int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a * x[i] + y[i];
}
"""

RAW_MODULE = r"""
template <typename T>
__global__ void rgpu_scale(T *x, T factor, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= factor;
}

// Each block reverses its slice through dynamic shared memory.
extern "C" __global__ void rgpu_block_reverse(const int *in, int *out)
{
    extern __shared__ int tile[];
    int base = blockIdx.x * blockDim.x;
    tile[threadIdx.x] = in[base + threadIdx.x];
    __syncthreads();
    out[base + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}
"""


def raw_kernels():
    rng = np.random.default_rng(5)
    n = 100003
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = cp.empty(n, cp.float32)
    k = cp.RawKernel(RAW_SAXPY, "rgpu_saxpy")
    k(((n + 255) // 256,), (256,), (cp.float32(2.5), cp.asarray(x), cp.asarray(y), out,
                                    cp.int32(n)))
    c.close("RawKernel saxpy (NVRTC)", out.get(), 2.5 * x.astype(np.float64) + y, 1e-6)

    mod = cp.RawModule(code=RAW_MODULE, options=("-std=c++17",),
                       name_expressions=["rgpu_scale<float>", "rgpu_scale<double>"])
    d = cp.asarray(x.astype(np.float64))
    mod.get_function("rgpu_scale<double>")(((n + 255) // 256,), (256,),
                                           (d, cp.float64(0.5), cp.int32(n)))
    c.equal("RawModule template rgpu_scale<double>", d.get(), x.astype(np.float64) * 0.5)
    ints = np.arange(64 * 128, dtype=np.int32)
    rev = cp.empty_like(cp.asarray(ints))
    mod.get_function("rgpu_block_reverse")((64,), (128,), (cp.asarray(ints), rev),
                                           shared_mem=128 * 4)
    c.equal("RawModule dynamic shared memory", rev.get(), ints.reshape(64, 128)[:, ::-1].ravel())


c.section("device", header)
for part in (elementwise, reductions, streams, random_legacy, random_generator, fft, linalg,
             raw_kernels):
    c.section(part.__name__, part)
cp.cuda.Device().synchronize()
c.finish()
