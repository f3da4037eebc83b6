// Output convention shared by the integration programs in tests/progs/.
//
// Each check prints exactly one line, "ok NAME" or "FAIL NAME: DETAILS".
// A GPU script diffs the output of a native run against an rgpu run, so the
// text of an "ok" line must never depend on timing, addresses or anything
// else that varies between runs; details only appear on FAIL lines.
#pragma once
#include <stdarg.h>
#include <stdio.h>
#include <cuda_runtime.h>

// Where check lines go; threads.cu points each thread at its own buffer so
// that the final output does not depend on scheduling.
static __thread FILE *check_out;
static int check_failures;

#define CHECK_PRINTF(f, a) __attribute__((format(printf, f, a)))

CHECK_PRINTF(3, 4)
static inline bool check(bool cond, const char *name, const char *fmt, ...)
{
    FILE *f = check_out ? check_out : stdout;
    if (cond) {
        fprintf(f, "ok %s\n", name);
    } else {
        va_list ap;
        fprintf(f, "FAIL %s: ", name);
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fputc('\n', f);
        __atomic_add_fetch(&check_failures, 1, __ATOMIC_RELAXED);
    }
    fflush(f);  // keep partial output if the program crashes later
    return cond;
}

// A runtime call that must succeed.
static inline bool check_cuda(cudaError_t e, const char *name)
{
    return check(e == cudaSuccess, name, "%s", cudaGetErrorName(e));
}

// A runtime call that must return exactly `want`; the ok line names the
// code so that the native/rgpu diff also covers it.
static inline bool check_err(cudaError_t got, cudaError_t want, const char *name)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s -> %s", name, cudaGetErrorName(want));
    return check(got == want, buf, "got %s", cudaGetErrorName(got));
}

// printf into a caller's buffer, for check names built in loops.
CHECK_PRINTF(3, 4)
static inline const char *fmt_name(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return buf;
}

#ifdef __cuda_cuda_h__
// A driver call that must succeed, named by its error when it does not.
static inline bool check_cu(CUresult r, const char *name)
{
    const char *s = NULL;
    if (r != CUDA_SUCCESS && cuGetErrorName(r, &s) != CUDA_SUCCESS)
        s = NULL;
    return check(r == CUDA_SUCCESS, name, "%s (%d)", s ? s : "?", (int)r);
}

// A driver call that must return exactly `want`.
static inline bool check_cu_is(CUresult r, CUresult want, const char *name)
{
    const char *s = NULL, *w = NULL;
    char buf[200];
    cuGetErrorName(r, &s);
    cuGetErrorName(want, &w);
    return check(r == want, fmt_name(buf, sizeof buf, "%s -> %s", name, w ? w : "?"), "got %s (%d)",
                 s ? s : "?", (int)r);
}
#endif

// What a launch with an impossible configuration (2048 threads per block,
// an empty grid, too much dynamic shared memory...) reports.  Measured on an
// H200 with driver 580 and the CUDA 13.0 runtime: cudaErrorInvalidValue for
// every such launch.  CUDA 12 runtimes reported cudaErrorInvalidConfiguration
// ("invalid configuration argument").
#if CUDART_VERSION >= 13000
#define BAD_LAUNCH_ERROR cudaErrorInvalidValue
#else
#define BAD_LAUNCH_ERROR cudaErrorInvalidConfiguration
#endif

static inline int check_exit_status(void)
{
    return check_failures ? 1 : 0;
}
