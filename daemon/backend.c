/* The libraries a session replays calls on.  Loaded after fork, in the
 * session process only: the listener never touches CUDA, which is
 * undefined after fork() in a process that initialised it. */
#include "rgpud.h"
#include "rgpu_hello.h"
#include "rgpu_log.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct backend_lib {
    const char *lib;
    const char *soname;         /* what the session opens by default */
    void *handle;
    int older;                  /* CUDA 12's library for a CUDA 12 client (backend12.c) */
    char opened[48];            /* the soname opened */
};

#define STR2(x) #x
#define STR(x) STR2(x)

static struct backend_lib libs[] = {
    /* libcuda first: the runtime (real or fake) needs it loaded. */
    { "cuda", "libcuda.so.1", NULL, 0, "" },
    { "cudart", "libcudart.so." STR(RGPU_CUDA_MAJOR), NULL, 0, "" },
    { "cublasLt", "libcublasLt.so." STR(RGPU_CUDA_MAJOR), NULL, 0, "" },
    { "cublas", "libcublas.so." STR(RGPU_CUDA_MAJOR), NULL, 0, "" },
    { "cudnn", "libcudnn.so.9", NULL, 0, "" },
    /* NVML comes with the driver, not the toolkit: a host may lack it. */
    { "nvml", "libnvidia-ml.so.1", NULL, 0, "" },
};
#define NLIBS_OPENED (sizeof libs / sizeof libs[0])

void *backend_dlopen(const char *dir, const char *soname)
{
    char path[4096];
    if (!dir)
        return dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/%s", dir, soname);
    return dlopen(path, RTLD_NOW | RTLD_GLOBAL);
}

/* ---- CUDA 12 clients ------------------------------------------------------------- */

/* The major the client's library of this name has: its hello's, else its
 * runtime's (a CUDA 12 process loads CUDA 12's cuBLAS), else 0. */
static int client_major(const struct client_libs *client, const char *lib)
{
    int runtime = 0;
    for (int i = 0; client && i < client->n; i++) {
        if (strcmp(client->name[i], lib) == 0)
            return client->major[i];
        if (strcmp(client->name[i], "cudart") == 0)
            runtime = client->major[i];
    }
    return runtime;
}

static int named_by_hello(const struct client_libs *client, const char *lib)
{
    for (int i = 0; client && i < client->n; i++)
        if (strcmp(client->name[i], lib) == 0)
            return 1;
    return 0;
}

/* The libraries CUDA 12 and 13 both have, whose CUDA 12 build a CUDA 12
 * client gets where the configuration has them. */
static int has_cuda12_build(const char *lib)
{
    return strcmp(lib, "cudart") == 0 || strcmp(lib, "cublas") == 0 ||
           strcmp(lib, "cublasLt") == 0;
}

/* lib's CUDA 12 build from the first folder of dirs (':' between) that
 * holds it: 0; -1 when none does, -2 when one does and will not load
 * (why says which). */
static int open_cuda12(struct backend_lib *l, const char *dirs, char *why, size_t whylen)
{
    char list[4096], soname[48];
    snprintf(list, sizeof list, "%s", dirs);
    snprintf(soname, sizeof soname, "lib%s.so.12", l->lib);
    for (char *save = NULL, *dir = strtok_r(list, ":", &save); dir;
         dir = strtok_r(NULL, ":", &save)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, soname);
        if (access(path, F_OK) != 0)
            continue;
        l->handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (!l->handle) {
            snprintf(why, whylen, "this server's %s does not load: %s", path, dlerror());
            return -2;
        }
        l->older = 1;
        snprintf(l->opened, sizeof l->opened, "%s", soname);
        rgpu_info("a CUDA 12 client: its %s is served by %s", soname, path);
        return 0;
    }
    snprintf(why, whylen, "this server's CUDA 12 libraries (rgpud --cuda12-lib-dir %s) have "
             "no %s: put it there, or leave --cuda12-lib-dir out to serve CUDA 12 clients with "
             "CUDA 13's libraries", dirs, soname);
    return -1;
}

/* For a CUDA 12 client, the CUDA 12 libraries the configuration names:
 * 0 opened or not wanted; -2 when the hello named one that cannot be had.
 * One the hello did not name (a library the client may load later) falls
 * back to CUDA 13's, as without the configuration. */
static int open_cuda12_libs(const char *dirs, const struct client_libs *client, char *why,
                            size_t whylen)
{
    for (size_t i = 0; dirs && i < NLIBS_OPENED; i++) {
        if (!has_cuda12_build(libs[i].lib) || client_major(client, libs[i].lib) != 12)
            continue;
        int rc = open_cuda12(&libs[i], dirs, why, whylen);
        if (rc == -1 && named_by_hello(client, libs[i].lib)) {
            char detail[512];
            snprintf(detail, sizeof detail, "%s", why);
            snprintf(why, whylen, "the client loaded lib%s.so.12, and %s", libs[i].lib, detail);
        }
        if (rc == -2 || (rc < 0 && named_by_hello(client, libs[i].lib)))
            return -2;
        if (rc < 0)
            rgpu_info("%s; a CUDA 12 client loading lib%s.so.12 later gets CUDA 13's",
                      why, libs[i].lib);
    }
    return 0;
}

int backend_open(const char *lib_dir, const char *cuda12_dirs, const struct client_libs *client,
                 char *why, size_t whylen)
{
    /* libcuda first: every runtime, 12's or 13's, needs it. */
    for (size_t i = 0; i < NLIBS_OPENED; i++) {
        if (i == 1 && open_cuda12_libs(cuda12_dirs, client, why, whylen) < 0)
            return -2;
        if (libs[i].handle)
            continue;           /* CUDA 12's */
        snprintf(libs[i].opened, sizeof libs[i].opened, "%s", libs[i].soname);
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
    for (size_t i = 0; i < NLIBS_OPENED; i++)
        if (strcmp(libs[i].lib, lib) == 0) {
            if (!libs[i].handle)
                return NULL;
            return libs[i].older ? backend12_sym(libs[i].handle, lib, name)
                                 : dlsym(libs[i].handle, name);
        }
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
    for (size_t i = 0; i < NLIBS_OPENED && w->nlibs < RGPU_HELLO_MAX_LIBS; i++) {
        if (!libs[i].handle)
            continue;
        struct rgpu_lib_version *v = &w->libs[w->nlibs++];
        snprintf(v->name, sizeof v->name, "%s", libs[i].lib);
        snprintf(v->soname, sizeof v->soname, "%s", libs[i].opened);
        v->version = lib_version(libs[i].lib);
    }
}

const char *backend_soname(const char *lib)
{
    for (size_t i = 0; i < NLIBS_OPENED; i++)
        if (strcmp(libs[i].lib, lib) == 0)
            return libs[i].opened[0] ? libs[i].opened : libs[i].soname;
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
