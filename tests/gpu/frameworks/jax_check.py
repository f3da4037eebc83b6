"""JAX on the GPU with its default XLA flags, natively and through rgpu
(tests/gpu/run.sh).

XLA loads its kernels through the driver API, asks the runtime for kernels
by symbol (cudaGetFuncBySymbol), runs cuBLAS, and by default records its
work into command buffers (CUDA graphs, with conditional nodes for loops).
No flag is set here: XLA_FLAGS, JAX_PLATFORMS and the allocator settings
are left as the user would have them (run.sh leaves them unset).

Checks: the backend is the GPU (JAX falls back to the CPU when its CUDA
plugin cannot start, which would make every other check pass without a
GPU); the layers a wrong result may come from, one at a time: transfers
alone (the matmul's inputs to the device and back), an elementwise jit
(one simple kernel), a reduction; then jit of matmuls at the highest and
the default precision, reductions, a gradient, loops (fori_loop, scan,
while_loop), a vmapped softmax, and jax.random's numbers (printed as a
hash: threefry is deterministic).  Each checked against NumPy in double.
A wrong result says on its FAIL line how it is wrong (zeros, NaN, the
first values); stderr has the same for every check, and the environment
that changes what XLA does.  See checks.py for the output convention.

Arguments: the parts to run (default all): device, basics, matmul,
reductions, gradient, loops, vmap_softmax, random (tests/gpu/jax_diag.sh
runs a few of them under several settings).
"""
import os  # noqa: E402
import sys  # noqa: E402

from checks import Checks, digest, need

np = need("numpy")
jax = need("jax")
import jax.numpy as jnp  # noqa: E402
from jax.scipy.special import logsumexp  # noqa: E402

c = Checks()
HIGHEST = jax.lax.Precision.HIGHEST


def header():
    for var in ("XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_ALLOCATOR",
                "XLA_PYTHON_CLIENT_MEM_FRACTION", "RGPU_SYNC"):
        c.detail(f"{var}={os.environ.get(var, '(unset)')}")
    devs = jax.devices()
    c.say(f"jax {jax.__version__}, devices: "
          + ", ".join(f"{d.platform}:{d.device_kind}" for d in devs))
    ok = jax.default_backend() == "gpu"
    c.result("jax default backend is gpu", ok, f"it is {jax.default_backend()}")
    if not ok:
        c.finish()


def basics():
    """What a matmul stands on, each alone: copies to the device and back,
    one elementwise kernel, one reduction."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 384)).astype(np.float32)
    d = jax.device_put(a)
    d.block_until_ready()
    c.equal("jax device_put / device_get round trip (256x384 float32)", np.asarray(d), a)
    twice = jax.jit(lambda x: x * 2.0 + 1.0)
    c.close("jax jit elementwise x * 2 + 1", np.asarray(twice(d)), a.astype(np.float64) * 2 + 1,
            1e-6)
    c.close("jax jit sum of the matmul's input", np.asarray(jax.jit(jnp.sum)(d)),
            a.astype(np.float64).sum(), 1e-5, 1e-6 * np.abs(a).sum())


def matmul():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 384)).astype(np.float32)
    b = rng.standard_normal((384, 128)).astype(np.float32)
    want = a.astype(np.float64) @ b
    exact = jax.jit(lambda x, y: jnp.matmul(x, y, precision=HIGHEST))
    c.close("jax jit matmul float32 precision HIGHEST", np.asarray(exact(a, b)), want, 1e-5)
    # Default precision may use TF32 (10-bit mantissas) on this GPU.
    default = jax.jit(lambda x, y: x @ y)
    c.close("jax jit matmul float32 default precision", np.asarray(default(a, b)), want, 5e-3)
    bf = jax.jit(lambda x, y: (x.astype(jnp.bfloat16) @ y.astype(jnp.bfloat16))
                 .astype(jnp.float32))
    c.close("jax jit matmul bfloat16", np.asarray(bf(a, b)), want, 3e-2)
    batched = jax.jit(lambda x, y: jnp.einsum("bij,bjk->bik", x, y, precision=HIGHEST))
    xa = rng.standard_normal((8, 32, 48)).astype(np.float32)
    xb = rng.standard_normal((8, 48, 16)).astype(np.float32)
    c.close("jax jit batched matmul (einsum)", np.asarray(batched(xa, xb)),
            np.einsum("bij,bjk->bik", xa.astype(np.float64), xb), 1e-5)


def reductions():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1024, 1000)).astype(np.float32)
    x64 = x.astype(np.float64)
    f = jax.jit(lambda v: (v.sum(), v.mean(axis=0), v.max(axis=1), jnp.argmax(v),
                           logsumexp(v, axis=1), v.var()))
    total, mean0, max1, amax, lse, var = (np.asarray(r) for r in f(x))
    # A float32 sum's error scales with the sum of magnitudes, not with the
    # result (which may be near zero): atol from that.
    c.close("jax jit sum", total, x64.sum(), 1e-5, 1e-6 * np.abs(x64).sum())
    c.close("jax jit mean axis 0", mean0, x64.mean(axis=0), 1e-5,
            1e-6 * np.abs(x64).mean(axis=0).max())
    c.equal("jax jit max axis 1", max1, x.max(axis=1))
    c.equal("jax jit argmax", amax, x.argmax())
    lse_want = np.log(np.exp(x64 - x64.max(axis=1, keepdims=True)).sum(axis=1)) + x64.max(axis=1)
    c.close("jax jit logsumexp axis 1", lse, lse_want, 1e-5)
    c.close("jax jit var", var, x64.var(), 1e-5)


def gradient():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w = (rng.standard_normal((32, 16)) / 8).astype(np.float32)

    def loss(weights, inputs):
        return jnp.tanh(jnp.dot(inputs, weights, precision=HIGHEST)).sum()

    got = np.asarray(jax.jit(jax.grad(loss))(w, x))
    t = np.tanh(x.astype(np.float64) @ w)
    c.close("jax jit grad of sum(tanh(x @ w))", got, x.T.astype(np.float64) @ (1 - t * t), 1e-5)


def loops():
    x0 = np.linspace(-1, 1, 4096, dtype=np.float32)
    f = jax.jit(lambda v: jax.lax.fori_loop(0, 100, lambda i, s: s * 0.99 + 1.0, v))
    want = 0.99 ** 100 * x0.astype(np.float64) + (1 - 0.99 ** 100) / 0.01
    c.close("jax jit fori_loop 100 steps", np.asarray(f(x0)), want, 1e-4)
    steps = np.arange(1, 201, dtype=np.float32)

    def step(carry, v):
        carry = carry + v
        return carry, carry

    g = jax.jit(lambda v: jax.lax.scan(step, jnp.float32(0), v)[1])
    c.close("jax jit scan (running sum)", np.asarray(g(steps)), np.cumsum(steps.astype(np.float64)),
            1e-6)
    # A loop whose trip count depends on the data (a while loop on the GPU).
    h = jax.jit(lambda v: jax.lax.while_loop(lambda s: s[0] < v, lambda s: (s[0] * 2, s[1] + 1),
                                             (jnp.int32(1), jnp.int32(0)))[1])
    c.equal("jax jit while_loop (data-dependent trip count)", np.asarray(h(jnp.int32(1000))), 10)


def vmap_softmax():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 300)).astype(np.float32)
    f = jax.jit(jax.vmap(jax.nn.softmax))
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    c.close("jax jit vmap softmax", np.asarray(f(x)), e / e.sum(axis=1, keepdims=True), 1e-5)


def random():
    key = jax.random.PRNGKey(0)
    z = np.asarray(jax.random.normal(key, (1 << 20,), dtype=jnp.float32))
    c.say(f"jax.random.normal PRNGKey(0) n={1 << 20}: hash {digest(z)}")
    c.within("jax.random.normal mean", float(z.mean(dtype=np.float64)), -0.007, 0.007)
    c.within("jax.random.normal sd", float(z.std(dtype=np.float64)), 0.993, 1.007)
    u = np.asarray(jax.random.uniform(jax.random.split(key)[1], (1 << 16,)))
    c.say(f"jax.random.uniform split key: hash {digest(u)}")
    c.equal("jax device_put / device_get round trip", np.asarray(jax.device_put(u)), u)


PARTS = {"device": header, "basics": basics, "matmul": matmul, "reductions": reductions,
         "gradient": gradient, "loops": loops, "vmap_softmax": vmap_softmax, "random": random}
wanted = sys.argv[1:] or list(PARTS)
unknown = [w for w in wanted if w not in PARTS]
if unknown:
    print(f"jax_check.py: unknown parts {unknown}; known: {list(PARTS)}", file=sys.stderr)
    sys.exit(2)
if "device" not in wanted:
    wanted.insert(0, "device")     # never check on the CPU by mistake
for name in wanted:
    c.section(name, PARTS[name])
c.finish()
