/* The GPUs rgpud serves, and which of them a session's CUDA and NVML see
 * (docs/architecture.md, "Devices"; docs/security.md, "The device subset").
 *
 * At start, before it listens, rgpud lists its host's GPUs in a child
 * process of its own (the listener never loads CUDA, which a fork after it
 * would leave undefined) and picks
 * those --devices / RGPUD_DEVICES name, in the order they are named; a
 * setting that names a GPU the host lacks, or one twice, stops rgpud.  The
 * sessions inherit the list.  A session, before it loads CUDA, narrows the
 * list by its client's CUDA_VISIBLE_DEVICES (sent in the hello) and hands
 * its driver the result as CUDA_VISIBLE_DEVICES, in UUIDs: the driver then
 * enumerates those GPUs only, renumbered from 0, in every call that takes
 * or gives a device.  After cuInit the session checks that the driver sees
 * exactly them (a GPU gone since the start is a clear refusal at hello);
 * after nvmlInit it finds the NVML handle of each served GPU, since NVML
 * ignores CUDA_VISIBLE_DEVICES: hand_nvml.c renumbers NVML by this list
 * and refuses the other GPUs as not found. */
#include "rgpud.h"
#include "rgpu_log.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <nvml.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_GPUS 64
#define PROBE_TIMEOUT_MS 120000     /* cuInit on a large host takes seconds */
#define UUID_TEXT 41                /* "GPU-" 8-4-4-4-12 hex digits, NUL */

struct gpu {
    char uuid[UUID_TEXT];           /* as NVML and nvidia-smi write it */
    char pci[32];                   /* as CUDA writes it: 0000:01:00.0 */
    char name[96];
    int host_ordinal;               /* CUDA's ordinal in rgpud's environment */
};

/* What the probe found: the host's GPUs in CUDA's order. */
struct probe {
    int ok;
    char why[256];
    int n;
    struct gpu gpu[MAX_GPUS];
};

static struct probe host;           /* the listener's, inherited by sessions */
static struct gpu served[MAX_GPUS]; /* in the order the client sees them */
static int nserved;

/* In a session: the GPUs its CUDA sees, and NVML's handles of the served
 * ones with NVML's own index of each. */
static struct gpu session_cuda[MAX_GPUS];
static int nsession_cuda = -1;      /* -1: CUDA_VISIBLE_DEVICES left to the client */
static nvmlDevice_t nvml_handle[MAX_GPUS];
static unsigned nvml_index[MAX_GPUS];
static int nvml_mapped;             /* entries of nvml_handle, once mapped */

/* ---- the probe: a child process lists the host's GPUs ---------------------------- */

static void uuid_text(const unsigned char b[16], char out[UUID_TEXT])
{
    snprintf(out, UUID_TEXT,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

struct cuda_fns {
    CUresult (*init)(unsigned);
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*uuid)(CUuuid *, CUdevice);
    CUresult (*pci)(char *, int, CUdevice);
    CUresult (*name)(char *, int, CUdevice);
};

/* The driver's device calls, by name through sym (dlsym on the probe's
 * handle, or the session's backend): 0, or -1 when one is missing. */
static int cuda_fns_find(void *(*sym)(void *, const char *), void *lib, struct cuda_fns *f)
{
    f->init = (CUresult (*)(unsigned))sym(lib, "cuInit");
    f->count = (CUresult (*)(int *))sym(lib, "cuDeviceGetCount");
    f->get = (CUresult (*)(CUdevice *, int))sym(lib, "cuDeviceGet");
    f->uuid = (CUresult (*)(CUuuid *, CUdevice))sym(lib, "cuDeviceGetUuid_v2");
    if (!f->uuid)
        f->uuid = (CUresult (*)(CUuuid *, CUdevice))sym(lib, "cuDeviceGetUuid");
    f->pci = (CUresult (*)(char *, int, CUdevice))sym(lib, "cuDeviceGetPCIBusId");
    f->name = (CUresult (*)(char *, int, CUdevice))sym(lib, "cuDeviceGetName");
    return f->init && f->count && f->get && f->uuid && f->pci && f->name ? 0 : -1;
}

static void *session_cuda_sym(void *unused, const char *name)
{
    (void)unused;
    return backend_sym("cuda", name);
}

/* GPU ordinal i's identity through f: 0, or the failing call's status. */
static CUresult gpu_read(const struct cuda_fns *f, int i, struct gpu *g)
{
    CUdevice dev;
    CUuuid u;
    CUresult rc = f->get(&dev, i);
    if (rc == CUDA_SUCCESS)
        rc = f->uuid(&u, dev);
    if (rc == CUDA_SUCCESS)
        rc = f->pci(g->pci, sizeof g->pci, dev);
    if (rc == CUDA_SUCCESS)
        rc = f->name(g->name, sizeof g->name, dev);
    if (rc == CUDA_SUCCESS) {
        uuid_text((const unsigned char *)u.bytes, g->uuid);
        g->host_ordinal = i;
    }
    return rc;
}

static void probe_run(const char *lib_dir, struct probe *p)
{
    struct cuda_fns f;
    int n = 0;
    CUresult rc;
    void *lib = backend_dlopen(lib_dir, "libcuda.so.1");
    memset(p, 0, sizeof *p);
    if (!lib || cuda_fns_find(dlsym, lib, &f) < 0) {
        snprintf(p->why, sizeof p->why, "cannot load libcuda.so.1%s%s: %s",
                 lib_dir ? " from " : "", lib_dir ? lib_dir : "",
                 lib ? "it lacks the device calls" : dlerror());
        return;
    }
    if ((rc = f.init(0)) != CUDA_SUCCESS || (rc = f.count(&n)) != CUDA_SUCCESS) {
        snprintf(p->why, sizeof p->why, "cuInit failed (CUresult %d)", (int)rc);
        return;
    }
    for (int i = 0; i < n && i < MAX_GPUS; i++)
        if ((rc = gpu_read(&f, i, &p->gpu[i])) != CUDA_SUCCESS) {
            snprintf(p->why, sizeof p->why, "cannot read GPU %d (CUresult %d)", i, (int)rc);
            return;
        }
    p->n = n < MAX_GPUS ? n : MAX_GPUS;
    p->ok = 1;
}

static int read_full(int fd, void *buf, size_t len, long deadline_ms)
{
    char *b = buf;
    while (len) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long left = deadline_ms - (ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int r = left > 0 ? poll(&pfd, 1, (int)left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ssize_t got = read(fd, b, len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        b += got;
        len -= (size_t)got;
    }
    return 0;
}

/* The host's GPUs into host: a child loads the driver, asks, and leaves. */
static void probe_host(const char *lib_dir)
{
    int pfd[2];
    struct timespec ts;
    if (pipe(pfd) < 0) {
        snprintf(host.why, sizeof host.why, "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        probe_run(lib_dir, &host);
        (void)!write(pfd[1], &host, sizeof host);
        _exit(0);
    }
    close(pfd[1]);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long deadline = ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + PROBE_TIMEOUT_MS;
    if (pid < 0 || read_full(pfd[0], &host, sizeof host, deadline) < 0) {
        memset(&host, 0, sizeof host);
        snprintf(host.why, sizeof host.why, "%s",
                 pid < 0 ? strerror(errno) : "the process asking the driver gave no answer");
    }
    close(pfd[0]);
    if (pid > 0) {
        kill(pid, SIGKILL);         /* done, or stuck in the driver */
        waitpid(pid, NULL, 0);
    }
    host.why[sizeof host.why - 1] = '\0';
    if (host.n < 0 || host.n > MAX_GPUS)
        host.ok = 0;
    for (int i = 0; host.ok && i < host.n; i++) {     /* the driver's strings */
        host.gpu[i].uuid[sizeof host.gpu[i].uuid - 1] = '\0';
        host.gpu[i].pci[sizeof host.gpu[i].pci - 1] = '\0';
        host.gpu[i].name[sizeof host.gpu[i].name - 1] = '\0';
    }
}

/* ---- --devices: indices and UUIDs ------------------------------------------------- */

static int is_index(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* The host GPU whose UUID starts with prefix (case aside), -1 for none,
 * -2 when several do. */
static int by_uuid_prefix(const struct gpu *g, int n, const char *prefix)
{
    int found = -1;
    size_t len = strlen(prefix);
    for (int i = 0; i < n; i++)
        if (strncasecmp(g[i].uuid, prefix, len) == 0)
            found = found == -1 ? i : -2;
    return found;
}

static void list_host(char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < host.n && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%d %s", i ? ", " : "", i,
                                 host.gpu[i].uuid);
}

/* What the setting is called in messages: --devices or RGPUD_DEVICES. */
static const char *setting = "--devices";

/* The host GPU one entry of the setting names, or -1 after logging why. */
static int entry_gpu(const char *e)
{
    char known[1024];
    list_host(known, sizeof known);
    if (strncasecmp(e, "MIG-", 4) == 0) {
        rgpu_error("%s: %s is a MIG instance: rgpud serves whole GPUs; name the GPU "
                   "instead (GPU-..., or its index)", setting, e);
        return -1;
    }
    if (is_index(e)) {
        long i = strtol(e, NULL, 10);
        if (i < host.n && strlen(e) < 6)
            return (int)i;
        rgpu_error("%s: there is no GPU %s: this host has %d (%s)", setting, e, host.n,
                   known);
        return -1;
    }
    if (strncasecmp(e, "GPU-", 4) != 0 || !e[4]) {
        rgpu_error("%s: '%s' is neither a GPU index nor a GPU UUID (GPU-...)", setting, e);
        return -1;
    }
    int i = by_uuid_prefix(host.gpu, host.n, e);
    if (i == -2)
        rgpu_error("%s: %s is the start of several GPUs' UUIDs: give more of it (%s)",
                   setting, e, known);
    else if (i < 0)
        rgpu_error("%s: no GPU of this host has UUID %s (%s)", setting, e, known);
    return i;
}

/* Entries split at commas, blanks around them dropped.  0, or -1 after
 * logging why. */
static int select_gpus(const char *spec)
{
    char buf[4096], *save = NULL;
    int picked[MAX_GPUS];
    if (strlen(spec) >= sizeof buf) {
        rgpu_error("%s: the list is longer than %zu characters", setting, sizeof buf - 1);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    nserved = 0;
    for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        e += strspn(e, " \t");
        for (size_t len = strlen(e); len && (e[len - 1] == ' ' || e[len - 1] == '\t');)
            e[--len] = '\0';
        int i = entry_gpu(e);
        if (i < 0)
            return -1;
        for (int k = 0; k < nserved; k++)
            if (picked[k] == i) {
                rgpu_error("%s names GPU %d (%s) twice", setting, i, host.gpu[i].uuid);
                return -1;
            }
        picked[nserved] = i;
        served[nserved++] = host.gpu[i];
    }
    if (nserved == 0) {
        rgpu_error("%s names no GPU (leave it out to serve them all)", setting);
        return -1;
    }
    return 0;
}

int devices_start(const char *spec, const char *name, const char *lib_dir)
{
    setting = name;
    probe_host(lib_dir);
    if (!host.ok) {
        if (spec) {
            rgpu_error("%s %s: cannot list this host's GPUs to check it: %s", setting, spec,
                       host.why);
            return -1;
        }
        rgpu_warn("cannot list this host's GPUs (%s): each session serves the GPUs its "
                  "driver finds", host.why);
        return 0;
    }
    if (spec && strcmp(spec, "all") != 0) {
        if (select_gpus(spec) < 0)
            return -1;
    } else {
        memcpy(served, host.gpu, sizeof served);
        nserved = host.n;
    }
    rgpu_info("serving %d of this host's %d GPUs%s", nserved, host.n,
              nserved ? ", to clients as:" : "");
    for (int i = 0; i < nserved; i++)
        rgpu_info("  device %d: GPU %d, %s, %s, %s", i, served[i].host_ordinal, served[i].name,
                  served[i].uuid, served[i].pci);
    return 0;
}

/* ---- a session: the client's CUDA_VISIBLE_DEVICES --------------------------------- */

/* The served GPU one entry of the client's CUDA_VISIBLE_DEVICES names, or
 * -1, read as the driver reads the variable: leading blanks, then an index
 * (digits, the rest ignored, as strtoul does) or a GPU- UUID prefix that
 * names one GPU.  MIG instances are not served. */
static int client_entry(const char *e, size_t len)
{
    char buf[128];
    while (len && (*e == ' ' || *e == '\t')) {
        e++;
        len--;
    }
    while (len && (e[len - 1] == ' ' || e[len - 1] == '\t'))
        len--;
    if (len >= sizeof buf)
        return -1;
    memcpy(buf, e, len);
    buf[len] = '\0';
    if (len > 4 && strncasecmp(buf, "GPU-", 4) == 0) {
        int i = by_uuid_prefix(served, nserved, buf);
        return i >= 0 ? i : -1;
    }
    if (buf[0] < '0' || buf[0] > '9')
        return -1;
    long i = strtol(buf, NULL, 10);
    return i < nserved ? (int)i : -1;
}

/* The served GPUs the client's list names, into session_cuda: as on a
 * host, the first entry that names none ends the list, and a GPU named
 * twice leaves none. */
static void narrow(const char *list)
{
    int picked[MAX_GPUS];
    nsession_cuda = 0;
    for (const char *e = list; *e && nsession_cuda < MAX_GPUS;) {
        size_t len = strcspn(e, ",");
        int i = client_entry(e, len);
        if (i < 0)
            break;
        for (int k = 0; k < nsession_cuda; k++)
            if (picked[k] == i) {
                nsession_cuda = 0;
                return;
            }
        picked[nsession_cuda] = i;
        session_cuda[nsession_cuda++] = served[i];
        if (!e[len])
            break;
        e += len + 1;
    }
}

void devices_session_select(const struct rgpu_visible *client)
{
    char env[MAX_GPUS * UUID_TEXT + 1] = "";
    size_t used = 0;
    if (!host.ok) {
        /* No list: the client's variable goes to the driver as it is. */
        if (client->set)
            setenv("CUDA_VISIBLE_DEVICES", client->list, 1);
        return;
    }
    if (client->set) {
        narrow(client->list);
    } else {
        memcpy(session_cuda, served, sizeof session_cuda);
        nsession_cuda = nserved;
    }
    for (int i = 0; i < nsession_cuda; i++)
        used += (size_t)snprintf(env + used, sizeof env - used, "%s%s", i ? "," : "",
                                 session_cuda[i].uuid);
    setenv("CUDA_VISIBLE_DEVICES", env, 1);
    rgpu_debug("CUDA_VISIBLE_DEVICES=%s for this session%s%s", env,
               client->set ? "; the client's was " : "", client->set ? client->list : "");
}

int devices_session_check(char *why, size_t len)
{
    if (nsession_cuda <= 0)
        return 0;   /* the client's choice, or no list: the driver's answers stand */
    struct cuda_fns f;
    int n = 0;
    if (cuda_fns_find(session_cuda_sym, NULL, &f) < 0) {
        snprintf(why, len, "the session's libcuda.so.1 lacks the device calls");
        return -1;
    }
    CUresult rc = f.init(0);
    if (rc == CUDA_SUCCESS)
        rc = f.count(&n);
    if (n > nsession_cuda) {
        /* A driver that ignored CUDA_VISIBLE_DEVICES: GPUs outside the
         * subset would be reachable. */
        snprintf(why, len, "the driver shows %d GPUs where rgpud chose %d "
                 "(CUDA_VISIBLE_DEVICES ignored): refusing to serve GPUs outside --devices",
                 n, nsession_cuda);
        return -1;
    }
    for (int i = 0; i < nsession_cuda; i++) {
        struct gpu g;
        if (rc == CUDA_SUCCESS && i < n)
            rc = gpu_read(&f, i, &g);
        if (rc != CUDA_SUCCESS || i >= n || strcmp(g.uuid, session_cuda[i].uuid) != 0) {
            snprintf(why, len, "GPU %s (%s, served as device %d) is not on this host any more: "
                     "rgpud found it at its start; restart rgpud or change --devices",
                     session_cuda[i].uuid, session_cuda[i].pci, i);
            return -1;
        }
    }
    return 0;
}

int devices_session_count(void)
{
    struct cuda_fns f;
    int n = 0;
    if (cuda_fns_find(session_cuda_sym, NULL, &f) < 0)
        return -1;
    CUresult rc = f.init(0);
    if (rc == CUDA_ERROR_NO_DEVICE)
        return 0;
    return rc == CUDA_SUCCESS && f.count(&n) == CUDA_SUCCESS ? n : -1;
}

/* ---- a session: NVML's handles of the served GPUs ---------------------------------- */

void devices_nvml_map(void)
{
    nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *) =
        (nvmlReturn_t (*)(const char *, nvmlDevice_t *))backend_sym("nvml",
                                                                   "nvmlDeviceGetHandleByUUID");
    nvmlReturn_t (*index)(nvmlDevice_t, unsigned *) =
        (nvmlReturn_t (*)(nvmlDevice_t, unsigned *))backend_sym("nvml", "nvmlDeviceGetIndex");
    if (!host.ok || !by_uuid || !index)
        return;     /* no list, or no NVML: nothing to map */
    for (int i = 0; i < nserved; i++) {
        nvmlDevice_t h;
        if (by_uuid(served[i].uuid, &h) != NVML_SUCCESS ||
            index(h, &nvml_index[nvml_mapped]) != NVML_SUCCESS) {
            rgpu_warn("NVML does not know GPU %s, which CUDA showed: NVML leaves it out",
                      served[i].uuid);
            continue;
        }
        nvml_handle[nvml_mapped++] = h;
    }
}

int devices_nvml_count(void)
{
    return host.ok ? nvml_mapped : -1;
}

int devices_nvml_index(unsigned position, unsigned *index)
{
    int n = devices_nvml_count();
    if (n < 0 || position >= (unsigned)n)     /* any value of the client's */
        return -1;
    *index = nvml_index[position];
    return 0;
}

int devices_nvml_position(const void *handle)
{
    for (int i = 0; i < devices_nvml_count(); i++)
        if ((const void *)nvml_handle[i] == handle)
            return i;
    return -1;
}
