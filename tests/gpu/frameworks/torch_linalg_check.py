"""PyTorch's torch.fft and torch.linalg on the GPU, natively and through rgpu
(tests/gpu/run.sh).

These run on cuFFT and cuSOLVER (and cuBLAS's batched solvers), which link
the CUDA runtime statically: through rgpu they run on the client and reach
the driver through cuGetExportTable.  Inputs are made on the CPU with a
seeded generator; each GPU result is checked against the same operation on
the CPU.  See checks.py for the output convention.
"""
from checks import Checks, need

torch = need("torch")
need("numpy")    # Tensor.numpy() in the comparisons

c = Checks()


def host(t):
    return t.detach().cpu().numpy()


def header():
    ok = torch.cuda.is_available()
    c.result("torch.cuda.is_available", ok)
    if not ok:
        c.finish()
    c.say(f"torch {torch.__version__}, cuda {torch.version.cuda}, "
          f"device 0: {torch.cuda.get_device_name(0)}")


def fft():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 1000, dtype=torch.complex128, generator=g)
    gx = x.cuda()
    c.close("torch.fft.fft complex128 n=1000 batch 3", host(torch.fft.fft(gx)),
            host(torch.fft.fft(x)), 1e-11)
    c.close("torch.fft.fft complex64 n=1000 batch 3",
            host(torch.fft.fft(gx.to(torch.complex64))), host(torch.fft.fft(x)), 1e-5)
    c.close("torch.fft.ifft(fft)", host(torch.fft.ifft(torch.fft.fft(gx))), host(x), 1e-12)
    y = torch.randn(64, 48, dtype=torch.complex128, generator=g)
    c.close("torch.fft.fft2 64x48", host(torch.fft.fft2(y.cuda())), host(torch.fft.fft2(y)),
            1e-11)
    z = torch.randn(16, 12, 10, dtype=torch.float64, generator=g)
    c.close("torch.fft.fftn 16x12x10", host(torch.fft.fftn(z.cuda())),
            host(torch.fft.fftn(z)), 1e-11)
    r = torch.randn(4, 256, dtype=torch.float32, generator=g)
    gr = r.cuda()
    c.close("torch.fft.rfft float32 n=256 batch 4", host(torch.fft.rfft(gr)),
            host(torch.fft.rfft(r.double())), 1e-5)
    c.close("torch.fft.irfft(rfft) float32", host(torch.fft.irfft(torch.fft.rfft(gr), n=256)),
            host(r), 1e-5)


def linalg():
    g = torch.Generator().manual_seed(1)
    n = 64
    a = torch.randn(n, n, dtype=torch.float64, generator=g) + n * torch.eye(n,
                                                                           dtype=torch.float64)
    b = torch.randn(n, 3, dtype=torch.float64, generator=g)
    ga, gb = a.cuda(), b.cuda()
    want = host(torch.linalg.solve(a, b))
    c.close("torch.linalg.solve float64", host(torch.linalg.solve(ga, gb)), want, 1e-10)
    c.close("torch.linalg.solve float32", host(torch.linalg.solve(ga.float(), gb.float())),
            want, 1e-4)
    ba = torch.randn(32, 8, 8, dtype=torch.float64, generator=g) + 8 * torch.eye(8,
                                                                                dtype=torch.float64)
    bb = torch.randn(32, 8, 2, dtype=torch.float64, generator=g)
    c.close("torch.linalg.solve batched 32 x 8x8", host(torch.linalg.solve(ba.cuda(), bb.cuda())),
            host(torch.linalg.solve(ba, bb)), 1e-10)
    c.close("torch.linalg.inv", host(torch.linalg.inv(ga)), host(torch.linalg.inv(a)), 1e-10)
    c.close("torch.linalg.det", host(torch.linalg.det(ga / n)), host(torch.linalg.det(a / n)),
            1e-10)

    m = torch.randn(96, 64, dtype=torch.float64, generator=g)
    gm = m.cuda()
    u, s, vh = torch.linalg.svd(gm, full_matrices=False)
    c.close("torch.linalg.svd singular values", host(s), host(torch.linalg.svdvals(m)), 1e-10)
    c.close("torch.linalg.svd U S Vh = A", host((u * s) @ vh), host(m), 1e-10)
    c.close("torch.linalg.svd float32 singular values", host(torch.linalg.svdvals(gm.float())),
            host(torch.linalg.svdvals(m)), 1e-4)
    sym = a + a.T
    w, v = torch.linalg.eigh(sym.cuda())
    c.close("torch.linalg.eigh eigenvalues", host(w), host(torch.linalg.eigvalsh(sym)), 1e-10)
    c.close("torch.linalg.eigh V diag(w) V^T = A", host((v * w) @ v.T), host(sym), 1e-10)
    q, r = torch.linalg.qr(gm)
    c.close("torch.linalg.qr Q R = A", host(q @ r), host(m), 1e-10)
    spd = a @ a.T
    c.close("torch.linalg.cholesky", host(torch.linalg.cholesky(spd.cuda())),
            host(torch.linalg.cholesky(spd)), 1e-10)
    rhs = torch.randn(96, 2, dtype=torch.float64, generator=g)
    c.close("torch.linalg.lstsq 96x64", host(torch.linalg.lstsq(gm, rhs.cuda()).solution),
            host(torch.linalg.lstsq(m, rhs).solution), 1e-9)


c.section("device", header)
c.section("fft", fft)
c.section("linalg", linalg)
torch.cuda.synchronize()
c.finish()
