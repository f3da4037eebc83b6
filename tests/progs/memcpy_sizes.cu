// Copies of 0 B, 1 B, 4 KiB+1 and 64 MiB in every direction (H2D, D2H,
// D2D, H2H), with an explicit kind, with cudaMemcpyDefault and with
// cudaMemcpyAsync on a created stream, from pageable and from pinned
// (cudaMallocHost, cudaHostAlloc, cudaHostRegister) host memory; then
// cudaMemcpy2D between pitched allocations.  rgpu has to chunk the large
// copies, classify pointers itself for cudaMemcpyDefault, and deliver async
// D2H data into pageable memory by the time the stream is synchronized.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static const size_t sizes[] = {0, 1, 4097, (size_t)64 << 20};
#define MAXSZ ((size_t)64 << 20)
#define CAP (MAXSZ + 1)     // one sentinel byte past the largest copy
#define POISON 0xEE

// A pattern that does not repeat at any power of two, so a copy that lands
// at the wrong offset or misses a chunk cannot match by accident.
static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 2654435761u) >> 13) ^ (uint8_t)(i / 251) ^ (uint8_t)seed;
}

enum host_kind { PAGEABLE, MALLOC_HOST, HOST_ALLOC, HOST_REGISTER, NKINDS };
static const char *kind_name[] = {"pageable", "cudaMallocHost", "cudaHostAlloc", "cudaHostRegister"};
static const size_t reg_size = (CAP + 4095) & ~(size_t)4095;

static uint8_t *host_alloc(enum host_kind k)
{
    void *p = NULL;
    switch (k) {
    case PAGEABLE:
        p = malloc(CAP);
        break;
    case MALLOC_HOST:
        if (cudaMallocHost(&p, CAP) != cudaSuccess)
            p = NULL;
        break;
    case HOST_ALLOC:
        if (cudaHostAlloc(&p, CAP, cudaHostAllocDefault) != cudaSuccess)
            p = NULL;
        break;
    case HOST_REGISTER:
        p = aligned_alloc(4096, reg_size);
        if (p && cudaHostRegister(p, reg_size, cudaHostRegisterDefault) != cudaSuccess) {
            free(p);
            p = NULL;
        }
        break;
    default:
        break;
    }
    return (uint8_t *)p;
}

static cudaError_t host_free(enum host_kind k, uint8_t *p)
{
    cudaError_t e = cudaSuccess;
    switch (k) {
    case PAGEABLE:
        free(p);
        break;
    case MALLOC_HOST:
    case HOST_ALLOC:
        e = cudaFreeHost(p);
        break;
    case HOST_REGISTER:
        e = cudaHostUnregister(p);
        free(p);
        break;
    default:
        break;
    }
    return e;
}

// The three ways of issuing a copy.
enum mode { EXPLICIT, DEFAULT, ASYNC, NMODES };
static const char *mode_name[] = {"memcpy", "memcpy-default", "memcpy-async"};

struct ctx {
    enum mode mode;
    cudaStream_t stream;
    cudaError_t err;     // first failure in the current chain of copies
    const char *what;
};

static void copy(struct ctx *c, void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                 const char *what)
{
    cudaError_t e;
    if (c->mode == ASYNC)
        e = cudaMemcpyAsync(dst, src, n, kind, c->stream);
    else
        e = cudaMemcpy(dst, src, n, c->mode == DEFAULT ? cudaMemcpyDefault : kind);
    if (e != cudaSuccess && c->err == cudaSuccess) {
        c->err = e;
        c->what = what;
    }
}

// Ends a chain: synchronizes the stream in async mode, then compares
// got[0..n) with want[0..n) and checks the sentinel at got[n].
static void verify(struct ctx *c, const char *name, const uint8_t *got, const uint8_t *want,
                   size_t n)
{
    if (c->mode == ASYNC) {
        cudaError_t e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess && c->err == cudaSuccess) {
            c->err = e;
            c->what = "cudaStreamSynchronize";
        }
    }
    if (c->err != cudaSuccess) {
        check(false, name, "%s: %s", c->what, cudaGetErrorName(c->err));
    } else {
        size_t bad = n;
        if (memcmp(got, want, n) != 0)
            for (bad = 0; got[bad] == want[bad]; bad++)
                ;
        if (bad < n)
            check(false, name, "byte %zu is 0x%02x, want 0x%02x", bad, got[bad], want[bad]);
        else
            check(got[n] == POISON, name, "wrote past the end (byte %zu is 0x%02x)", n, got[n]);
    }
    c->err = cudaSuccess;
}

static void test_copies(enum host_kind k, uint8_t *hsrc, uint8_t *hdst, uint8_t *d1, uint8_t *d2,
                        cudaStream_t stream, unsigned *seed)
{
    char name[128];
    for (int m = 0; m < NMODES; m++) {
        struct ctx c = {(enum mode)m, stream, cudaSuccess, NULL};
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            const char *pre = fmt_name(name, sizeof name, "%s %s %zu", mode_name[m], kind_name[k], n);
            char full[160];

            fill(hsrc, n, ++*seed);
            memset(hdst, POISON, n + 1);
            copy(&c, d1, hsrc, n, cudaMemcpyHostToDevice, "H2D");
            copy(&c, hdst, d1, n, cudaMemcpyDeviceToHost, "D2H");
            verify(&c, fmt_name(full, sizeof full, "%s h2d+d2h", pre), hdst, hsrc, n);

            memset(hdst, POISON, n + 1);
            copy(&c, d2, d1, n, cudaMemcpyDeviceToDevice, "D2D");
            copy(&c, hdst, d2, n, cudaMemcpyDeviceToHost, "D2H");
            verify(&c, fmt_name(full, sizeof full, "%s d2d", pre), hdst, hsrc, n);

            memset(hdst, POISON, n + 1);
            copy(&c, hdst, hsrc, n, cudaMemcpyHostToHost, "H2H");
            verify(&c, fmt_name(full, sizeof full, "%s h2h", pre), hdst, hsrc, n);
        }
    }
}

// cudaMemcpy2D H2D -> D2D -> D2H between pitched device allocations and
// host buffers of yet other pitches; padding bytes must stay untouched.
// tag names the case; rows packed in host memory (a pitch equal to the
// width) and copies of a megabyte and more take other paths through rgpu
// than small strided ones, and copies larger than a frame go in pieces.
static void test_2d(unsigned *seed, const char *tag, size_t width, size_t height, size_t spitch,
                    size_t dpitch)
{
    char name[128];
    uint8_t *hsrc = (uint8_t *)malloc(spitch * height);
    uint8_t *hdst = (uint8_t *)malloc(dpitch * height);
    void *dp1 = NULL, *dp2 = NULL;
    size_t pitch1 = 0, pitch2 = 0;

    if (!check_cuda(cudaMallocPitch(&dp1, &pitch1, width, height),
                    fmt_name(name, sizeof name, "%s cudaMallocPitch 1", tag)) ||
        !check_cuda(cudaMallocPitch(&dp2, &pitch2, width, height),
                    fmt_name(name, sizeof name, "%s cudaMallocPitch 2", tag)))
        return;
    check(pitch1 >= width && pitch2 >= width, fmt_name(name, sizeof name, "%s pitch >= width", tag),
          "pitches %zu, %zu", pitch1, pitch2);

    fill(hsrc, spitch * height, ++*seed);
    memset(hdst, POISON, dpitch * height);
    check_cuda(cudaMemcpy2D(dp1, pitch1, hsrc, spitch, width, height, cudaMemcpyHostToDevice),
               fmt_name(name, sizeof name, "%s cudaMemcpy2D H2D", tag));
    check_cuda(cudaMemcpy2D(dp2, pitch2, dp1, pitch1, width, height, cudaMemcpyDeviceToDevice),
               fmt_name(name, sizeof name, "%s cudaMemcpy2D D2D", tag));
    check_cuda(cudaMemcpy2D(hdst, dpitch, dp2, pitch2, width, height, cudaMemcpyDeviceToHost),
               fmt_name(name, sizeof name, "%s cudaMemcpy2D D2H", tag));

    size_t bad_r = 0, bad_c = 0;
    bool ok = true;
    for (size_t r = 0; r < height && ok; r++)
        for (size_t col = 0; col < dpitch && ok; col++) {
            uint8_t want = col < width ? hsrc[r * spitch + col] : POISON;
            if (hdst[r * dpitch + col] != want) {
                ok = false;
                bad_r = r;
                bad_c = col;
            }
        }
    check(ok, fmt_name(name, sizeof name, "%s data", tag), "row %zu col %zu differs", bad_r,
          bad_c);

    check_cuda(cudaFree(dp1), fmt_name(name, sizeof name, "%s cudaFree 1", tag));
    check_cuda(cudaFree(dp2), fmt_name(name, sizeof name, "%s cudaFree 2", tag));
    free(hsrc);
    free(hdst);
}

int main(void)
{
    uint8_t *d1 = NULL, *d2 = NULL;
    cudaStream_t stream;
    unsigned seed = 0;
    char name[128];

    if (!check_cuda(cudaMalloc((void **)&d1, MAXSZ), "cudaMalloc d1") ||
        !check_cuda(cudaMalloc((void **)&d2, MAXSZ), "cudaMalloc d2") ||
        !check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate"))
        return 1;

    struct cudaPointerAttributes pa;
    cudaError_t e = cudaPointerGetAttributes(&pa, d1);
    check(e == cudaSuccess && pa.type == cudaMemoryTypeDevice, "cudaPointerGetAttributes device",
          "%s, type %d", cudaGetErrorName(e), (int)pa.type);

    // Host kinds one at a time, so that only two 64 MiB host buffers exist.
    for (int k = 0; k < NKINDS; k++) {
        uint8_t *hsrc = host_alloc((enum host_kind)k);
        uint8_t *hdst = host_alloc((enum host_kind)k);
        if (!check(hsrc && hdst, fmt_name(name, sizeof name, "alloc %s", kind_name[k]),
                   "allocation failed"))
            continue;

        // Pinned memory is cudaMemoryTypeHost, plain malloc is unregistered.
        cudaMemoryType want = k == PAGEABLE ? cudaMemoryTypeUnregistered : cudaMemoryTypeHost;
        e = cudaPointerGetAttributes(&pa, hsrc);
        check(e == cudaSuccess && pa.type == want,
              fmt_name(name, sizeof name, "cudaPointerGetAttributes %s", kind_name[k]),
              "%s, type %d", cudaGetErrorName(e), (int)pa.type);

        test_copies((enum host_kind)k, hsrc, hdst, d1, d2, stream, &seed);

        check_cuda(host_free((enum host_kind)k, hsrc),
                   fmt_name(name, sizeof name, "free %s src", kind_name[k]));
        check_cuda(host_free((enum host_kind)k, hdst),
                   fmt_name(name, sizeof name, "free %s dst", kind_name[k]));
    }

    test_2d(&seed, "2d", 1001, 37, 1031, 1013);
    test_2d(&seed, "2d large", 4001, 300, 4099, 4003);
    test_2d(&seed, "2d large packed", 4000, 300, 4000, 4000);
    // More rows than one frame holds (75 MiB): rgpu sends them in pieces.
    test_2d(&seed, "2d tall", 65537, 1200, 65544, 65540);

    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    check_cuda(cudaFree(d1), "cudaFree d1");
    check_cuda(cudaFree(d2), "cudaFree d2");
    return check_exit_status();
}
