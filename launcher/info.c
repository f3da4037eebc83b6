/* `rgpu info`: what the server is and what it costs to talk to.
 *
 * The GPUs and the round trip come through the stub libcuda.so.1, loaded
 * into the launcher with RGPU_SERVER pointing at the server: the very path
 * a program's calls take, so what it prints is what a program will see. */
#include "launcher.h"
#include "rgpu_proto.h"
#include "cudart_procs.h"
#include "cuda_procs.h"
#include "cublas_procs.h"
#include "cublasLt_procs.h"
#include "cudnn_procs.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RTT_CALLS 20

/* The few driver entry points we call, declared here rather than through
 * cuda.h: the ABI of these has not changed since CUDA 3.2. */
typedef int (*cu_init_t)(unsigned);
typedef int (*cu_int_t)(int *);
typedef int (*cu_device_get_t)(int *, int);
typedef int (*cu_name_t)(char *, int, int);
typedef int (*cu_mem_t)(size_t *, int);
typedef int (*cu_attr_t)(int *, int, int);

#define CU_ATTR_CC_MAJOR 75     /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
#define CU_ATTR_CC_MINOR 76

struct driver {
    void *handle;
    cu_init_t init;
    cu_int_t driver_version, device_count;
    cu_device_get_t device_get;
    cu_name_t name;
    cu_mem_t total_mem;
    cu_attr_t attr;
    int (*round_trip)(void);    /* the client core's, reached through the stub */
};

static int driver_load(const struct stubs *st, const struct server *s, struct driver *d)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/libcuda.so.1", st->dir);
    /* The client core reads RGPU_SERVER when it first connects. */
    setenv("RGPU_SERVER", s->addr, 1);
    d->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!d->handle) {
        printf("GPUs          unknown: cannot load %s: %s\n", path, dlerror());
        return -1;
    }
    d->init = (cu_init_t)dlsym(d->handle, "cuInit");
    d->driver_version = (cu_int_t)dlsym(d->handle, "cuDriverGetVersion");
    d->device_count = (cu_int_t)dlsym(d->handle, "cuDeviceGetCount");
    d->device_get = (cu_device_get_t)dlsym(d->handle, "cuDeviceGet");
    d->name = (cu_name_t)dlsym(d->handle, "cuDeviceGetName");
    d->total_mem = (cu_mem_t)dlsym(d->handle, "cuDeviceTotalMem_v2");
    d->attr = (cu_attr_t)dlsym(d->handle, "cuDeviceGetAttribute");
    *(void **)&d->round_trip = dlsym(d->handle, "rgpu_round_trip");
    if (!d->init || !d->driver_version || !d->device_count || !d->device_get || !d->name ||
        !d->total_mem || !d->attr) {
        printf("GPUs          unknown: %s lacks a driver function it should export\n", path);
        return -1;
    }
    return 0;
}

static void print_gpu(const struct driver *d, int ordinal)
{
    int dev, major = 0, minor = 0;
    char name[256] = "?";
    size_t mem = 0;
    if (d->device_get(&dev, ordinal) != 0) {
        printf("  %d  (cannot open)\n", ordinal);
        return;
    }
    d->name(name, sizeof name, dev);
    d->total_mem(&mem, dev);
    d->attr(&major, CU_ATTR_CC_MAJOR, dev);
    d->attr(&minor, CU_ATTR_CC_MINOR, dev);
    printf("  %d  %s, %.1f GiB, compute capability %d.%d\n", ordinal, name,
           (double)mem / (1u << 30), major, minor);
}

static int print_gpus(const struct driver *d)
{
    int n = 0, rc = d->init(0);
    if (rc == 0)
        rc = d->device_count(&n);
    if (rc != 0) {
        printf("GPUs          none usable: the server's driver says CUresult %d\n", rc);
        return -1;
    }
    printf("GPUs          %d\n", n);
    for (int i = 0; i < n; i++)
        print_gpu(d, i);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* rgpu_round_trip (the client core's): one empty request that waits for
 * its reply, nothing else; the client answers CUDA's own queries it has
 * seen before by itself, so none of them would do. */
static void print_rtt(const struct driver *d, double hello_s)
{
    double t[RTT_CALLS];
    if (!d->round_trip) {
        printf("round trip    unknown: the stubs lack rgpu_round_trip\n");
        return;
    }
    for (int i = 0; i < RTT_CALLS; i++) {
        double t0 = now_s();
        if (d->round_trip() != 0) {
            printf("round trip    unknown: the request failed\n");
            return;
        }
        t[i] = now_s() - t0;
    }
    qsort(t, RTT_CALLS, sizeof t[0], cmp_double);
    printf("round trip    %.0f us median of %d calls (min %.0f us, max %.0f us); "
           "connect and hello %.1f ms\n",
           (t[RTT_CALLS / 2 - 1] + t[RTT_CALLS / 2]) / 2 * 1e6, RTT_CALLS, t[0] * 1e6,
           t[RTT_CALLS - 1] * 1e6, hello_s * 1e3);
}

static void print_version(const char *what, int v, const char *none)
{
    if (v)
        printf("%-14s%d.%d (%d)\n", what, v / 1000, v % 1000 / 10, v);
    else
        printf("%-14snone: %s\n", what, none);
}

static void print_usage_hint(const struct server *s, const struct stubs *st, int have_stubs)
{
    if (!have_stubs) {
        printf("library path  unknown: no stub libraries found (--lib-dir)\n");
        return;
    }
    printf("library path  LD_LIBRARY_PATH=%s\n", st->dir);
    if (s->kind == SERVER_GIVEN)
        printf("server env    RGPU_SERVER=%s\n", s->addr);
    else
        printf("server env    RGPU_SERVER=... of a server that stays up (this one is "
               "stopped on exit)\n");
    printf("with RPATH    programs that carry their own CUDA libraries (PyTorch wheels): "
           "rgpu run -- CMD, which also sets LD_PRELOAD\n");
}

static void print_server(const struct server *s, const struct stubs *st, int have_stubs)
{
    printf("server        %s\n", s->desc);
    printf("name          %s\n", s->w.name);
    printf("protocol      %d\n", s->w.proto);
    printf("auth          %s%s%s\n", s->w.how, s->w.message[0] ? "; server: " : "",
           s->w.message);
    print_version("CUDA runtime", s->w.runtime_version, "rgpud could not load libcudart");
    print_version("CUDA driver", s->w.driver_version, "no NVIDIA driver on the server");
    if (have_stubs && st->cuda_major && s->w.runtime_version &&
        s->w.runtime_version / 1000 != st->cuda_major)
        printf("warning       the stubs are for CUDA %d, the server runs CUDA %d: "
               "programs will fail\n", st->cuda_major, s->w.runtime_version / 1000);
}

/* The library a stub's soname stands for: "libcublasLt.so.13" -> cublasLt. */
static const char *lib_of(const char *soname)
{
    static const char *const names[] = { "cudart", "cublasLt", "cublas", "cudnn", "cuda" };
    char prefix[32];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(prefix, sizeof prefix, "lib%s.so.", names[i]);
        if (strncmp(soname, prefix, strlen(prefix)) == 0)
            return names[i];
    }
    return strncmp(soname, "libnvidia-ml.so.", 16) == 0 ? "nvml" : NULL;
}

/* A stub's own version, in its library's numbering (13050 for CUDA 13.5's
 * runtime): the tables' for the stubs of this build's major, the CUDA 12
 * headers' for the .12 ones; 0 when unknown (NVML says none). */
static int stub_version(const char *lib, int major)
{
    static const struct { const char *name; const struct rgpu_lib *table; int v12; } known[] = {
        { "cudart", &rgpu_cudart_lib, RGPU_CUDA12_CUDART_VERSION },
        { "cuda", &rgpu_cuda_lib, 0 },
        { "cublas", &rgpu_cublas_lib, RGPU_CUDA12_CUBLAS_VERSION },
        { "cublasLt", &rgpu_cublasLt_lib, RGPU_CUDA12_CUBLAS_VERSION },
        { "cudnn", &rgpu_cudnn_lib, 0 },
    };
    for (size_t i = 0; lib && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].name, lib) == 0)
            return major == 12 && RGPU_CUDA_MAJOR != 12 ? known[i].v12 : known[i].table->version;
    return 0;
}

/* Whether a stub and the server's library of its name go together.
 * own12: the server serves CUDA 12 processes with CUDA 12's runtime, so
 * one that loads a CUDA 12 library it lacks is refused at connection. */
static const char *match(int mine, int my_version, const struct rgpu_lib_version *theirs,
                         int own12)
{
    static char why[128];
    int other = theirs ? rgpu_soname_major(theirs->soname) : -1;
    if (!theirs)
        return "no: its calls are refused";
    if (mine > other)
        return "no: newer than the server's, refused at connection";
    if (mine < other && own12)
        return "no: the server's CUDA 12 libraries lack it (a process loading it at start is "
               "refused)";
    if (mine < other)
        return "served by the server's newer major: functions that differ refused";
    if (my_version && theirs->version && my_version > theirs->version) {
        snprintf(why, sizeof why, "older server: what came after %d is refused at the call",
                 theirs->version);
        return why;
    }
    return "yes";
}

/* Whether a CUDA 12 process gets CUDA 12's runtime. */
static int serves_cuda12(const struct welcome *w)
{
    for (int i = 0; w && i < w->nlibs; i++)
        if (strcmp(w->libs[i].name, "cudart") == 0)
            return rgpu_soname_major(w->libs[i].soname) == 12;
    return 0;
}

/* One line per stub library: its version, the server's library of that
 * name and version for a process of the stub's major, and whether they
 * match (docs/cuda12.md).  w12: the welcome a CUDA 12 process gets. */
static void print_libraries(const struct server *s, const struct welcome *w12,
                            const struct stubs *st)
{
    char list[sizeof st->preload];
    snprintf(list, sizeof list, "%s", st->preload);
    printf("libraries     %-9s %-27s %-28s %s\n", "library", "client stub (version)",
           "server (version)", "match");
    for (char *save = NULL, *path = strtok_r(list, ":", &save); path;
         path = strtok_r(NULL, ":", &save)) {
        const char *soname = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        const char *lib = lib_of(soname);
        int mine = rgpu_soname_major(soname);
        const struct welcome *w = mine == 12 && w12 ? w12 : &s->w;
        const struct rgpu_lib_version *theirs = NULL;
        char client[64], server[64] = "none";
        for (int i = 0; lib && i < w->nlibs; i++)
            if (strcmp(w->libs[i].name, lib) == 0)
                theirs = &w->libs[i];
        int version = stub_version(lib, mine);
        snprintf(client, sizeof client, version ? "%s (%d)" : "%s", soname, version);
        if (theirs)
            snprintf(server, sizeof server, "%s (%d)", theirs->soname, theirs->version);
        printf("  %-11s %-9s %-27s %-28s %s\n", "", lib ? lib : "?", client, server,
               match(mine, version, theirs, w == w12 && serves_cuda12(w12)));
    }
}

/* What serves a CUDA 12 process, when the stubs hold CUDA 12's libraries:
 * another hello, naming its runtime (the server then picks its cuBLAS as
 * for a process that loads cuBLAS later: CUDA 12's where it has one). */
static int probe_cuda12(const struct server *s, const struct stubs *st, struct welcome *w12)
{
    char why[512];
    if (!strstr(st->preload, ".so.12"))
        return 0;
    return probe_as(s->addr, 5, 12, w12, why, sizeof why) == PROBE_OK &&
           w12->status == RGPU_OK;
}

int info_print(const struct server *s, const struct stubs *st, int have_stubs)
{
    struct driver d = { 0 };
    int rc = 0;

    print_server(s, st, have_stubs);
    if (have_stubs) {
        struct welcome w12;
        print_libraries(s, probe_cuda12(s, st, &w12) ? &w12 : NULL, st);
    }
    if (!s->w.runtime_version || !s->w.driver_version) {
        printf("GPUs          none: the server cannot run CUDA\n");
        rc = -1;
    } else if (!have_stubs) {
        printf("GPUs          unknown: no stub libraries to ask through\n");
        rc = -1;
    } else if (driver_load(st, s, &d) < 0) {
        rc = -1;
    } else if ((rc = print_gpus(&d)) == 0) {
        print_rtt(&d, s->hello_s);
    }
    print_usage_hint(s, st, have_stubs);
    fflush(stdout);
    /* The stub's session stays open until exit; the daemon or tunnel is
     * closed by the caller, after which the client core never calls. */
    return rc;
}
