// cuFFT on the GPU machine, natively and through rgpu (tests/gpu/run.sh
// builds it with plain `nvcc ... -lcufft`: the default, static, CUDA
// runtime, so both this program's runtime and cuFFT's own reach the driver
// through its export tables).
//
// Transforms: 1D C2C forward and inverse (a length that is not a power of
// two, batched), 2D and 3D C2C, 1D R2C and C2R, 1D Z2Z in double, and a plan
// made with cuFFT's work area handed in by the program.  Each result is
// checked against a naive DFT computed on the host in double.
//
// Error measure: max |got - ref| / max |ref| over the whole output; the
// tolerance is 1e-5 for single precision and 1e-11 for double (an FFT's
// error grows with log N times the precision's epsilon).  Measured errors go
// to stderr only: stdout ("ok NAME" / "FAIL NAME: ...", tests/progs/check.h)
// must be identical natively and through rgpu.
#include <cufft.h>
#include <math.h>
#include <stdlib.h>
#include <complex>
#include <vector>
#include "../progs/check.h"

typedef std::complex<double> cd;

static const double TOL_SINGLE = 1e-5, TOL_DOUBLE = 1e-11;
static cudaStream_t stream;

static bool check_fft(cufftResult r, const char *name)
{
    return check(r == CUFFT_SUCCESS, name, "cufftResult %d", (int)r);
}

// Setup that the rest depends on: report and stop.
static void must(bool ok, const char *what)
{
    if (!ok) {
        check(false, what, "setup failed");
        exit(1);
    }
}

// Deterministic inputs in [-1, 1).
static std::vector<double> data(size_t n, unsigned seed)
{
    std::vector<double> v(n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (double)((seed >> 8) & 0xffff) / 32768.0 - 1.0;
    }
    return v;
}

static std::vector<cd> complex_data(size_t n, unsigned seed)
{
    std::vector<double> re = data(n, seed), im = data(n, seed * 7 + 1);
    std::vector<cd> v(n);
    for (size_t i = 0; i < n; i++)
        v[i] = cd(re[i], im[i]);
    return v;
}

// The naive DFT of one line of `n` elements `stride` apart, in place.
// sign -1 is cuFFT's forward direction, +1 its (unscaled) inverse.  The
// twiddle's angle uses (j * k) mod n so that it stays accurate for large k.
static void dft_line(cd *x, int n, size_t stride, int sign)
{
    std::vector<cd> out(n);
    for (int k = 0; k < n; k++) {
        cd sum = 0;
        for (int j = 0; j < n; j++) {
            double angle = sign * 2.0 * M_PI * (double)(((long long)j * k) % n) / n;
            sum += x[j * stride] * cd(cos(angle), sin(angle));
        }
        out[k] = sum;
    }
    for (int k = 0; k < n; k++)
        x[k * stride] = out[k];
}

// The DFT of a row-major array of dims[0] x ... x dims[rank-1], batched
// `batch` times back to back: separable, one axis after another.
static std::vector<cd> dft(std::vector<cd> x, const std::vector<int> &dims, int batch, int sign)
{
    size_t total = 1;
    for (int d : dims)
        total *= d;
    for (size_t axis = 0; axis < dims.size(); axis++) {
        size_t inner = 1, outer = 1;
        for (size_t a = axis + 1; a < dims.size(); a++)
            inner *= dims[a];
        for (size_t a = 0; a < axis; a++)
            outer *= dims[a];
        for (int b = 0; b < batch; b++)
            for (size_t o = 0; o < outer; o++)
                for (size_t i = 0; i < inner; i++)
                    dft_line(&x[b * total + o * dims[axis] * inner + i], dims[axis], inner, sign);
    }
    return x;
}

// max |got - ref| / max |ref|, also written to stderr with the name.
static double rel_error(const std::vector<cd> &got, const std::vector<cd> &ref, const char *name)
{
    double worst = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        double e = std::abs(got[i] - ref[i]);
        if (!(e <= worst))      // NaN counts as the worst
            worst = e;
        scale = std::max(scale, std::abs(ref[i]));
    }
    double rel = worst / (scale > 0 ? scale : 1);
    fprintf(stderr, "%s: max error %.3g of max |ref| %.3g\n", name, rel, scale);
    return rel;
}

static bool check_close(const std::vector<cd> &got, const std::vector<cd> &ref, double tol,
                        const char *name)
{
    double e = rel_error(got, ref, name);
    return check(e <= tol, name, "max error %.3g of max |ref|, tolerance %.0g", e, tol);
}

// Device buffers of single or double complex numbers, filled from and read
// back into vectors of std::complex<double>.
template <typename C>
static C *upload(const std::vector<cd> &h)
{
    std::vector<C> tmp(h.size());
    for (size_t i = 0; i < h.size(); i++) {
        tmp[i].x = h[i].real();
        tmp[i].y = h[i].imag();
    }
    C *d = nullptr;
    must(check_cuda(cudaMalloc(&d, tmp.size() * sizeof(C)), "cudaMalloc"), "device buffer");
    must(check_cuda(cudaMemcpy(d, tmp.data(), tmp.size() * sizeof(C), cudaMemcpyHostToDevice),
                    "cudaMemcpy to device"), "upload");
    return d;
}

template <typename C>
static std::vector<cd> download(const C *d, size_t n)
{
    std::vector<C> tmp(n);
    must(check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"), "sync");
    must(check_cuda(cudaMemcpy(tmp.data(), d, n * sizeof(C), cudaMemcpyDeviceToHost),
                    "cudaMemcpy to host"), "download");
    std::vector<cd> h(n);
    for (size_t i = 0; i < n; i++)
        h[i] = cd(tmp[i].x, tmp[i].y);
    return h;
}

// A C2C transform of `batch` arrays of `dims`, forward then inverse, on a
// plan made by cufftPlanMany; both directions checked against the DFT.
static void c2c(const std::vector<int> &dims, int batch, const char *label)
{
    char name[128];
    size_t total = 1;
    for (int d : dims)
        total *= d;
    std::vector<cd> x = complex_data(total * batch, 11 + (unsigned)total);
    cufftComplex *d = upload<cufftComplex>(x);
    cufftHandle plan;
    std::vector<int> n(dims);
    if (!check_fft(cufftPlanMany(&plan, (int)dims.size(), n.data(), NULL, 1, 0, NULL, 1, 0,
                                 CUFFT_C2C, batch), fmt_name(name, sizeof name, "%s plan", label))) {
        cudaFree(d);
        return;
    }
    check_fft(cufftSetStream(plan, stream), fmt_name(name, sizeof name, "%s set stream", label));

    std::vector<cd> ref = dft(x, dims, batch, -1);
    if (check_fft(cufftExecC2C(plan, d, d, CUFFT_FORWARD),
                  fmt_name(name, sizeof name, "%s forward exec", label)))
        check_close(download(d, x.size()), ref, TOL_SINGLE,
                    fmt_name(name, sizeof name, "%s forward", label));

    // The unscaled inverse of the forward result gives back x times the size.
    std::vector<cd> scaled(x);
    for (cd &v : scaled)
        v *= (double)total;
    if (check_fft(cufftExecC2C(plan, d, d, CUFFT_INVERSE),
                  fmt_name(name, sizeof name, "%s inverse exec", label)))
        check_close(download(d, x.size()), scaled, TOL_SINGLE,
                    fmt_name(name, sizeof name, "%s inverse of forward", label));
    check_fft(cufftDestroy(plan), fmt_name(name, sizeof name, "%s destroy", label));
    cudaFree(d);
}

// Real to complex and back, 1D, out of place.
static void r2c_c2r(int n, int batch)
{
    char name[128];
    int half = n / 2 + 1;
    std::vector<double> xr = data((size_t)n * batch, 5);
    std::vector<cd> x(xr.begin(), xr.end());
    std::vector<float> xf(xr.begin(), xr.end());
    float *dreal;
    must(check_cuda(cudaMalloc(&dreal, xf.size() * sizeof(float)), "cudaMalloc real"), "real");
    must(check_cuda(cudaMemcpy(dreal, xf.data(), xf.size() * sizeof(float),
                               cudaMemcpyHostToDevice), "cudaMemcpy real"), "real upload");
    cufftComplex *dspec;
    must(check_cuda(cudaMalloc(&dspec, (size_t)half * batch * sizeof(cufftComplex)),
                    "cudaMalloc spectrum"), "spectrum");

    cufftHandle fwd, inv;
    must(check_fft(cufftPlan1d(&fwd, n, CUFFT_R2C, batch), "r2c plan"), "r2c plan");
    must(check_fft(cufftPlan1d(&inv, n, CUFFT_C2R, batch), "c2r plan"), "c2r plan");
    cufftSetStream(fwd, stream);
    cufftSetStream(inv, stream);

    // Reference: the first n/2 + 1 bins of each line's full DFT.
    std::vector<cd> full = dft(x, {n}, batch, -1), ref((size_t)half * batch);
    for (int b = 0; b < batch; b++)
        for (int k = 0; k < half; k++)
            ref[(size_t)b * half + k] = full[(size_t)b * n + k];
    if (check_fft(cufftExecR2C(fwd, dreal, dspec), "r2c exec"))
        check_close(download(dspec, ref.size()), ref, TOL_SINGLE,
                    fmt_name(name, sizeof name, "r2c 1d n=%d batch=%d", n, batch));

    if (check_fft(cufftExecC2R(inv, dspec, dreal), "c2r exec")) {
        must(check_cuda(cudaStreamSynchronize(stream), "sync c2r"), "sync");
        std::vector<float> back(xf.size());
        must(check_cuda(cudaMemcpy(back.data(), dreal, back.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost), "cudaMemcpy c2r"), "c2r download");
        std::vector<cd> got(back.begin(), back.end()), want(x);
        for (cd &v : want)
            v *= (double)n;
        check_close(got, want, TOL_SINGLE, "c2r 1d inverse of r2c");
    }
    cufftDestroy(fwd);
    cufftDestroy(inv);
    cudaFree(dreal);
    cudaFree(dspec);
}

// Double precision, with the work area supplied by the program: the plan is
// made without auto-allocation and handed a cudaMalloc'd buffer of the size
// cuFFT asked for.
static void z2z_own_workarea(int n)
{
    char name[128];
    std::vector<cd> x = complex_data(n, 3);
    cufftDoubleComplex *d = upload<cufftDoubleComplex>(x);
    cufftHandle plan;
    size_t work_size = 0;
    void *work = nullptr;
    must(check_fft(cufftCreate(&plan), "z2z create"), "z2z create");
    check_fft(cufftSetAutoAllocation(plan, 0), "z2z auto allocation off");
    must(check_fft(cufftMakePlan1d(plan, n, CUFFT_Z2Z, 1, &work_size), "z2z make plan"),
         "z2z plan");
    if (work_size)
        must(check_cuda(cudaMalloc(&work, work_size), "cudaMalloc work area"), "work area");
    check_fft(cufftSetWorkArea(plan, work), "z2z set work area");
    cufftSetStream(plan, stream);
    if (check_fft(cufftExecZ2Z(plan, d, d, CUFFT_FORWARD), "z2z exec"))
        check_close(download(d, x.size()), dft(x, {n}, 1, -1), TOL_DOUBLE,
                    fmt_name(name, sizeof name, "z2z 1d n=%d forward, own work area", n));
    cufftDestroy(plan);
    cudaFree(work);
    cudaFree(d);
}

int main(void)
{
    int version = 0;
    must(check_fft(cufftGetVersion(&version), "cufftGetVersion"), "version");
    printf("cufft version %d\n", version);
    must(check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                    "cudaStreamCreate"), "stream");

    c2c({1000}, 3, "c2c 1d n=1000 batch=3");
    c2c({64, 48}, 1, "c2c 2d 64x48");
    c2c({16, 12, 10}, 2, "c2c 3d 16x12x10 batch=2");
    r2c_c2r(256, 4);
    z2z_own_workarea(512);

    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return check_exit_status();
}
