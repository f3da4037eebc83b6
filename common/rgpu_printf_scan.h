/* Which kernels of a module image may call printf (rgpu_printf_scan.c).
 *
 * A kernel's printf output reaches the program only where the host
 * synchronises, so the client makes the synchronises after a kernel that
 * may print wait for the server (docs/synchronisation.md, "What kernels
 * print").  This reads the image the program loads: fatbin containers
 * (their entries decompressed), cubins (ELF) and PTX text.  What it
 * cannot read counts as printing. */
#ifndef RGPU_PRINTF_SCAN_H
#define RGPU_PRINTF_SCAN_H

#include <stddef.h>

struct rgpu_print_scan {
    int unknown;        /* a part could not be read: every kernel may print */
    int any_prints;     /* some kernel may print (or unknown) */
    char **clean;       /* the kernels found that cannot print: sorted, unique */
    size_t nclean;
};

/* Scan size bytes of an image for the GPUs of compute capabilities archs
 * (major * 10 + minor; narchs 0: for any GPU): entries of a fatbin that
 * none of them would load are left out.  0, or -1 when memory ran out (the
 * scan is then unknown, as for an image it cannot read). */
int rgpu_print_scan(const void *image, size_t size, const unsigned *archs, size_t narchs,
                    struct rgpu_print_scan *s);
/* Whether the kernel of that (mangled) name may print. */
int rgpu_print_scan_may_print(const struct rgpu_print_scan *s, const char *name);
void rgpu_print_scan_free(struct rgpu_print_scan *s);

#endif
