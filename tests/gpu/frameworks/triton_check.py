"""Triton kernels called directly (not through torch.compile), natively and
through rgpu (tests/gpu/run.sh).

Triton loads its compiled kernels with the driver API and launches them
with its own launcher (cuLaunchKernelEx), on PyTorch's current stream.  The
kernel cache goes to a fresh folder (TRITON_CACHE_DIR) so that the rgpu run
compiles and loads every kernel again.  Kernels: vector add (also on a side
stream), row softmax, a blockwise sum, a matmul with tl.dot, and a tile
copy through TMA tensor descriptors made on the host (the launcher encodes
them with cuTensorMapEncodeTiled and passes them by value); each
checked against PyTorch on the CPU.  See checks.py for the output
convention.
"""
from checks import Checks, fresh_cache, need

fresh_cache("TRITON_CACHE_DIR")
torch = need("torch")
triton = need("triton")
need("numpy")
import triton.language as tl  # noqa: E402 - after the cache is chosen

c = Checks()


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + offs, num / tl.sum(num, axis=0), mask=mask)


@triton.jit
def block_sum_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        kk = k + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def tma_scale_kernel(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    out_desc.store([m, n], in_desc.load([m, n]) * 2.0)


def host(t):
    return t.detach().cpu().numpy()


def header():
    ok = torch.cuda.is_available()
    c.result("torch.cuda.is_available", ok)
    if not ok:
        c.finish()
    c.say(f"triton {triton.__version__}, torch {torch.__version__}, "
          f"device 0: {torch.cuda.get_device_name(0)}")
    try:    # what Triton compiles for, as the driver reports the device
        target = triton.runtime.driver.active.get_current_target()
        c.say(f"triton target: {target.backend} arch {target.arch} warp {target.warp_size}")
    except AttributeError:   # an older Triton without this interface
        c.say("triton target: (not reported by this Triton)")


def vector_add():
    g = torch.Generator().manual_seed(0)
    n = 98432
    x = torch.randn(n, generator=g)
    y = torch.randn(n, generator=g)
    gx, gy = x.cuda(), y.cuda()
    out = torch.empty_like(gx)
    add_kernel[(triton.cdiv(n, 1024),)](gx, gy, out, n, BLOCK=1024)
    c.equal("triton vector add", host(out), host(x + y))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out2 = torch.empty_like(gx)
        add_kernel[(triton.cdiv(n, 256),)](gx, out, out2, n, BLOCK=256)
    torch.cuda.current_stream().wait_stream(side)
    c.equal("triton vector add on a side stream", host(out2), host(x + (x + y)))


def softmax():
    g = torch.Generator().manual_seed(1)
    rows, cols = 512, 781
    x = torch.randn(rows, cols, generator=g)
    gx = x.cuda()
    out = torch.empty_like(gx)
    softmax_kernel[(rows,)](out, gx, gx.stride(0), out.stride(0), cols,
                            BLOCK=triton.next_power_of_2(cols))
    c.close("triton row softmax 512x781", host(out), host(torch.softmax(x.double(), dim=1)),
            1e-5)


def block_sum():
    g = torch.Generator().manual_seed(2)
    n, block = 1 << 20, 2048
    x = torch.rand(n, generator=g)
    partial = torch.empty(triton.cdiv(n, block), device="cuda")
    block_sum_kernel[(partial.numel(),)](x.cuda(), partial, n, BLOCK=block)
    c.close("triton blockwise sum", host(partial),
            host(x.double().view(-1, block).sum(dim=1)), 1e-5)


def matmul():
    g = torch.Generator().manual_seed(3)
    m, n, k = 192, 160, 128
    a = torch.randn(m, k, generator=g).half()
    b = torch.randn(k, n, generator=g).half()
    ga, gb = a.cuda(), b.cuda()
    out = torch.empty(m, n, device="cuda", dtype=torch.float32)
    grid = (triton.cdiv(m, 64), triton.cdiv(n, 64))
    matmul_kernel[grid](ga, gb, out, m, n, k, ga.stride(0), ga.stride(1), gb.stride(0),
                        gb.stride(1), out.stride(0), out.stride(1), BM=64, BN=64, BK=32)
    c.close("triton matmul tl.dot fp16 -> fp32 192x160x128", host(out),
            host(a.double() @ b.double()), 1e-3)


def tma_descriptors():
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:
        c.say("triton TMA descriptors: not in this Triton")
        return
    if torch.cuda.get_device_capability() < (9, 0):
        c.say("triton TMA descriptors: the GPU has no TMA")
        return
    g = torch.Generator().manual_seed(4)
    x = torch.randn(256, 192, generator=g)
    gx = x.cuda()
    out = torch.zeros_like(gx)
    block = [64, 64]
    tma_scale_kernel[(4, 3)](TensorDescriptor.from_tensor(gx, block),
                             TensorDescriptor.from_tensor(out, block), BM=64, BN=64)
    c.equal("triton TMA descriptor tile copy x2 256x192", host(out), host(x * 2.0))


c.section("device", header)
for part in (vector_add, softmax, block_sum, matmul, tma_descriptors):
    c.section(part.__name__, part)
torch.cuda.synchronize()
c.finish()
