/* NVML on the server (client side: stubs/nvml_hand.c; generated calls:
 * codegen/nvml.ann).
 *
 * The session initialises NVML before its sandbox closes, as it does the
 * driver (backend.c): nvmlInit opens the device nodes for writing, which
 * the sandbox forbids afterwards.
 *
 * The client's nvmlInit and nvmlShutdown are counted on their own (below).
 *
 * Setting calls (power limit, clocks, persistence and compute modes) change
 * the GPU for every user of the host: refused with NVML_ERROR_NO_PERMISSION,
 * as natively for a user without the right, unless rgpud runs with
 * --nvml-settings.
 *
 * The lists sized by a count in memory go through rgpu.nvml_list; process
 * lists hold this session's process only, so that a client learns nothing
 * of the other clients' work. */
#include "rgpud.h"
#include "owned_handles.h"
#include "nvml_procs.h"
#include "nvml_serve.h"
#include "rgpu_handles.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <nvml.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int settings_allowed;

void nvml_allow_settings(int allow)
{
    settings_allowed = allow;
}

int backend_init_nvml(void)
{
    nvmlReturn_t (*init)(void) = (nvmlReturn_t (*)(void))backend_sym("nvml", "nvmlInit_v2");
    if (!init)
        return -1;      /* no NVML on this host: its calls are refused */
    nvmlReturn_t rc = init();
    if (rc != NVML_SUCCESS)
        rgpu_info("nvmlInit before the sandbox: %d (the client's NVML calls will see it)",
                  (int)rc);
    return rc == NVML_SUCCESS ? 0 : -1;
}

/* ---- the client's own initialisation ------------------------------------------------ */

/* The library stays initialised for the session (backend_init_nvml); the
 * client's nvmlInit and nvmlShutdown are counted here, so that it sees
 * NVML_ERROR_UNINITIALIZED where it would natively, and so that no number
 * of its shutdowns can undo the session's own initialisation. */
static int client_inits;

static int client_initialised(void)
{
    return __atomic_load_n(&client_inits, __ATOMIC_RELAXED) > 0;
}

static int pre_initialised(void **argv)
{
    (void)argv;
    return client_initialised() ? 0 : NVML_ERROR_UNINITIALIZED;
}

static void post_init(void **argv, int status)
{
    (void)argv;
    if (status == NVML_SUCCESS)
        __atomic_add_fetch(&client_inits, 1, __ATOMIC_RELAXED);
}

static void post_shutdown(void **argv, int status)
{
    (void)argv;
    if (status == NVML_SUCCESS)
        __atomic_sub_fetch(&client_inits, 1, __ATOMIC_RELAXED);
}

/* ---- setting calls -------------------------------------------------------------- */

static int pre_setting(void **argv)
{
    int rc = pre_initialised(argv);
    if (rc || settings_allowed)
        return rc;
    static int logged;
    if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
        rgpu_warn("an NVML setting call was refused: rgpud allows them only with "
                  "--nvml-settings (logged once)");
    return NVML_ERROR_NO_PERMISSION;
}

static const char *const setting_calls[] = {
    "nvmlDeviceSetPersistenceMode", "nvmlDeviceSetComputeMode",
    "nvmlDeviceSetPowerManagementLimit", "nvmlDeviceSetPowerManagementLimit_v2",
    "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks",
    "nvmlDeviceSetMemoryLockedClocks", "nvmlDeviceResetMemoryLockedClocks",
    "nvmlDeviceSetApplicationsClocks", "nvmlDeviceResetApplicationsClocks",
};

/* ---- the served GPUs only (daemon/devices.c) ------------------------------------------
 *
 * NVML ignores CUDA_VISIBLE_DEVICES, so the session renumbers it itself:
 * the served GPUs from 0 in rgpud's order, as its CUDA sees them.  Every
 * NVML device handle a client can hold comes from these calls (or names a
 * MIG instance of a served GPU), so a GPU outside the subset never enters
 * the session's handle table: asked by UUID or PCI bus id it is "not
 * found", by index past the count "invalid argument", as natively for a
 * GPU that does not exist.  With no list (rgpud could not ask the driver
 * at its start), NVML's own answers stand. */

/* argv[i] of a generated call: the decoded value, or for an output the
 * pointer the library writes through. */
#define ARG(type, i) (*(type *)argv[i])

static void post_count(void **argv, int status)
{
    unsigned *count = ARG(unsigned *, 0);
    if (status == NVML_SUCCESS && count && devices_nvml_count() >= 0)
        *count = (unsigned)devices_nvml_count();
}

/* nvmlDeviceGetHandleByIndex(index, device): NVML's index of the GPU
 * served at that position. */
static int pre_by_index(void **argv)
{
    int rc = pre_initialised(argv);
    if (rc || devices_nvml_count() < 0)
        return rc;
    return devices_nvml_index(ARG(unsigned, 0), &ARG(unsigned, 0)) < 0
               ? NVML_ERROR_INVALID_ARGUMENT
               : 0;
}

/* nvmlDeviceGetHandleByUUID / ByPciBusId(name, device): asked first, and
 * a GPU that is not served is not found. */
static int served_by_name(void **argv, const char *fn)
{
    nvmlReturn_t (*find)(const char *, nvmlDevice_t *) =
        (nvmlReturn_t (*)(const char *, nvmlDevice_t *))backend_sym("nvml", fn);
    nvmlDevice_t h;
    int rc = pre_initialised(argv);
    if (rc || devices_nvml_count() < 0)
        return rc;
    if (!find || !ARG(const char *, 0))
        return 0;   /* the call itself answers */
    rc = (int)find(ARG(const char *, 0), &h);
    if (rc == NVML_SUCCESS && devices_nvml_position(h) < 0)
        return NVML_ERROR_NOT_FOUND;
    return rc;
}

static int pre_by_uuid(void **argv)
{
    return served_by_name(argv, "nvmlDeviceGetHandleByUUID");
}

static int pre_by_pci(void **argv)
{
    return served_by_name(argv, "nvmlDeviceGetHandleByPciBusId_v2");
}

/* nvmlDeviceGetIndex(device, index): the position it is served at. */
static void post_index(void **argv, int status)
{
    unsigned *index = ARG(unsigned *, 1);
    int pos = devices_nvml_position(ARG(const void *, 0));
    if (status == NVML_SUCCESS && index && pos >= 0)
        *index = (unsigned)pos;
}

static const struct guard nvml_guards[] = {
    { "nvml", "(initialisation)", NULL, post_init },
    { "nvml", "nvmlShutdown", pre_initialised, post_shutdown },
    { "nvml", "(setting calls)", pre_setting, NULL },
    { "nvml", "(every other call)", pre_initialised, NULL },
};

static const struct guard device_guards[] = {
    { "nvml", "nvmlDeviceGetCount", pre_initialised, post_count },
    { "nvml", "nvmlDeviceGetCount_v2", pre_initialised, post_count },
    { "nvml", "nvmlDeviceGetHandleByIndex", pre_by_index, NULL },
    { "nvml", "nvmlDeviceGetHandleByIndex_v2", pre_by_index, NULL },
    { "nvml", "nvmlDeviceGetHandleByUUID", pre_by_uuid, NULL },
    { "nvml", "nvmlDeviceGetHandleByPciBusId", pre_by_pci, NULL },
    { "nvml", "nvmlDeviceGetHandleByPciBusId_v2", pre_by_pci, NULL },
    { "nvml", "nvmlDeviceGetIndex", pre_initialised, post_index },
};

const struct guard *nvml_guard_for(const char *lib, const char *name)
{
    if (strcmp(lib, "nvml") != 0)
        return NULL;
    if (strncmp(name, "nvmlInit", 8) == 0)
        return &nvml_guards[0];
    if (strcmp(name, "nvmlShutdown") == 0)
        return &nvml_guards[1];
    for (size_t i = 0; i < sizeof setting_calls / sizeof setting_calls[0]; i++)
        if (strcmp(setting_calls[i], name) == 0)
            return &nvml_guards[2];
    for (size_t i = 0; i < sizeof device_guards / sizeof device_guards[0]; i++)
        if (strcmp(device_guards[i].name, name) == 0)
            return &device_guards[i];
    return &nvml_guards[3];
}

/* ---- rgpu_nvml_list (codegen/nvml_own.h) ------------------------------------------- */

struct list_kind {
    const char *fn;
    int takes_arg;          /* the function's value between device and count */
    int processes;
};

static const struct list_kind kinds[RGPU_NVML_LIST_KINDS] = {
    [RGPU_NVML_LIST_COMPUTE_PROCS] = { "nvmlDeviceGetComputeRunningProcesses_v3", 0, 1 },
    [RGPU_NVML_LIST_GRAPHICS_PROCS] = { "nvmlDeviceGetGraphicsRunningProcesses_v3", 0, 1 },
    [RGPU_NVML_LIST_MPS_PROCS] = { "nvmlDeviceGetMPSComputeRunningProcesses_v3", 0, 1 },
    [RGPU_NVML_LIST_RETIRED_PAGES] = { "nvmlDeviceGetRetiredPages", 1, 0 },
    [RGPU_NVML_LIST_MEMORY_CLOCKS] = { "nvmlDeviceGetSupportedMemoryClocks", 0, 0 },
    [RGPU_NVML_LIST_GRAPHICS_CLOCKS] = { "nvmlDeviceGetSupportedGraphicsClocks", 1, 0 },
};

typedef nvmlReturn_t (*list_fn)(nvmlDevice_t, unsigned *, void *);
typedef nvmlReturn_t (*list_arg_fn)(nvmlDevice_t, unsigned, unsigned *, void *);

/* The whole list, into buf (RGPU_NVML_LIST_MAX entries): its status. */
static nvmlReturn_t read_list(const struct list_kind *k, void *fn, nvmlDevice_t dev,
                              unsigned arg, unsigned *count, void *buf)
{
    *count = RGPU_NVML_LIST_MAX;
    return k->takes_arg ? ((list_arg_fn)fn)(dev, arg, count, buf)
                        : ((list_fn)fn)(dev, count, buf);
}

/* Keep the entries of this process. */
static unsigned own_processes(nvmlProcessInfo_t *p, unsigned n)
{
    unsigned kept = 0;
    unsigned self = (unsigned)getpid();
    for (unsigned i = 0; i < n; i++)
        if (p[i].pid == self)
            p[kept++] = p[i];
    return kept;
}

/* The codec checked the list (its entry size is known), the device (a
 * handle the session holds) and that entries holds capacity of them; the
 * guard, that the client initialised NVML. */
nvmlReturn_t serve_rgpu_nvml_list(unsigned int list, nvmlDevice_t device, unsigned int arg,
                                  void *entries, unsigned int capacity, unsigned int *count)
{
    if (list >= RGPU_NVML_LIST_KINDS || capacity > RGPU_NVML_LIST_MAX || !count)
        return serve_transport(RGPU_EPROTO);
    const struct list_kind *k = &kinds[list];
    size_t entry = rgpu_nvml_list_entry_size((int)list);
    void *fn = backend_sym("nvml", k->fn);
    if (!fn)
        return serve_transport(RGPU_ENOSYM);
    unsigned char *buf = calloc(RGPU_NVML_LIST_MAX, entry);
    if (!buf)
        return serve_transport(RGPU_ENOMEM);
    unsigned n = 0;
    nvmlReturn_t rc = read_list(k, fn, device, arg, &n, buf);
    if (rc == NVML_SUCCESS && n > RGPU_NVML_LIST_MAX)
        rc = NVML_ERROR_UNKNOWN;        /* the library broke its word */
    if (rc == NVML_SUCCESS && k->processes)
        n = own_processes((nvmlProcessInfo_t *)buf, n);
    if (rc == NVML_SUCCESS && n > capacity)
        rc = NVML_ERROR_INSUFFICIENT_SIZE;
    *count = rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE ? n : 0;
    if (rc == NVML_SUCCESS && n)
        memcpy(entries, buf, n * entry);
    free(buf);
    return rc;
}
