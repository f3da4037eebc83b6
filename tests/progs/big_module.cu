// Modules larger than a frame of rgpu's protocol (72 MiB; through rgpu they
// travel in pieces).  big_module.cuh's 80 MiB of initialised device memory
// as a fatbin and as its cubin (built at build time, rebuilt here from
// their non-zero blocks), with a pattern written over the table's initial
// bytes in the image, loaded by cuModuleLoadData, cuModuleLoadDataEx,
// cuLibraryLoadData, cuModuleLoad (a file), linked by cuLink* (the image
// goes to the driver and comes back), and registered with the runtime the
// way nvcc's generated code registers a program's fatbins.  Each time the
// whole table is read back from the device and compared.  Link with -lcuda.
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>
#include "check.h"
#include "big_module_image.h"       // generated: big_module_size, _blocks, _bytes
#include "big_module_rdc_image.h"   // the same as relocatable code, for cuLink*

// What nvcc's generated code calls to register a fatbin (crt/host_runtime.h).
extern "C" void **__cudaRegisterFatBinary(void *fatCubin);
extern "C" void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
extern "C" void __cudaUnregisterFatBinary(void **fatCubinHandle);
extern "C" void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                  const char *deviceName, int ext, size_t size, int constant, int global);

#define TABLE_BYTES ((size_t)80 << 20)
#define FATBIN_WRAPPER_MAGIC 0x466243b1u

// ---- the image ---------------------------------------------------------------------

struct image {
    unsigned char *fatbin;      // the container
    size_t size;
    unsigned char *elf;         // its cubin
    size_t elf_size;
    const unsigned char *table; // big_table's initial bytes in the cubin
};

// The image from its non-zero blocks.
static unsigned char *rebuild(unsigned long long size, const unsigned long long (*blocks)[2], size_t nblocks,
                              const unsigned char *bytes)
{
    unsigned char *p = (unsigned char *)calloc(1, size);
    if (!p)
        return NULL;
    for (size_t i = 0; i < nblocks; i++) {
        memcpy(p + blocks[i][0], bytes, blocks[i][1]);
        bytes += blocks[i][1];
    }
    return p;
}

// The bytes of symbol `name`'s initial value in the cubin, or NULL.
static unsigned char *symbol_bytes(unsigned char *elf, const char *name, size_t *size)
{
    Elf64_Ehdr *eh = (Elf64_Ehdr *)elf;
    Elf64_Shdr *sh = (Elf64_Shdr *)(elf + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB)
            continue;
        Elf64_Sym *sym = (Elf64_Sym *)(elf + sh[i].sh_offset);
        const char *str = (const char *)elf + sh[sh[i].sh_link].sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
            if (strcmp(str + sym[k].st_name, name) != 0 || sym[k].st_shndx >= eh->e_shnum)
                continue;
            *size = sym[k].st_size;
            return elf + sh[sym[k].st_shndx].sh_offset + sym[k].st_value;
        }
    }
    return NULL;
}

// Rebuilds the image, finds its cubin and writes the pattern over the table.
static bool image_make(struct image *im, unsigned long long size, const unsigned long long (*blocks)[2],
                       size_t nblocks, const unsigned char *bytes, const char *what)
{
    char name[160];
    im->fatbin = rebuild(size, blocks, nblocks, bytes);
    im->size = size;
    if (!check(im->fatbin != NULL, fmt_name(name, sizeof name, "%s: image rebuilt", what), "out of memory"))
        return false;
    // The container's first entry is the cubin (one -gencode, no PTX).
    uint16_t header_size;
    uint32_t entry_header;
    uint64_t payload;
    memcpy(&header_size, im->fatbin + 6, 2);
    memcpy(&entry_header, im->fatbin + header_size + 4, 4);
    memcpy(&payload, im->fatbin + header_size + 8, 8);
    im->elf = im->fatbin + header_size + entry_header;
    im->elf_size = payload;
    size_t table_size = 0;
    unsigned char *table = symbol_bytes(im->elf, "big_table", &table_size);
    if (!check(table && table_size == TABLE_BYTES, fmt_name(name, sizeof name, "%s: big_table in the cubin", what),
               "%s, %zu bytes", table ? "found" : "missing", table_size))
        return false;
    for (size_t i = 0; i < TABLE_BYTES / 4; i++) {
        uint32_t v = (uint32_t)(i * 2654435761u) ^ 0xa5a5a5a5u;
        memcpy(table + i * 4, &v, 4);
    }
    im->table = table;
    return true;
}

// ---- reading the table back ----------------------------------------------------------

static unsigned char *readback;

// The device's copy of the table at dptr (bytes long) equals the image's.
static void check_table(const struct image *im, CUdeviceptr dptr, size_t bytes, const char *what)
{
    char name[160];
    if (!check(bytes == TABLE_BYTES, fmt_name(name, sizeof name, "%s: big_table is 80 MiB", what), "%zu bytes",
               bytes))
        return;
    memset(readback, 0, TABLE_BYTES);
    if (!check_cu(cuMemcpyDtoH(readback, dptr, TABLE_BYTES), fmt_name(name, sizeof name, "%s: read back", what)))
        return;
    size_t i = 0;
    while (i < TABLE_BYTES && readback[i] == im->table[i])
        i++;
    check(i == TABLE_BYTES, fmt_name(name, sizeof name, "%s: the whole table came back", what),
          "byte %zu is 0x%02x, want 0x%02x", i, i < TABLE_BYTES ? readback[i] : 0, i < TABLE_BYTES ? im->table[i] : 0);
}

static void check_module(const struct image *im, CUmodule mod, const char *what)
{
    CUdeviceptr d;
    size_t bytes = 0;
    char name[160];
    if (check_cu(cuModuleGetGlobal(&d, &bytes, mod, "big_table"),
                 fmt_name(name, sizeof name, "%s: cuModuleGetGlobal big_table", what)))
        check_table(im, d, bytes, what);
    uint32_t marker[4] = {0};
    if (check_cu(cuModuleGetGlobal(&d, &bytes, mod, "big_marker"),
                 fmt_name(name, sizeof name, "%s: cuModuleGetGlobal big_marker", what)) &&
        check_cu(cuMemcpyDtoH(marker, d, sizeof marker), "cuMemcpyDtoH big_marker"))
        check(marker[0] == 0x12345678u && marker[1] == 0x9abcdef0u && marker[3] == 4u,
              fmt_name(name, sizeof name, "%s: big_marker", what), "0x%x 0x%x", marker[0], marker[1]);
    check_cu(cuModuleUnload(mod), fmt_name(name, sizeof name, "%s: cuModuleUnload", what));
}

// ---- the loads -------------------------------------------------------------------------

static void test_loads(const struct image *im)
{
    CUmodule mod;
    if (check_cu(cuModuleLoadData(&mod, im->fatbin), "cuModuleLoadData 80 MiB fatbin"))
        check_module(im, mod, "fatbin");

    char info[1024] = "";
    CUjit_option opt[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *val[] = {info, (void *)(uintptr_t)sizeof info};
    if (check_cu(cuModuleLoadDataEx(&mod, im->elf, 2, opt, val), "cuModuleLoadDataEx 80 MiB cubin")) {
        check(memchr(info, 0, sizeof info) != NULL, "cubin: info log inside its buffer", "no NUL");
        check_module(im, mod, "cubin");
    }

    CUlibrary lib;
    if (check_cu(cuLibraryLoadData(&lib, im->fatbin, NULL, NULL, 0, NULL, NULL, 0),
                 "cuLibraryLoadData 80 MiB fatbin")) {
        CUdeviceptr d;
        size_t bytes = 0;
        if (check_cu(cuLibraryGetGlobal(&d, &bytes, lib, "big_table"), "library: cuLibraryGetGlobal big_table"))
            check_table(im, d, bytes, "library");
        check_cu(cuLibraryUnload(lib), "cuLibraryUnload");
    }
}

// cuModuleLoad reads the file where the program runs.
static void test_file(const struct image *im)
{
    char path[] = "/tmp/rgpu-big-module-XXXXXX";
    int fd = mkstemp(path);
    if (!check(fd >= 0, "file: a temporary file", "mkstemp failed"))
        return;
    bool wrote = write(fd, im->fatbin, im->size) == (ssize_t)im->size;
    close(fd);
    CUmodule mod;
    if (check(wrote, "file: fatbin written", "short write") &&
        check_cu(cuModuleLoad(&mod, path), "cuModuleLoad 80 MiB file"))
        check_module(im, mod, "file");
    unlink(path);
}

// The relocatable cubin through the linker: up to the driver and back.
static void test_link(const struct image *rdc)
{
    CUlinkState st;
    void *cubin = NULL;
    size_t size = 0;
    if (!check_cu(cuLinkCreate(0, NULL, NULL, &st), "link: cuLinkCreate"))
        return;
    check_cu(cuLinkAddData(st, CU_JIT_INPUT_CUBIN, rdc->elf, rdc->elf_size, "big_module.cubin", 0, NULL, NULL),
             "link: cuLinkAddData 80 MiB cubin");
    if (check_cu(cuLinkComplete(st, &cubin, &size), "link: cuLinkComplete") &&
        check(size > TABLE_BYTES, "link: the linked image holds the table", "%zu bytes", size)) {
        void *copy = malloc(size);
        memcpy(copy, cubin, size);
        CUmodule mod;
        if (check_cu(cuModuleLoadData(&mod, copy), "link: cuModuleLoadData of the linked image"))
            check_module(rdc, mod, "linked");
        free(copy);
    }
    check_cu(cuLinkDestroy(st), "link: cuLinkDestroy");
}

// The runtime's registration, as nvcc's generated constructors do it.
static void test_runtime(const struct image *im)
{
    static struct {
        uint32_t magic, version;
        const void *data;
        void *unused;
    } wrapper;
    static char host_table;     // the host-side name of the device variable
    wrapper.magic = FATBIN_WRAPPER_MAGIC;
    wrapper.version = 1;
    wrapper.data = im->fatbin;
    void **handle = __cudaRegisterFatBinary(&wrapper);
    __cudaRegisterVar(handle, &host_table, (char *)"big_table", "big_table", 0, TABLE_BYTES, 0, 0);
    __cudaRegisterFatBinaryEnd(handle);

    size_t bytes = 0;
    check_cuda(cudaGetSymbolSize(&bytes, host_table), "runtime: cudaGetSymbolSize big_table");
    check(bytes == TABLE_BYTES, "runtime: big_table is 80 MiB", "%zu bytes", bytes);
    memset(readback, 0, TABLE_BYTES);
    if (check_cuda(cudaMemcpyFromSymbol(readback, host_table, TABLE_BYTES), "runtime: cudaMemcpyFromSymbol"))
        check(memcmp(readback, im->table, TABLE_BYTES) == 0, "runtime: the whole table came back", "mismatch");
    __cudaUnregisterFatBinary(handle);
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    struct image im, rdc;

    readback = (unsigned char *)malloc(TABLE_BYTES);
    if (!check(readback != NULL, "memory for the read-back", "out of memory") ||
        !image_make(&im, big_module_size, big_module_blocks, sizeof big_module_blocks / sizeof big_module_blocks[0],
                    big_module_bytes, "fatbin") ||
        !image_make(&rdc, big_module_rdc_size, big_module_rdc_blocks,
                    sizeof big_module_rdc_blocks / sizeof big_module_rdc_blocks[0], big_module_rdc_bytes,
                    "relocatable"))
        return 1;
    check(im.size > (72u << 20), "the fatbin is larger than a frame", "%zu bytes", im.size);

    // The runtime first: it makes the primary context current, which the
    // driver calls below then use.
    test_runtime(&im);
    if (!check_cu(cuInit(0), "cuInit") || !check_cu(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        !check_cu(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
        !check_cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
        return 1;
    test_loads(&im);
    test_file(&im);
    test_link(&rdc);

    check_cu(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
    free(im.fatbin);
    free(rdc.fatbin);
    free(readback);
    return check_exit_status();
}
