/* Module images from the client, checked before a CUDA library sees them.
 *
 * cuModuleLoadData, cuLibraryLoadData and cudaLibraryLoadData take an image
 * without a size: the library finds the extent from the image's own
 * headers.  A lying header would make it read past the frame into session
 * memory, and a fatbin wrapper carries a pointer the library follows.  So
 * the image must be one the headers describe exactly inside its buffer:
 *
 *   - fatbin containers (magic 0xBA55ED50), back to back, filling the
 *     buffer; in each, entries whose header and payload lie inside it;
 *     plain ELF entries are checked as cubins too;
 *   - a cubin (ELF64): its header, section and program header tables and
 *     every section's and segment's bytes inside the buffer;
 *   - PTX: text with its terminating NUL inside the buffer;
 *   - a fatbin wrapper (magic 0x466243B1): refused, always (the client
 *     unwraps it and sends the container).
 *
 * The checked image is then handed over as a copy followed by zero bytes,
 * so that a library that walks on to "the next container" finds none.
 *
 * cuLinkAddData gives a size: there the formats with headers (fatbin,
 * ELF, ar archives of objects) are checked the same way, and the rest
 * (PTX, LTO-IR) is passed by its size, the zero bytes ending a string. */
#include "image_check.h"
#include "rgpu_log.h"

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xba55ed50u
#define FATBIN_HEADER 16            /* magic, version, header_size, fat_size */
#define ENTRY_HEADER_MIN 64         /* ELF entries 64 bytes, PTX 80 */
#define ENTRY_KIND_ELF 2
#define ENTRY_FLAG_COMPRESSED (0x2000u | 0x8000u)   /* LZ4, zstd */

static uint16_t u16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t u64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* [off, off + len) inside n bytes, without overflow. */
static int inside(uint64_t off, uint64_t len, size_t n)
{
    return off <= n && len <= n - off;
}

/* A table of count entries of entsize bytes (at least min) at off. */
static int table_inside(uint64_t off, uint64_t count, uint64_t entsize, uint64_t min, size_t n)
{
    if (count == 0)
        return 1;
    return entsize >= min && count <= n / entsize && inside(off, count * entsize, n);
}

static int elf_ok(const unsigned char *p, size_t n)
{
    Elf64_Ehdr eh;
    if (n < sizeof eh)
        return 0;
    memcpy(&eh, p, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_ehsize < sizeof eh)
        return 0;
    /* e_shnum 0 with a table means "the count is in section 0": cubins
     * never need it, and a library would read it from an unchecked place. */
    if (eh.e_shnum == 0 && eh.e_shoff != 0)
        return 0;
    if (!table_inside(eh.e_shoff, eh.e_shnum, eh.e_shentsize, sizeof(Elf64_Shdr), n) ||
        !table_inside(eh.e_phoff, eh.e_phnum, eh.e_phentsize, sizeof(Elf64_Phdr), n))
        return 0;
    if (eh.e_shnum && eh.e_shstrndx >= eh.e_shnum)
        return 0;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, p + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof sh);
        if (sh.sh_type != SHT_NOBITS && sh.sh_type != SHT_NULL &&
            !inside(sh.sh_offset, sh.sh_size, n))
            return 0;
        if (sh.sh_link >= eh.e_shnum && sh.sh_type != SHT_NULL)
            return 0;
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, p + eh.e_phoff + (uint64_t)i * eh.e_phentsize, sizeof ph);
        if (!inside(ph.p_offset, ph.p_filesz, n))
            return 0;
    }
    return 1;
}

/* One container's entries, c pointing at its first entry, n bytes of them. */
static int entries_ok(const unsigned char *c, size_t n)
{
    size_t off = 0;
    /* As the libraries walk them: entries while a header still fits. */
    while (n - off >= ENTRY_HEADER_MIN) {
        const unsigned char *e = c + off;
        uint32_t hsize = u32(e + 4), csize = u32(e + 16);
        uint64_t psize = u64(e + 8), flags = u64(e + 40);
        if (hsize < ENTRY_HEADER_MIN || !inside(off, hsize, n) || !inside(off + hsize, psize, n))
            return 0;
        if (csize > psize)
            return 0;
        if (u16(e) == ENTRY_KIND_ELF && !(flags & ENTRY_FLAG_COMPRESSED) &&
            !elf_ok(e + hsize, psize))
            return 0;
        off += hsize + psize;
    }
    return 1;
}

static int fatbin_ok(const unsigned char *p, size_t n)
{
    size_t off = 0;
    if (n < FATBIN_HEADER)
        return 0;
    while (off < n) {
        const unsigned char *h = p + off;
        if (n - off < FATBIN_HEADER || u32(h) != FATBIN_MAGIC)
            return 0;
        uint16_t hsize = u16(h + 6);
        uint64_t fat = u64(h + 8);
        if (hsize < FATBIN_HEADER || !inside(off, hsize, n) || !inside(off + hsize, fat, n))
            return 0;
        if (!entries_ok(h + hsize, fat))
            return 0;
        off += hsize + fat;
    }
    return 1;
}

int image_check(const void *image, size_t n)
{
    const unsigned char *p = image;
    if (n >= 4 && u32(p) == FATBIN_WRAPPER_MAGIC)
        return IMAGE_WRAPPER;
    if (n >= 4 && u32(p) == FATBIN_MAGIC)
        return fatbin_ok(p, n) ? IMAGE_OK : IMAGE_BAD;
    if (n >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0)
        return elf_ok(p, n) ? IMAGE_OK : IMAGE_BAD;
    /* Anything else is read as PTX text, up to its NUL. */
    return memchr(p, '\0', n) ? IMAGE_OK : IMAGE_BAD;
}

/* An ar archive ("!<arch>\n", then members of a 60-byte header whose
 * size field is ten decimal digits, each padded to an even offset): every
 * member inside the buffer, ELF members checked as such. */
#define AR_MAGIC "!<arch>\n"
#define AR_HEADER 60

static int ar_ok(const unsigned char *p, size_t n)
{
    size_t off = sizeof AR_MAGIC - 1;
    while (off < n) {
        char digits[11];
        char *end;
        if (n - off < AR_HEADER || memcmp(p + off + 58, "`\n", 2) != 0)
            return 0;
        memcpy(digits, p + off + 48, 10);
        digits[10] = '\0';
        unsigned long long size = strtoull(digits, &end, 10);
        if (end == digits || !inside(off + AR_HEADER, size, n))
            return 0;
        const unsigned char *member = p + off + AR_HEADER;
        if (size >= SELFMAG && memcmp(member, ELFMAG, SELFMAG) == 0 && !elf_ok(member, size))
            return 0;
        off += AR_HEADER + size + (size & 1);
    }
    return 1;
}

int image_check_sized(const void *image, size_t n)
{
    const unsigned char *p = image;
    if (n >= sizeof AR_MAGIC - 1 && memcmp(p, AR_MAGIC, sizeof AR_MAGIC - 1) == 0)
        return ar_ok(p, n) ? IMAGE_OK : IMAGE_BAD;
    if ((n >= 4 && (u32(p) == FATBIN_WRAPPER_MAGIC || u32(p) == FATBIN_MAGIC)) ||
        (n >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0))
        return image_check(p, n);
    return IMAGE_OK;
}

void *image_copy(const void *image, size_t n)
{
    unsigned char *copy = malloc(n + IMAGE_ZERO_TAIL);
    if (copy) {
        memcpy(copy, image, n);
        memset(copy + n, 0, IMAGE_ZERO_TAIL);
    }
    return copy;
}

int image_acceptable(const void *p, size_t n)
{
    int why = image_check(p, n);
    if (why == IMAGE_WRAPPER)
        rgpu_warn("refusing a fatbin wrapper as a module image: its data pointer would be "
                  "followed in the session (send the container)");
    else if (why != IMAGE_OK)
        rgpu_warn("refusing a module image of %zu bytes whose headers reach beyond it", n);
    return why == IMAGE_OK;
}
