/* Which kernels may printf, as common/rgpu_printf_scan.c reads real nvcc
 * output:
 *
 *   printf_scan IMAGE...
 *
 * Each IMAGE is kernels.cuh compiled by nvcc (tests/meson.build): a cubin
 * of whole-program and of relocatable code, one linked by nvlink, PTX of
 * both, fatbins with cubins and PTX stored plainly, LZ4- and
 * zstd-compressed.  In each, the kernels that reach printf (directly,
 * through device functions, recursion, a function pointer, a virtual call)
 * may print and the others (a helper, an assert, the device heap) do not.
 * A kernel that prints in its sm_80 code only may print on an A100
 * (8.0) or an RTX 3090 (8.6), not on an H200 (9.0).  Then images it must
 * not trust (damaged, or with headers reaching beyond them): every kernel
 * of them may print. */
#include "rgpu_printf_scan.h"

#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const printing[] = { "k_print", "k_chain", "k_recursive", "k_pointer",
                                        "k_virtual" };
static const char *const silent[] = { "k_quiet", "k_assert", "k_heap" };
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int failures;

static void check(int ok, const char *what, const char *detail);

/* A scan for GPUs of those compute capabilities (none: any GPU). */
static struct rgpu_print_scan scan_for(const void *image, size_t size, const unsigned *archs,
                                       size_t narchs)
{
    struct rgpu_print_scan s;
    rgpu_print_scan(image, size, archs, narchs, &s);
    return s;
}

static void check(int ok, const char *what, const char *detail)
{
    printf("%s: %s%s%s\n", ok ? "ok" : "FAIL", what, detail ? ": " : "", detail ? detail : "");
    if (!ok)
        failures++;
}

static unsigned char *read_image(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0 ||
        !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    } else {
        buf[n] = '\0';      /* PTX is text */
        *size = (size_t)n;
    }
    if (f)
        fclose(f);
    return buf;
}

/* The scan of the image tells each kernel apart. */
static void expect_known(const char *name, const void *image, size_t size)
{
    struct rgpu_print_scan s;
    char what[512];
    int rc = rgpu_print_scan(image, size, NULL, 0, &s);
    snprintf(what, sizeof what, "%s: read (%zu silent kernels)", name, s.nclean);
    check(rc == 0 && !s.unknown && s.any_prints, what, NULL);
    for (size_t i = 0; i < COUNT(printing); i++) {
        snprintf(what, sizeof what, "%s: %s may print", name, printing[i]);
        check(rgpu_print_scan_may_print(&s, printing[i]), what, NULL);
    }
    for (size_t i = 0; i < COUNT(silent); i++) {
        snprintf(what, sizeof what, "%s: %s cannot print", name, silent[i]);
        check(!rgpu_print_scan_may_print(&s, silent[i]), what, NULL);
    }
    snprintf(what, sizeof what, "%s: a kernel it does not hold may print", name);
    check(rgpu_print_scan_may_print(&s, "k_elsewhere"), what, NULL);
    rgpu_print_scan_free(&s);
}

/* The scan trusts nothing of the image: every kernel may print. */
static void expect_unknown(const char *what, const void *image, size_t size)
{
    struct rgpu_print_scan s = scan_for(image, size, NULL, 0);
    int all = s.unknown && s.any_prints;
    for (size_t i = 0; i < COUNT(silent); i++)
        all = all && rgpu_print_scan_may_print(&s, silent[i]);
    check(all, what, "every kernel may print");
    rgpu_print_scan_free(&s);
}

/* ---- entries for other GPUs ----------------------------------------------------------- */

/* archs.fatbin: k_arch prints in its sm_80 cubin alone. */
static void per_gpu(const void *image, size_t size)
{
    static const unsigned h200[] = { 90 }, a100[] = { 80 }, rtx3090[] = { 86 },
                          mixed[] = { 90, 86 }, t4[] = { 75 };
    struct rgpu_print_scan s = scan_for(image, size, h200, 1);
    check(!s.unknown && !rgpu_print_scan_may_print(&s, "k_arch") &&
              rgpu_print_scan_may_print(&s, "k_print"),
          "archs.fatbin for sm_90: k_arch cannot print, k_print may", NULL);
    rgpu_print_scan_free(&s);
    s = scan_for(image, size, a100, 1);
    check(rgpu_print_scan_may_print(&s, "k_arch") && !rgpu_print_scan_may_print(&s, "k_quiet"),
          "archs.fatbin for sm_80: k_arch may print, k_quiet cannot", NULL);
    rgpu_print_scan_free(&s);
    s = scan_for(image, size, rtx3090, 1);
    check(rgpu_print_scan_may_print(&s, "k_arch"), "archs.fatbin for sm_86: k_arch may print",
          NULL);
    rgpu_print_scan_free(&s);
    s = scan_for(image, size, mixed, 2);
    check(rgpu_print_scan_may_print(&s, "k_arch"),
          "archs.fatbin for sm_90 and sm_86 at once: k_arch may print", NULL);
    rgpu_print_scan_free(&s);
    s = scan_for(image, size, NULL, 0);
    check(rgpu_print_scan_may_print(&s, "k_arch"),
          "archs.fatbin for GPUs unknown: k_arch may print", NULL);
    rgpu_print_scan_free(&s);
    s = scan_for(image, size, t4, 1);
    check(rgpu_print_scan_may_print(&s, "k_quiet"),
          "archs.fatbin for sm_75, which runs none of it: every kernel may print", NULL);
    rgpu_print_scan_free(&s);
}

/* zstd.fatbin holds an sm_90 cubin and compute_80 PTX: an sm_86 GPU
 * compiles the PTX, an sm_75 one runs neither. */
static void ptx_for_newer(const void *image, size_t size)
{
    static const unsigned rtx3090[] = { 86 }, t4[] = { 75 };
    struct rgpu_print_scan s = scan_for(image, size, rtx3090, 1);
    check(!rgpu_print_scan_may_print(&s, "k_quiet") && rgpu_print_scan_may_print(&s, "k_arch"),
          "zstd.fatbin for sm_86: its PTX read", NULL);
    rgpu_print_scan_free(&s);
    s = scan_for(image, size, t4, 1);
    check(rgpu_print_scan_may_print(&s, "k_quiet"), "zstd.fatbin for sm_75: nothing read", NULL);
    rgpu_print_scan_free(&s);
}

/* ---- damaged images -------------------------------------------------------------------- */

static uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The first fatbin entry: header at 16 (after the container's header). */
#define FIRST_ENTRY 16

static void damaged_fatbins(const unsigned char *fatbin, size_t size)
{
    unsigned char *copy = malloc(size);
    if (!copy)
        return;
    memcpy(copy, fatbin, size);
    copy[FIRST_ENTRY] = 7;      /* an entry of a kind it does not know */
    expect_unknown("fatbin with an entry of another kind", copy, size);

    memcpy(copy, fatbin, size);
    uint32_t header = get32(copy + FIRST_ENTRY + 4);
    memset(copy + FIRST_ENTRY + header, 0xa5, 64);     /* compressed bytes garbled */
    expect_unknown("fatbin whose first entry does not decompress", copy, size);

    expect_unknown("fatbin cut short", fatbin, size - 100);
    free(copy);
}

/* A cubin that names vprintf without its call graph cannot be read. */
static void cubin_without_callgraph(const unsigned char *cubin, size_t size)
{
    unsigned char *copy = malloc(size);
    unsigned char *at;
    if (!copy)
        return;
    memcpy(copy, cubin, size);
    at = memmem(copy, size, ".nv.callgraph", strlen(".nv.callgraph"));
    check(at != NULL, "cubin names its call graph section", NULL);
    if (at) {
        at[4] = 'X';            /* ".nv.Xallgraph" */
        expect_unknown("cubin without a call graph", copy, size);
    }
    free(copy);
}

/* A cubin whose section name table has no file bytes (SHT_NOBITS) and
 * declares 1 MiB from offset `at`: its names cannot be read, and nothing
 * outside the image's bytes is.  The copy is exactly their size: a read
 * just past them shows in the sanitizer build, one a terabyte past them
 * faults in any build. */
static void cubin_names_at(const unsigned char *cubin, size_t size, uint64_t at,
                           const char *what)
{
    unsigned char *copy = malloc(size);
    Elf64_Ehdr eh;
    Elf64_Shdr names;
    if (!copy)
        return;
    memcpy(copy, cubin, size);
    memcpy(&eh, copy, sizeof eh);
    unsigned char *header = copy + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof names;
    memcpy(&names, header, sizeof names);
    names.sh_type = SHT_NOBITS;
    names.sh_offset = at;
    names.sh_size = 1 << 20;
    memcpy(header, &names, sizeof names);
    expect_unknown(what, copy, size);
    free(copy);
}

static void cubin_names_beyond(const unsigned char *cubin, size_t size)
{
    cubin_names_at(cubin, size, size - 4, "cubin whose name table reaches beyond it");
    cubin_names_at(cubin, size, size + (1ull << 40), "cubin whose name table lies far beyond it");
}

static void texts(void)
{
    static const char quiet[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                                ".visible .entry k_quiet()\n{\n\tret;\n}\n";
    struct rgpu_print_scan s = scan_for(quiet, sizeof quiet, NULL, 0);
    check(!s.unknown && !s.any_prints && !rgpu_print_scan_may_print(&s, "k_quiet"),
          "PTX without printf: nothing may print", NULL);
    rgpu_print_scan_free(&s);

    static const char unbalanced[] = ".version 8.0\n.target sm_90\n"
                                     ".visible .entry k_quiet()\n{\n\tret;\n";
    expect_unknown("PTX it cannot follow", unbalanced, sizeof unbalanced);
    expect_unknown("an empty image", "", 0);
}

int main(int argc, char **argv)
{
    unsigned char *fatbin = NULL, *cubin = NULL;
    size_t fatbin_size = 0, cubin_size = 0;
    for (int i = 1; i < argc; i++) {
        size_t size = 0;
        unsigned char *image = read_image(argv[i], &size);
        const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
        check(image != NULL, name, image ? NULL : "cannot read it");
        if (!image)
            continue;
        if (strcmp(name, "archs.fatbin") == 0) {
            per_gpu(image, size);
            free(image);
            continue;
        }
        expect_known(name, image, size);
        if (strstr(name, "zstd") && !fatbin) {
            fatbin = image;
            fatbin_size = size;
        } else if (strcmp(name, "whole.cubin") == 0) {
            cubin = image;
            cubin_size = size;
        } else {
            free(image);
        }
    }
    check(fatbin && cubin, "the compressed fatbin and the whole-program cubin were given", NULL);
    if (fatbin) {
        ptx_for_newer(fatbin, fatbin_size);
        damaged_fatbins(fatbin, fatbin_size);
    }
    if (cubin) {
        cubin_without_callgraph(cubin, cubin_size);
        cubin_names_beyond(cubin, cubin_size);
    }
    texts();
    free(fatbin);
    free(cubin);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
