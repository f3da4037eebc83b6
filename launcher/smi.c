/* `rgpu smi`: the server's GPUs as nvidia-smi shows them, read through the
 * stub libnvidia-ml.so.1 loaded into the launcher with RGPU_SERVER
 * pointing at the server: the path a monitoring tool's NVML calls take.
 * A value the server's NVML does not give is shown as N/A. */
#include "launcher.h"

#include <dlfcn.h>
#include <nvml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The NVML functions `rgpu smi` reads, resolved from the stub. */
struct nvml {
    void *handle;
    __typeof__(&nvmlInit_v2) init;
    __typeof__(&nvmlShutdown) shutdown;
    __typeof__(&nvmlErrorString) error_string;
    __typeof__(&nvmlSystemGetDriverVersion) driver_version;
    __typeof__(&nvmlSystemGetCudaDriverVersion_v2) cuda_version;
    __typeof__(&nvmlDeviceGetCount_v2) count;
    __typeof__(&nvmlDeviceGetHandleByIndex_v2) by_index;
    __typeof__(&nvmlDeviceGetName) name;
    __typeof__(&nvmlDeviceGetPciInfo_v3) pci;
    __typeof__(&nvmlDeviceGetPersistenceMode) persistence;
    __typeof__(&nvmlDeviceGetDisplayActive) display;
    __typeof__(&nvmlDeviceGetTotalEccErrors) ecc_errors;
    __typeof__(&nvmlDeviceGetFanSpeed) fan;
    __typeof__(&nvmlDeviceGetTemperature) temperature;
    __typeof__(&nvmlDeviceGetPerformanceState) pstate;
    __typeof__(&nvmlDeviceGetPowerUsage) power;
    __typeof__(&nvmlDeviceGetEnforcedPowerLimit) power_limit;
    __typeof__(&nvmlDeviceGetMemoryInfo) memory;
    __typeof__(&nvmlDeviceGetUtilizationRates) utilization;
    __typeof__(&nvmlDeviceGetComputeMode) compute_mode;
    __typeof__(&nvmlDeviceGetMigMode) mig_mode;
    __typeof__(&nvmlDeviceGetComputeRunningProcesses_v3) processes;
};

#define RESOLVE(n, field, sym) ((n)->field = (__typeof__((n)->field))dlsym((n)->handle, sym))

static int nvml_load(const struct stubs *st, const struct server *s, struct nvml *n)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/libnvidia-ml.so.1", st->dir);
    setenv("RGPU_SERVER", s->addr, 1);     /* read when the client core connects */
    n->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!n->handle) {
        say("cannot load %s: %s", path, dlerror());
        return -1;
    }
    int all = RESOLVE(n, init, "nvmlInit_v2") && RESOLVE(n, shutdown, "nvmlShutdown") &&
              RESOLVE(n, error_string, "nvmlErrorString") &&
              RESOLVE(n, driver_version, "nvmlSystemGetDriverVersion") &&
              RESOLVE(n, cuda_version, "nvmlSystemGetCudaDriverVersion_v2") &&
              RESOLVE(n, count, "nvmlDeviceGetCount_v2") &&
              RESOLVE(n, by_index, "nvmlDeviceGetHandleByIndex_v2") &&
              RESOLVE(n, name, "nvmlDeviceGetName") && RESOLVE(n, pci, "nvmlDeviceGetPciInfo_v3") &&
              RESOLVE(n, persistence, "nvmlDeviceGetPersistenceMode") &&
              RESOLVE(n, display, "nvmlDeviceGetDisplayActive") &&
              RESOLVE(n, ecc_errors, "nvmlDeviceGetTotalEccErrors") &&
              RESOLVE(n, fan, "nvmlDeviceGetFanSpeed") &&
              RESOLVE(n, temperature, "nvmlDeviceGetTemperature") &&
              RESOLVE(n, pstate, "nvmlDeviceGetPerformanceState") &&
              RESOLVE(n, power, "nvmlDeviceGetPowerUsage") &&
              RESOLVE(n, power_limit, "nvmlDeviceGetEnforcedPowerLimit") &&
              RESOLVE(n, memory, "nvmlDeviceGetMemoryInfo") &&
              RESOLVE(n, utilization, "nvmlDeviceGetUtilizationRates") &&
              RESOLVE(n, compute_mode, "nvmlDeviceGetComputeMode") &&
              RESOLVE(n, mig_mode, "nvmlDeviceGetMigMode") &&
              RESOLVE(n, processes, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!all) {
        say("%s lacks an NVML function it should export", path);
        return -1;
    }
    return 0;
}

#define RULE "+-----------------------------------------+------------------------+----------------------+"
#define WIDE "+-----------------------------------------------------------------------------------------+"

/* A cell's text: the value, or N/A when the query failed. */
#define CELL(buf, ok, ...) \
    ((ok) ? snprintf(buf, sizeof buf, __VA_ARGS__) : snprintf(buf, sizeof buf, "N/A"))

static const char *on_off(nvmlEnableState_t s)
{
    return s == NVML_FEATURE_ENABLED ? "On" : "Off";
}

static const char *compute_mode_name(nvmlComputeMode_t m)
{
    switch (m) {
    case NVML_COMPUTEMODE_DEFAULT: return "Default";
    case NVML_COMPUTEMODE_EXCLUSIVE_THREAD: return "E. Thread";
    case NVML_COMPUTEMODE_PROHIBITED: return "Prohibited";
    case NVML_COMPUTEMODE_EXCLUSIVE_PROCESS: return "E. Process";
    default: return "?";
    }
}

static void print_header(const struct nvml *n, const struct server *s)
{
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE], cuda[32], line[1200];
    int cv = 0;
    if (n->driver_version(driver, sizeof driver) != NVML_SUCCESS)
        snprintf(driver, sizeof driver, "N/A");
    CELL(cuda, n->cuda_version(&cv) == NVML_SUCCESS, "%d.%d", cv / 1000, cv % 1000 / 10);
    printf("%s\n", WIDE);
    snprintf(line, sizeof line, "rgpu smi    Driver Version: %s    CUDA Version: %s", driver, cuda);
    printf("| %-87.87s |\n", line);
    snprintf(line, sizeof line, "server: %s", s->desc);
    printf("| %-87.87s |\n", line);
    printf("%s\n", RULE);
    printf("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n");
    printf("| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n");
    printf("|                                         |                        |               MIG M. |\n");
    printf("|=========================================+========================+======================|\n");
}

static void print_device(const struct nvml *n, unsigned i)
{
    nvmlDevice_t d;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], persist[8], bus[32], disp[8], ecc[24];
    char fan[8], temp[8], perf[8], power[32], mem[40], util[8], cmode[16], mig[16];
    nvmlPciInfo_t pci;
    nvmlEnableState_t pm = 0, da = 0;
    unsigned long long errors = 0;
    unsigned f = 0, t = 0, pw = 0, cap = 0, cur_mig = 0, pend_mig = 0;
    nvmlPstates_t ps = 0;
    nvmlMemory_t m;
    nvmlUtilization_t u;
    nvmlComputeMode_t cm = 0;

    if (n->by_index(i, &d) != NVML_SUCCESS) {
        printf("| %3u  (cannot open)%*s|\n", i, 70, "");
        return;
    }
    if (n->name(d, name, sizeof name) != NVML_SUCCESS)
        snprintf(name, sizeof name, "N/A");
    CELL(persist, n->persistence(d, &pm) == NVML_SUCCESS, "%s", on_off(pm));
    CELL(bus, n->pci(d, &pci) == NVML_SUCCESS, "%s", pci.busId);
    CELL(disp, n->display(d, &da) == NVML_SUCCESS, "%s", on_off(da));
    CELL(ecc, n->ecc_errors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &errors) ==
                  NVML_SUCCESS, "%llu", errors);
    CELL(fan, n->fan(d, &f) == NVML_SUCCESS, "%u%%", f);
    CELL(temp, n->temperature(d, NVML_TEMPERATURE_GPU, &t) == NVML_SUCCESS, "%uC", t);
    CELL(perf, n->pstate(d, &ps) == NVML_SUCCESS, "P%d", (int)ps);
    int have_power = n->power(d, &pw) == NVML_SUCCESS, have_cap = n->power_limit(d, &cap) == NVML_SUCCESS;
    snprintf(power, sizeof power, "%s / %s", have_power ? "" : "N/A", have_cap ? "" : "N/A");
    if (have_power || have_cap) {
        char a[12] = "N/A", b[12] = "N/A";
        if (have_power)
            snprintf(a, sizeof a, "%uW", pw / 1000);
        if (have_cap)
            snprintf(b, sizeof b, "%uW", cap / 1000);
        snprintf(power, sizeof power, "%5s / %5s", a, b);
    }
    CELL(mem, n->memory(d, &m) == NVML_SUCCESS, "%lluMiB / %lluMiB", m.used >> 20, m.total >> 20);
    CELL(util, n->utilization(d, &u) == NVML_SUCCESS, "%u%%", u.gpu);
    CELL(cmode, n->compute_mode(d, &cm) == NVML_SUCCESS, "%s", compute_mode_name(cm));
    CELL(mig, n->mig_mode(d, &cur_mig, &pend_mig) == NVML_SUCCESS, "%s",
         cur_mig == NVML_DEVICE_MIG_ENABLE ? "Enabled" : "Disabled");

    printf("| %3u  %-23.23s %10s | %16s %5s | %20s |\n", i, name, persist, bus, disp, ecc);
    printf("| %4s %5s  %4s %22s | %22s | %8s %11s |\n", fan, temp, perf, power, mem, util, cmode);
    printf("| %39s | %22s | %20s |\n", "", "", mig);
    printf("%s\n", RULE);
}

/* This client's own processes: rgpud shows a client no one else's. */
static void print_processes(const struct nvml *n, unsigned count)
{
    int any = 0;
    printf("\n%s\n", WIDE);
    printf("| %-87s |\n", "Processes (this client's only: rgpud shows no other client's)");
    printf("|  GPU   PID   Type   Process name                                             GPU Memory |\n");
    printf("|=========================================================================================|\n");
    for (unsigned i = 0; i < count; i++) {
        nvmlDevice_t d;
        nvmlProcessInfo_t p[32];
        unsigned np = 32;
        if (n->by_index(i, &d) != NVML_SUCCESS || n->processes(d, &np, p) != NVML_SUCCESS)
            continue;
        for (unsigned k = 0; k < np; k++, any = 1)
            printf("| %4u %7u      C   %-54s %7lluMiB |\n", i, p[k].pid, "rgpu smi",
                   p[k].usedGpuMemory >> 20);
    }
    if (!any)
        printf("|  %-86s |\n", "No running processes found");
    printf("%s\n", WIDE);
}

int smi_print(const struct server *s, const struct stubs *st)
{
    struct nvml n = { 0 };
    unsigned count = 0;
    if (nvml_load(st, s, &n) < 0)
        return -1;
    nvmlReturn_t rc = n.init();
    if (rc == NVML_SUCCESS)
        rc = n.count(&count);
    if (rc != NVML_SUCCESS) {
        say("the server's NVML answers: %s (is libnvidia-ml.so.1 on the GPU host?)",
            n.error_string(rc));
        return -1;
    }
    print_header(&n, s);
    for (unsigned i = 0; i < count; i++)
        print_device(&n, i);
    print_processes(&n, count);
    n.shutdown();
    fflush(stdout);
    return 0;
}
