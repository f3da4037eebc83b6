/* The libraries a session replays calls on.  Loaded after fork, in the
 * session process only: the listener never touches CUDA (BRIEF 4.4). */
#include "rgpud.h"
#include "rgpu_hello.h"
#include "rgpu_log.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

struct backend_lib {
    const char *lib;
    const char *soname;
    void *handle;
};

#define STR2(x) #x
#define STR(x) STR2(x)

static struct backend_lib libs[] = {
    /* libcuda first: the runtime (real or fake) needs it loaded. */
    { "cuda", "libcuda.so.1", NULL },
    { "cudart", "libcudart.so." STR(RGPU_CUDA_MAJOR), NULL },
    { "cublasLt", "libcublasLt.so." STR(RGPU_CUDA_MAJOR), NULL },
    { "cublas", "libcublas.so." STR(RGPU_CUDA_MAJOR), NULL },
    { "cudnn", "libcudnn.so.9", NULL },
    /* NVML comes with the driver, not the toolkit: a host may lack it. */
    { "nvml", "libnvidia-ml.so.1", NULL },
};

void *backend_dlopen(const char *dir, const char *soname)
{
    char path[4096];
    if (!dir)
        return dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/%s", dir, soname);
    return dlopen(path, RTLD_NOW | RTLD_GLOBAL);
}

int backend_open(const char *lib_dir)
{
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        libs[i].handle = backend_dlopen(lib_dir, libs[i].soname);
        if (!libs[i].handle && strcmp(libs[i].lib, "nvml") == 0)
            rgpu_info("cannot load %s: %s; NVML calls will be refused", libs[i].soname,
                      dlerror());
        else if (!libs[i].handle)
            rgpu_warn("cannot load %s: %s; its calls will be refused", libs[i].soname, dlerror());
        else
            rgpu_debug("loaded %s%s%s", lib_dir ? lib_dir : "", lib_dir ? "/" : "",
                       libs[i].soname);
    }
    return libs[1].handle ? 0 : -1;
}

void *backend_sym(const char *lib, const char *name)
{
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        if (strcmp(libs[i].lib, lib) == 0)
            return libs[i].handle ? dlsym(libs[i].handle, name) : NULL;
    return NULL;
}

static int query_version(const char *lib, const char *fn)
{
    int (*get)(int *) = (int (*)(int *))backend_sym(lib, fn);
    int v = 0;
    if (get && get(&v) != 0)
        v = 0;
    return v;
}

/* The version a library reports of itself, in its own numbering; 0 when
 * it cannot say. */
static int lib_version(const char *lib)
{
    if (strcmp(lib, "cuda") == 0)
        return query_version("cuda", "cuDriverGetVersion");
    if (strcmp(lib, "cudart") == 0)
        return query_version("cudart", "cudaRuntimeGetVersion");
    if (strcmp(lib, "cublas") == 0) {
        /* cublasGetProperty(MAJOR_VERSION = 0, MINOR = 1, PATCH = 2). */
        int (*get)(int, int *) = (int (*)(int, int *))backend_sym(lib, "cublasGetProperty");
        int v[3] = { 0, 0, 0 };
        for (int k = 0; get && k < 3; k++)
            if (get(k, &v[k]) != 0)
                return 0;
        return get ? v[0] * 10000 + v[1] * 100 + v[2] : 0;
    }
    const char *fn = strcmp(lib, "cublasLt") == 0 ? "cublasLtGetVersion"
                     : strcmp(lib, "cudnn") == 0  ? "cudnnGetVersion"
                                                  : NULL;
    size_t (*get)(void) = fn ? (size_t(*)(void))backend_sym(lib, fn) : NULL;
    return get ? (int)get() : 0;
}

void backend_lib_versions(struct rgpu_welcome *w)
{
    w->nlibs = 0;
    for (size_t i = 0; i < sizeof libs / sizeof libs[0] && w->nlibs < RGPU_HELLO_MAX_LIBS; i++) {
        if (!libs[i].handle)
            continue;
        struct rgpu_lib_version *v = &w->libs[w->nlibs++];
        snprintf(v->name, sizeof v->name, "%s", libs[i].lib);
        snprintf(v->soname, sizeof v->soname, "%s", libs[i].soname);
        v->version = lib_version(libs[i].lib);
    }
}

const char *backend_soname(const char *lib)
{
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        if (strcmp(libs[i].lib, lib) == 0)
            return libs[i].soname;
    return NULL;
}

int backend_runtime_version(void)
{
    return query_version("cudart", "cudaRuntimeGetVersion");
}

int backend_driver_version(void)
{
    return query_version("cudart", "cudaDriverGetVersion");
}

/* cuInit runs the driver's one-time setup for this process: it opens the
 * device nodes, creates the /dev/char links to them where udev has not,
 * and looks for helper daemons.  That is file creation and sockets, which
 * the session's sandbox forbids afterwards, so the session initialises the
 * driver first.  A failure is the driver's to report: the client's first
 * call gets it again. */
void backend_init_driver(void)
{
    int (*init)(unsigned) = (int (*)(unsigned))backend_sym("cuda", "cuInit");
    int rc = init ? init(0) : -1;
    if (rc != 0)
        rgpu_info("cuInit before the sandbox: %d (the client's calls will see it)", rc);
}
