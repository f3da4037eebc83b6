// Copies between device memory and pinned host memory as XLA's runtime
// makes them: a kernel on one stream, an event without timing, a copy on
// another stream that waits for it, and the program learning that the copy
// finished by one of the ways CUDA offers (event query, event synchronise,
// stream query, a host function enqueued after the copy that reads the
// buffer, another stream that waits for the copy and is synchronised, a
// context synchronise).  The bytes must be in the program's buffer when
// it may look, for every kind of pinned memory (cuMemHostAlloc,
// cuMemAllocHost, cuMemHostRegister), and a host-to-device copy must take
// what the program wrote before it, also when the program rewrites the
// buffer once the copy is known complete.
//
// Then the same through pinned memory that a device call names (a memset,
// a device-to-device copy, a kernel given its pointer), as XLA treats
// pinned buffers under unified addressing: its sub-buffers share pages,
// and what one writer puts in one part must survive what another puts in
// the next part (rgpu keeps a GPU copy of such memory: common/rgpu_mapped.c).
//
// Last, unified addressing itself: no host memory of the process lies at
// a device address, and pointer attributes tell the kinds apart (XLA asks
// them of the buffers it frees).
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "check.h"
#include "kernels.cuh"

#define N 4096                  // words per copy: 16 KiB, four pages
#define BYTES (N * sizeof(uint32_t))
#define WAIT_S 20               // a host function waited for at most this long

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void nap(void)
{
    struct timespec ms = { 0, 1000000 };
    nanosleep(&ms, NULL);
}

// The first index i < n where p[i] != want, or n.
static size_t first_bad(const uint32_t *p, size_t n, uint32_t want)
{
    size_t i = 0;
    while (i < n && p[i] == want)
        i++;
    return i;
}

static void check_words(const uint32_t *p, size_t n, uint32_t want, const char *name)
{
    size_t i = first_bad(p, n, want);
    check(i == n, name, "word %zu of %zu is %#x, want %#x", i, n, i < n ? p[i] : 0, want);
}

// ---- the ways a program learns that work on a stream finished ---------------------

enum method { EVENT_QUERY, EVENT_SYNC, STREAM_QUERY, HOST_FUNCTION, OTHER_STREAM, CTX_SYNC,
              NMETHODS };
static const char *const method_names[NMETHODS] = {
    "cuEventQuery polled", "cuEventSynchronize", "cuStreamQuery polled",
    "a host function after it", "cuStreamWaitEvent and the other stream synchronised",
    "cuCtxSynchronize",
};

// What a host function saw of the buffer when it ran.
struct look {
    const uint32_t *buf;
    size_t n;
    uint32_t want;
    size_t bad;                 // first_bad when it ran
    int ran;
};

static void CUDA_CB look_at_buffer(void *arg)
{
    struct look *l = (struct look *)arg;
    l->bad = first_bad(l->buf, l->n, l->want);
    __atomic_store_n(&l->ran, 1, __ATOMIC_RELEASE);
}

struct streams {
    CUstream a, b, c;           // producer, copier, a third that waits for the copier
    CUevent produced, copied;   // without timing, as XLA makes them
};

// Wait by method m for everything enqueued on s.b so far; a host function
// (HOST_FUNCTION) looks at look->buf when it runs, without any CUDA call
// from the program until it has.  Whether the wait itself succeeded.
static bool wait_for(enum method m, const struct streams *s, struct look *look)
{
    CUresult r = CUDA_SUCCESS;
    double end = now_s() + WAIT_S;
    switch (m) {
    case EVENT_QUERY:
        r = cuEventRecord(s->copied, s->b);
        if (r == CUDA_SUCCESS)
            while ((r = cuEventQuery(s->copied)) == CUDA_ERROR_NOT_READY)
                nap();
        break;
    case EVENT_SYNC:
        r = cuEventRecord(s->copied, s->b);
        if (r == CUDA_SUCCESS)
            r = cuEventSynchronize(s->copied);
        break;
    case STREAM_QUERY:
        while ((r = cuStreamQuery(s->b)) == CUDA_ERROR_NOT_READY)
            nap();
        break;
    case HOST_FUNCTION:
        look->ran = 0;
        r = cuLaunchHostFunc(s->b, look_at_buffer, look);
        while (r == CUDA_SUCCESS && !__atomic_load_n(&look->ran, __ATOMIC_ACQUIRE)) {
            if (now_s() > end)
                return false;
            nap();
        }
        break;
    case OTHER_STREAM:
        r = cuEventRecord(s->copied, s->b);
        if (r == CUDA_SUCCESS)
            r = cuStreamWaitEvent(s->c, s->copied, 0);
        if (r == CUDA_SUCCESS)
            r = cuStreamSynchronize(s->c);
        break;
    case CTX_SYNC:
        r = cuCtxSynchronize();
        break;
    case NMETHODS:
        break;
    }
    return r == CUDA_SUCCESS;
}

// Checks what the program (or the host function) saw of buf[0, n).
static void check_seen(enum method m, const struct look *look, const uint32_t *buf, size_t n,
                       uint32_t want, const char *name)
{
    if (m == HOST_FUNCTION) {
        check(look->bad == n, name, "the host function saw word %zu of %zu as %#x, want %#x",
              look->bad, n, look->bad < n ? buf[look->bad] : 0, want);
        return;
    }
    check_words(buf, n, want, name);
}

// ---- pinned memory of each kind ----------------------------------------------------

enum kind { HOST_ALLOC, ALLOC_HOST, HOST_REGISTER, NKINDS };
static const char *const kind_names[NKINDS] = {
    "cuMemHostAlloc(PORTABLE)", "cuMemAllocHost", "cuMemHostRegister(PORTABLE)",
};

static uint32_t *pinned_alloc(enum kind k, size_t bytes)
{
    void *p = NULL;
    switch (k) {
    case HOST_ALLOC:
        return cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS
                   ? (uint32_t *)p : NULL;
    case ALLOC_HOST:
        return cuMemAllocHost(&p, bytes) == CUDA_SUCCESS ? (uint32_t *)p : NULL;
    case HOST_REGISTER:
        if (posix_memalign(&p, 4096, bytes) != 0)
            return NULL;
        if (cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_PORTABLE) != CUDA_SUCCESS) {
            free(p);
            return NULL;
        }
        return (uint32_t *)p;
    case NKINDS:
        break;
    }
    return NULL;
}

static void pinned_free(enum kind k, uint32_t *p)
{
    if (k == HOST_REGISTER) {
        cuMemHostUnregister(p);
        free(p);
    } else {
        cuMemFreeHost(p);
    }
}

static unsigned blocks(size_t n) { return (unsigned)((n + 255) / 256); }

// A kernel on stream a fills d; stream b waits for it by an event and
// copies d into h; the program learns the copy finished by method m.
static void device_to_host(const struct streams *s, CUdeviceptr d, uint32_t *h, uint32_t value,
                           enum method m, const char *what)
{
    char name[200];
    struct look look = { h, N, value, 0, 0 };
    memset(h, 0, BYTES);
    k_fill_u32<<<blocks(N), 256, 0, (cudaStream_t)s->a>>>((uint32_t *)(uintptr_t)d, value, N);
    bool ok = cuEventRecord(s->produced, s->a) == CUDA_SUCCESS &&
              cuStreamWaitEvent(s->b, s->produced, 0) == CUDA_SUCCESS &&
              cuMemcpyDtoHAsync(h, d, BYTES, s->b) == CUDA_SUCCESS;
    check(ok, fmt_name(name, sizeof name, "%s: kernel, event, copy to the host enqueued", what),
          "failed");
    check(wait_for(m, s, &look), fmt_name(name, sizeof name, "%s: waited by %s", what,
                                          method_names[m]), "failed");
    check_seen(m, &look, h, N, value,
               fmt_name(name, sizeof name, "%s: the bytes were there by %s", what,
                        method_names[m]));
}

// The program writes h, copies it to d1 and learns the copy finished by
// method m; then rewrites h and copies it to d2: each device buffer holds
// what h held when its copy was enqueued.
static void host_to_device(const struct streams *s, CUdeviceptr d1, CUdeviceptr d2, uint32_t *h,
                           uint32_t value, enum method m, const char *what)
{
    char name[200];
    struct look look = { h, N, value, 0, 0 };
    uint32_t *back = (uint32_t *)malloc(BYTES);
    for (size_t i = 0; i < N; i++)
        h[i] = value;
    check(cuMemcpyHtoDAsync(d1, h, BYTES, s->b) == CUDA_SUCCESS && wait_for(m, s, &look),
          fmt_name(name, sizeof name, "%s: copy to the device waited for by %s", what,
                   method_names[m]), "failed");
    for (size_t i = 0; i < N; i++)
        h[i] = value + 1;
    check(cuMemcpyHtoDAsync(d2, h, BYTES, s->b) == CUDA_SUCCESS &&
              cuStreamSynchronize(s->b) == CUDA_SUCCESS,
          fmt_name(name, sizeof name, "%s: second copy to the device", what), "failed");
    check(back && cuMemcpyDtoH(back, d1, BYTES) == CUDA_SUCCESS,
          fmt_name(name, sizeof name, "%s: first device buffer read back", what), "failed");
    check_words(back, N, value,
                fmt_name(name, sizeof name, "%s: the first copy took the bytes of its time (%s)",
                         what, method_names[m]));
    check(back && cuMemcpyDtoH(back, d2, BYTES) == CUDA_SUCCESS,
          fmt_name(name, sizeof name, "%s: second device buffer read back", what), "failed");
    check_words(back, N, value + 1,
                fmt_name(name, sizeof name, "%s: the second copy took the rewritten bytes",
                         what));
    free(back);
}

static void every_kind_and_method(const struct streams *s, CUdeviceptr d1, CUdeviceptr d2)
{
    for (int k = 0; k < NKINDS; k++) {
        uint32_t *h = pinned_alloc((enum kind)k, BYTES);
        char name[160];
        if (!check(h != NULL, fmt_name(name, sizeof name, "%s", kind_names[k]), "failed"))
            continue;
        for (int m = 0; m < NMETHODS; m++) {
            uint32_t value = 0x1000u * (k + 1) + 0x10u * (m + 1);
            device_to_host(s, d1, h, value, (enum method)m, kind_names[k]);
            host_to_device(s, d1, d2, h, value + 5, (enum method)m, kind_names[k]);
        }
        pinned_free((enum kind)k, h);
    }
}

// ---- pinned memory that device calls name ----------------------------------------------

// One pinned allocation cut into sub-buffers, as a host allocator cuts its
// regions: several share each page.  A memset names it first, so that
// (through rgpu) it has a GPU copy from then on.
#define WORDS_PER_PART 256      // 1 KiB: four parts per page
#define PARTS 16

static uint32_t *part(uint32_t *base, int i) { return base + (size_t)i * WORDS_PER_PART; }

static CUdeviceptr part_dev(uint32_t *base, int i)
{
    return (CUdeviceptr)(uintptr_t)part(base, i);
}

static void named_pinned(const struct streams *s, CUdeviceptr d)
{
    uint32_t *p = pinned_alloc(HOST_ALLOC, PARTS * WORDS_PER_PART * sizeof(uint32_t));
    struct look look = { NULL, WORDS_PER_PART, 0, 0, 0 };
    const size_t part_bytes = WORDS_PER_PART * sizeof(uint32_t);
    if (!check(p != NULL, "sub-allocated pinned memory", "failed"))
        return;
    for (int i = 0; i < PARTS; i++)
        for (size_t w = 0; w < WORDS_PER_PART; w++)
            part(p, i)[w] = 0xa0u + i;
    check(cuMemsetD32Async(part_dev(p, 0), 0x11u, WORDS_PER_PART, s->b) == CUDA_SUCCESS &&
              cuStreamSynchronize(s->b) == CUDA_SUCCESS,
          "memset of pinned part 0", "failed");
    check_words(part(p, 0), WORDS_PER_PART, 0x11u, "part 0 holds the memset's words");
    check_words(part(p, 1), WORDS_PER_PART, 0xa1u, "part 1 beside it kept the program's words");

    // A memset of part 0 and a copy to the host into part 1, its neighbour
    // in the same page, in stream order: each part holds its writer's bytes.
    k_fill_u32<<<1, 256, 0, (cudaStream_t)s->a>>>((uint32_t *)(uintptr_t)d, 0x22u, WORDS_PER_PART);
    check(cuEventRecord(s->produced, s->a) == CUDA_SUCCESS &&
              cuStreamWaitEvent(s->b, s->produced, 0) == CUDA_SUCCESS &&
              cuMemsetD32Async(part_dev(p, 0), 0x33u, WORDS_PER_PART, s->b) == CUDA_SUCCESS &&
              cuMemcpyDtoHAsync(part(p, 1), d, part_bytes, s->b) == CUDA_SUCCESS &&
              cuStreamSynchronize(s->b) == CUDA_SUCCESS,
          "memset of part 0, copy to the host into part 1", "failed");
    check_words(part(p, 0), WORDS_PER_PART, 0x33u, "part 0 holds the second memset's words");
    check_words(part(p, 1), WORDS_PER_PART, 0x22u, "part 1 holds the copy's words");

    // A memset of part 2, then a copy to the host over the same words: the
    // copy comes later in stream order, so its words are the ones left.
    k_fill_u32<<<1, 256, 0, (cudaStream_t)s->a>>>((uint32_t *)(uintptr_t)d, 0x44u, WORDS_PER_PART);
    check(cuEventRecord(s->produced, s->a) == CUDA_SUCCESS &&
              cuStreamWaitEvent(s->b, s->produced, 0) == CUDA_SUCCESS &&
              cuMemsetD32Async(part_dev(p, 2), 0x55u, WORDS_PER_PART, s->b) == CUDA_SUCCESS &&
              cuMemcpyDtoHAsync(part(p, 2), d, part_bytes, s->b) == CUDA_SUCCESS &&
              cuStreamSynchronize(s->b) == CUDA_SUCCESS,
          "memset of part 2, then a copy to the host over it", "failed");
    check_words(part(p, 2), WORDS_PER_PART, 0x44u, "part 2 holds the later copy's words");

    // The program writes part 3 while a memset of part 0, in the same page,
    // is enqueued and not yet waited for; then copies part 3 to the device.
    check(cuMemsetD32Async(part_dev(p, 0), 0x66u, WORDS_PER_PART, s->b) == CUDA_SUCCESS,
          "memset of part 0 enqueued", "failed");
    for (size_t w = 0; w < WORDS_PER_PART; w++)
        part(p, 3)[w] = 0x77u;
    uint32_t back[WORDS_PER_PART];
    check(cuMemcpyHtoDAsync(d, part(p, 3), part_bytes, s->b) == CUDA_SUCCESS &&
              cuStreamSynchronize(s->b) == CUDA_SUCCESS &&
              cuMemcpyDtoH(back, d, part_bytes) == CUDA_SUCCESS,
          "the program's part 3 copied to the device", "failed");
    check_words(back, WORDS_PER_PART, 0x77u, "the device got the program's part 3");
    check_words(part(p, 0), WORDS_PER_PART, 0x66u, "part 0 holds the memset's words, not the "
                "program's older ones");
    check_words(part(p, 3), WORDS_PER_PART, 0x77u, "part 3 kept the program's words");

    // A device-to-device copy into part 4 and a kernel given part 5's
    // pointer, each followed by a host function that reads the part: it
    // runs after them in stream order, so it sees their words.
    k_fill_u32<<<1, 256, 0, (cudaStream_t)s->b>>>((uint32_t *)(uintptr_t)d, 0x88u, WORDS_PER_PART);
    look.buf = part(p, 4);
    look.want = 0x88u;
    check(cuMemcpyDtoDAsync(part_dev(p, 4), d, part_bytes, s->b) == CUDA_SUCCESS &&
              wait_for(HOST_FUNCTION, s, &look),
          "device-to-device copy into part 4, then a host function", "failed");
    check_seen(HOST_FUNCTION, &look, look.buf, WORDS_PER_PART, 0x88u,
               "the host function saw the device-to-device copy's words");
    k_fill_u32<<<1, 256, 0, (cudaStream_t)s->b>>>(part(p, 5), 0x99u, WORDS_PER_PART);
    look.buf = part(p, 5);
    look.want = 0x99u;
    check(wait_for(HOST_FUNCTION, s, &look), "kernel writing part 5, then a host function",
          "failed");
    check_seen(HOST_FUNCTION, &look, look.buf, WORDS_PER_PART, 0x99u,
               "the host function saw the kernel's words");
    check(cuStreamSynchronize(s->b) == CUDA_SUCCESS, "cuStreamSynchronize", "failed");
    check_words(part(p, 4), WORDS_PER_PART, 0x88u, "part 4 after the synchronise");
    check_words(part(p, 5), WORDS_PER_PART, 0x99u, "part 5 after the synchronise");
    for (int i = 6; i < PARTS; i++) {
        char name[80];
        check_words(part(p, i), WORDS_PER_PART, 0xa0u + i,
                    fmt_name(name, sizeof name, "part %d, which nothing named, is unchanged", i));
    }
    pinned_free(HOST_ALLOC, p);
}


// ---- one address space ----------------------------------------------------------

static void addresses(void)
{
    CUdeviceptr d = 0;
    const size_t bytes = (size_t)8 << 20;
    if (!check(cuMemAlloc(&d, bytes) == CUDA_SUCCESS, "cuMemAlloc 8 MiB", "failed"))
        return;
    // The kernel maps at the address asked for when it is free: under
    // unified addressing the device memory's addresses are taken.
    uintptr_t inside = (uintptr_t)(d + bytes / 2) / 4096 * 4096;
    void *h = mmap((void *)inside, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    check(h != MAP_FAILED && ((uintptr_t)h + 65536 <= d || (uintptr_t)h >= d + bytes),
          "host memory asked for at a device address lies elsewhere",
          "it lies at %p, inside the device memory at %#llx", h, (unsigned long long)d);
    if (h != MAP_FAILED)
        munmap(h, 65536);

    unsigned type = 0, managed = 1;
    CUdeviceptr start = 0, dp = 0;
    size_t size = 0;
    check(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 100) ==
              CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE,
          "device memory's type is device", "type %u", type);
    check(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 100) ==
              CUDA_SUCCESS && start == d,
          "device memory's range starts at its allocation", "start %#llx",
          (unsigned long long)start);
    check(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 100) ==
              CUDA_SUCCESS && size == bytes,
          "device memory's range is its size", "size %zu", size);
    for (int k = 0; k < NKINDS; k++) {
        uint32_t *p = pinned_alloc((enum kind)k, BYTES);
        char name[160];
        if (!check(p != NULL, fmt_name(name, sizeof name, "%s (attributes)", kind_names[k]),
                   "failed"))
            continue;
        CUdeviceptr at = (CUdeviceptr)(uintptr_t)(p + 10);
        type = 0;
        managed = 1;
        dp = 0;
        check(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, at) ==
                  CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST,
              fmt_name(name, sizeof name, "%s: its type is host", kind_names[k]), "type %u",
              type);
        check(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, at) ==
                  CUDA_SUCCESS && managed == 0,
              fmt_name(name, sizeof name, "%s: not managed", kind_names[k]), "%u", managed);
        check(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, at) ==
                  CUDA_SUCCESS && dp == at,
              fmt_name(name, sizeof name, "%s: its device pointer is its address",
                       kind_names[k]), "%#llx", (unsigned long long)dp);
        check((uintptr_t)p + BYTES <= d || (uintptr_t)p >= d + bytes,
              fmt_name(name, sizeof name, "%s lies outside device memory", kind_names[k]),
              "at %p", (void *)p);
        pinned_free((enum kind)k, p);
    }
    cuMemFree(d);
}

int main(void)
{
    struct streams s;
    CUdeviceptr d1 = 0, d2 = 0;
    CUcontext ctx = NULL;
    if (!check(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS &&
                   cuCtxSetCurrent(ctx) == CUDA_SUCCESS,
               "primary context", "failed"))
        return 1;
    bool ok = cuStreamCreate(&s.a, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
              cuStreamCreate(&s.b, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
              cuStreamCreate(&s.c, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
              cuEventCreate(&s.produced, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
              cuEventCreate(&s.copied, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
              cuMemAlloc(&d1, BYTES) == CUDA_SUCCESS && cuMemAlloc(&d2, BYTES) == CUDA_SUCCESS;
    if (!check(ok, "non-blocking streams, events without timing, device memory", "failed"))
        return 1;
    every_kind_and_method(&s, d1, d2);
    named_pinned(&s, d1);
    addresses();
    cuMemFree(d1);
    cuMemFree(d2);
    cuEventDestroy(s.produced);
    cuEventDestroy(s.copied);
    cuStreamDestroy(s.a);
    cuStreamDestroy(s.b);
    cuStreamDestroy(s.c);
    cuDevicePrimaryCtxRelease(0);
    return check_failures ? 1 : 0;
}
