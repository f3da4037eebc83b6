/* Reading CUDA module images within their bytes (rgpu_fatbin.h).
 *
 * Each reader checks, before it reads, that what it reads lies inside the
 * bytes it was given; offsets and sizes from the image are compared with
 * rgpu_inside(), which cannot overflow.  The layouts are in the header. */
#include "rgpu_fatbin.h"

#include <limits.h>
#include <lz4.h>
#include <stdlib.h>
#include <zstd.h>

/* ---- fatbin --------------------------------------------------------------------- */

size_t rgpu_fatbin_size(const void *p)
{
    const unsigned char *h = p;
    uint64_t header = rgpu_get16(h + 6), entries = rgpu_get64(h + 8);
    if (rgpu_get32(h) != RGPU_FATBIN_MAGIC || entries > SIZE_MAX - header)
        return 0;
    return (size_t)(header + entries);
}

int rgpu_fatbin_container(const unsigned char *p, size_t n, size_t off,
                          struct rgpu_fatbin_container *c)
{
    memset(c, 0, sizeof *c);
    if (off > n || n - off < RGPU_FATBIN_HEADER || rgpu_get32(p + off) != RGPU_FATBIN_MAGIC)
        return RGPU_FATBIN_NOT_CONTAINER;
    uint16_t header = rgpu_get16(p + off + 6);
    c->size = rgpu_get64(p + off + 8);
    if (header < RGPU_FATBIN_HEADER || !rgpu_inside(off + header, c->size, n))
        return RGPU_FATBIN_BEYOND;
    c->entries = p + off + header;
    c->end = off + header + c->size;
    return RGPU_FATBIN_OK;
}

int rgpu_fatbin_next_entry(const struct rgpu_fatbin_container *c, uint64_t *off,
                           struct rgpu_fatbin_entry *e)
{
    uint64_t at = *off, n = c->size;
    memset(e, 0, sizeof *e);
    if (at > n || n - at < RGPU_FATBIN_ENTRY_HEADER)
        return 0;
    const unsigned char *h = c->entries + at;
    e->kind = rgpu_get16(h);
    e->header_size = rgpu_get32(h + 4);
    e->payload_size = rgpu_get64(h + 8);
    e->compressed_size = rgpu_get32(h + 16);
    e->arch = rgpu_get32(h + 28);
    e->name_off = rgpu_get32(h + 32);
    e->name_len = rgpu_get32(h + 36);
    e->flags = rgpu_get64(h + 40);
    e->plain_size = rgpu_get64(h + 56);
    if (e->header_size < RGPU_FATBIN_ENTRY_HEADER || !rgpu_inside(at, e->header_size, n) ||
        !rgpu_inside(at + e->header_size, e->payload_size, n))
        return -1;
    e->payload = h + e->header_size;
    *off = at + e->header_size + e->payload_size;
    return 1;
}

int rgpu_fatbin_compressed(const struct rgpu_fatbin_entry *e)
{
    return (e->flags & (RGPU_FATBIN_LZ4 | RGPU_FATBIN_ZSTD)) != 0;
}

/* The bytes the codec of e wrote into out (dsize of room). */
static uint64_t inflate(const struct rgpu_fatbin_entry *e, unsigned char *out, uint64_t dsize)
{
    if (e->flags & RGPU_FATBIN_LZ4) {
        int r = LZ4_decompress_safe((const char *)e->payload, (char *)out,
                                    (int)e->compressed_size, (int)dsize);
        return r < 0 ? 0 : (uint64_t)r;
    }
    size_t r = ZSTD_decompress(out, dsize, e->payload, e->compressed_size);
    return ZSTD_isError(r) ? 0 : r;
}

int rgpu_fatbin_decompress(const struct rgpu_fatbin_entry *e, uint64_t max, unsigned char **out)
{
    uint64_t csize = e->compressed_size, dsize = e->plain_size;
    *out = NULL;
    if (csize > e->payload_size)
        return RGPU_FATBIN_CUT;
    if ((e->flags & RGPU_FATBIN_LZ4) && (e->flags & RGPU_FATBIN_ZSTD))
        return RGPU_FATBIN_TWO_CODECS;
    /* LZ4 counts in int. */
    if (dsize == 0 || dsize > max || dsize > INT_MAX || csize == 0 || csize > INT_MAX)
        return RGPU_FATBIN_SIZES;
    unsigned char *plain = malloc(dsize);
    if (!plain)
        return RGPU_FATBIN_NOMEM;
    if (inflate(e, plain, dsize) != dsize) {
        free(plain);
        return RGPU_FATBIN_CORRUPT;
    }
    *out = plain;
    return RGPU_FATBIN_OK;
}

/* ---- ELF ------------------------------------------------------------------------ */

static int ident_ok(const Elf64_Ehdr *eh)
{
    return memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
           eh->e_ident[EI_DATA] == ELFDATA2LSB && eh->e_ehsize >= sizeof *eh;
}

static int header_status(const Elf64_Ehdr *eh, size_t n)
{
    if (!ident_ok(eh))
        return RGPU_ELF_IDENT;
    /* Counts kept in section 0 (no sections but a table, PN_XNUM,
     * SHN_XINDEX): cubins never need them, and they would be read from
     * a place checked as a section, not as a count. */
    if ((eh->e_shnum == 0 && eh->e_shoff != 0) || eh->e_phnum == PN_XNUM ||
        eh->e_shnum >= SHN_LORESERVE)
        return RGPU_ELF_EXTENDED;
    /* Entries of exactly the structure's size: a reader that steps by
     * sizeof reads the headers checked. */
    if (eh->e_shnum && eh->e_shentsize != sizeof(Elf64_Shdr))
        return RGPU_ELF_SHENTSIZE;
    if (eh->e_phnum && eh->e_phentsize != sizeof(Elf64_Phdr))
        return RGPU_ELF_PHENTSIZE;
    if (!rgpu_inside(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), n))
        return RGPU_ELF_SHTABLE;
    if (!rgpu_inside(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), n))
        return RGPU_ELF_PHTABLE;
    if (eh->e_shnum && eh->e_shstrndx >= eh->e_shnum)
        return RGPU_ELF_SHSTRNDX;
    return RGPU_ELF_OK;
}

int rgpu_elf_open(struct rgpu_elf *e, const void *p, size_t n)
{
    memset(e, 0, sizeof *e);
    e->p = p;
    e->n = n;
    if (n < sizeof e->eh)
        return RGPU_ELF_SHORT;
    memcpy(&e->eh, p, sizeof e->eh);
    int status = header_status(&e->eh, n);
    if (status != RGPU_ELF_OK)
        return status;
    size_t table = (size_t)e->eh.e_shnum * sizeof *e->sh;
    if (!(e->sh = malloc(table + 1)))
        return RGPU_ELF_NOMEM;
    memcpy(e->sh, e->p + e->eh.e_shoff, table);
    return RGPU_ELF_OK;
}

void rgpu_elf_close(struct rgpu_elf *e)
{
    free(e->sh);
    e->sh = NULL;
}

Elf64_Phdr rgpu_elf_segment(const struct rgpu_elf *e, unsigned i)
{
    Elf64_Phdr ph = { 0 };
    if (i < e->eh.e_phnum)
        memcpy(&ph, e->p + e->eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
    return ph;
}

int rgpu_elf_section_inside(const struct rgpu_elf *e, unsigned i)
{
    if (!e->sh || i >= e->eh.e_shnum)
        return 0;
    const Elf64_Shdr *s = &e->sh[i];
    return rgpu_inside(s->sh_offset, s->sh_type == SHT_NOBITS ? 0 : s->sh_size, e->n);
}

const unsigned char *rgpu_elf_section_bytes(const struct rgpu_elf *e, unsigned i)
{
    return rgpu_elf_section_inside(e, i) ? e->p + e->sh[i].sh_offset : NULL;
}

int rgpu_elf_entry(const struct rgpu_elf *e, unsigned i, uint64_t k, void *out, size_t size)
{
    const unsigned char *bytes = rgpu_elf_section_bytes(e, i);
    if (!bytes || e->sh[i].sh_type == SHT_NOBITS || size == 0 ||
        k >= e->sh[i].sh_size / size)
        return -1;
    memcpy(out, bytes + k * size, size);
    return 0;
}

int rgpu_elf_relocation(const struct rgpu_elf *e, unsigned i, uint64_t k, Elf64_Rela *r)
{
    memset(r, 0, sizeof *r);
    if (i >= e->eh.e_shnum || !e->sh)
        return -1;
    /* An Elf64_Rel is an Elf64_Rela without its last field. */
    size_t size = e->sh[i].sh_type == SHT_RELA ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
    return rgpu_elf_entry(e, i, k, r, size);
}

const char *rgpu_elf_string(const struct rgpu_elf *e, unsigned i, uint64_t off)
{
    const unsigned char *bytes = rgpu_elf_section_bytes(e, i);
    uint64_t n = bytes && e->sh[i].sh_type != SHT_NOBITS ? e->sh[i].sh_size : 0;
    if (off >= n || !memchr(bytes + off, '\0', n - off))
        return NULL;
    return (const char *)bytes + off;
}
