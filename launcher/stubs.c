/* Where the stub libraries are, and the environment that puts them in
 * front of NVIDIA's in a command.
 *
 * LD_LIBRARY_PATH alone is not enough: PyTorch's wheels carry a DT_RPATH
 * to their bundled CUDA libraries, which the loader searches before
 * LD_LIBRARY_PATH.  A library already loaded under a soname satisfies every
 * later DT_NEEDED of that soname, so the stubs go in LD_PRELOAD as well
 * (docs/launcher.md, "Three ways in"). */
#include "launcher.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef RGPU_STUBDIR
#define RGPU_STUBDIR "/opt/rgpu/lib"
#endif

/* The stub sonames, in preload order: the driver first, as the loader
 * would meet it under the runtime. */
static const char *const stub_prefixes[] = {
    "libcuda.so.", "libcudart.so.", "libcublasLt.so.", "libcublas.so.", "libcudnn.so.",
    "libnvidia-ml.so.",
};
#define NPREFIX (sizeof stub_prefixes / sizeof stub_prefixes[0])

/* "libcudart.so.13" -> 13 for prefix "libcudart.so."; -1 for anything else
 * (the unversioned link-time name, libcudart.so.13.0.96, ...). */
static int soname_major(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || !name[n])
        return -1;
    for (const char *p = name + n; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    return atoi(name + n);
}

static int file_exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return 0;
    return stat(path, &sb) == 0;
}

static void append_preload(struct stubs *st, const char *name)
{
    size_t len = strlen(st->preload);
    snprintf(st->preload + len, sizeof st->preload - len, "%s%s/%s", len ? ":" : "", st->dir,
             name);
}

/* Collect the stub sonames of st->dir into st->preload.  Returns how many. */
static int scan_dir(struct stubs *st)
{
    struct dirent **names;
    int n = scandir(st->dir, &names, NULL, alphasort), found = 0;
    st->preload[0] = '\0';
    st->cuda_major = 0;
    if (n < 0)
        return 0;
    /* The newest major of each library first (libcudart.so.13 before .12):
     * a name looked up without a version node finds its function there. */
    for (size_t k = 0; k < NPREFIX; k++) {
        for (int i = n - 1; i >= 0; i--) {
            int major = soname_major(names[i]->d_name, stub_prefixes[k]);
            if (major < 0)
                continue;
            append_preload(st, names[i]->d_name);
            if (k == 1 && major > st->cuda_major)
                st->cuda_major = major;
            found++;
        }
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return found;
}

/* A directory of rgpu's stubs holds the client core beside them; NVIDIA's
 * own library directories do not, and preloading those would defeat rgpu. */
static int try_dir(const char *dir, struct stubs *st)
{
    char real[PATH_MAX];
    if (!realpath(dir, real) || !file_exists(real, "librgpu-client.so.0"))
        return -1;
    snprintf(st->dir, sizeof st->dir, "%s", real);
    return scan_dir(st) > 0 ? 0 : -1;
}

static int check_preloadable(const struct stubs *st)
{
    /* ld.so splits LD_PRELOAD at colons and spaces, and has no quoting. */
    if (strpbrk(st->dir, ": \t")) {
        say("the stub directory %s has a colon or a space in its name, which LD_PRELOAD "
            "cannot carry: install or copy the stubs to a plain path", st->dir);
        return -1;
    }
    return 0;
}

static int explicit_dir(const char *dir, const char *how, struct stubs *st)
{
    if (try_dir(dir, st) < 0) {
        say("no rgpu stub libraries in %s (%s): it should hold librgpu-client.so.0 and "
            "libcudart.so.N or libcuda.so.1; point %s at the rgpu-client install "
            "(%s) or at a build's stubs/ folder", dir, how, how, RGPU_STUBDIR);
        return -1;
    }
    return check_preloadable(st);
}

int stubs_find(const char *opt_dir, struct stubs *st)
{
    const char *env = getenv("RGPU_LIB_DIR");
    char here[PATH_MAX] = "", cand[PATH_MAX + 16];

    if (opt_dir)
        return explicit_dir(opt_dir, "--lib-dir", st);
    if (env && *env)
        return explicit_dir(env, "RGPU_LIB_DIR", st);
    /* A launcher in its build tree uses that build's stubs, not whatever
     * package may also be installed: a developer tests what they built. */
    if (self_dir(here, sizeof here) == 0 && in_build_tree(here)) {
        snprintf(cand, sizeof cand, "%s/../stubs", here);
        if (try_dir(cand, st) == 0)
            return check_preloadable(st);
    }
    if (try_dir(RGPU_STUBDIR, st) == 0)
        return check_preloadable(st);
    say("cannot find rgpu's stub libraries: not in %s%s%s; install the rgpu-client package, "
        "or pass --lib-dir DIR (or set RGPU_LIB_DIR) to a folder holding them",
        RGPU_STUBDIR, here[0] ? " nor beside this launcher in a build tree " : "",
        here[0] ? "(../stubs)" : "");
    return -1;
}

/* Put value in front of the colon-separated list in variable var. */
static int prepend(const char *var, const char *value)
{
    const char *old = getenv(var);
    size_t len = strlen(value) + (old ? strlen(old) : 0) + 2;
    char *buf = malloc(len);
    if (!buf)
        return -1;
    snprintf(buf, len, "%s%s%s", value, old && *old ? ":" : "", old && *old ? old : "");
    int rc = setenv(var, buf, 1);
    free(buf);
    return rc;
}

int stubs_setenv(const struct stubs *st, const char *server)
{
    if (prepend("LD_LIBRARY_PATH", st->dir) < 0 || prepend("LD_PRELOAD", st->preload) < 0 ||
        setenv("RGPU_SERVER", server, 1) < 0)
        return -1;
    return 0;
}

/* Does entry (a path, or a bare soname in LD_PRELOAD) belong to stub_dir? */
static int is_stub_entry(const char *entry, size_t len, const char *stub_dir)
{
    char path[PATH_MAX], real[PATH_MAX];
    if (len == 0 || len >= sizeof path)
        return 0;
    memcpy(path, entry, len);
    path[len] = '\0';
    if (!realpath(path, real))
        return 0;
    if (strcmp(real, stub_dir) == 0)
        return 1;                           /* the directory itself */
    char *slash = strrchr(real, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    return strcmp(real, stub_dir) == 0;     /* a library in it */
}

/* Remove the entries of var (split at any of seps) that lie in stub_dir. */
static void scrub(const char *var, const char *seps, const char *stub_dir)
{
    const char *old = getenv(var);
    if (!old)
        return;
    char *out = malloc(strlen(old) + 1);
    if (!out)
        return;
    size_t o = 0;
    for (const char *p = old; *p;) {
        size_t len = strcspn(p, seps);
        if (len && !is_stub_entry(p, len, stub_dir)) {
            if (o)
                out[o++] = ':';
            memcpy(out + o, p, len);
            o += len;
        }
        p += len;
        if (*p)
            p++;
    }
    out[o] = '\0';
    if (o)
        setenv(var, out, 1);
    else
        unsetenv(var);
    free(out);
}

void stubs_scrub_env(const char *stub_dir)
{
    scrub("LD_LIBRARY_PATH", ":;", stub_dir);
    scrub("LD_PRELOAD", ": ", stub_dir);
}
