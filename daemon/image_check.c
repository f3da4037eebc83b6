/* Module images from the client, checked before a CUDA library sees them.
 *
 * cuModuleLoadData, cuLibraryLoadData and cudaLibraryLoadData take an image
 * without a size: the library finds the extent from the image's own
 * headers, and then follows the offsets, sizes and indices inside it.  A
 * lying header would make it read past the frame into session memory (a
 * module global initialised from the session's heap hands that heap back
 * to the client), and a fatbin wrapper carries a pointer the library
 * follows.  So the image must be one whose every header, table entry and
 * index lies inside its buffer:
 *
 *   - fatbin containers (magic 0xBA55ED50), back to back, filling the
 *     buffer; in each, entries whose header, name and payload lie inside
 *     it; a compressed payload (LZ4 or zstd) must decompress, with the safe
 *     decoders, to exactly the size its header declares (at most
 *     IMAGE_ENTRY_MAX), and an ELF entry is checked as a cubin, compressed
 *     or not;
 *   - a cubin (ELF64): the checks of cubin_ok() below;
 *   - PTX: text with its terminating NUL inside the buffer;
 *   - a fatbin wrapper (magic 0x466243B1): refused, always (the client
 *     unwraps it and sends the container).
 *
 * The checked image is then handed over as a copy followed by zero bytes,
 * so that a library that walks on to "the next container" finds none.
 *
 * cuLinkAddData gives a size: there the formats with headers (fatbin,
 * ELF, ar archives of objects) are checked the same way, and the rest
 * (PTX, LTO-IR) is passed by its size, the zero bytes ending a string.
 *
 * Every refusal says why, in the caller's buffer: the session logs it. */
#include "image_check.h"
#include "rgpu_log.h"

#include <elf.h>
#include <limits.h>
#include <lz4.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define FATBIN_WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xba55ed50u
#define FATBIN_HEADER 16            /* magic, version, header_size, fat_size */
#define ENTRY_HEADER_MIN 64         /* ELF entries 64 bytes, PTX 80 */
#define ENTRY_KIND_PTX 1
#define ENTRY_KIND_ELF 2
#define ENTRY_FLAG_LZ4 0x2000u      /* a raw LZ4 block */
#define ENTRY_FLAG_ZSTD 0x8000u     /* zstd frames */

/* NVIDIA's section types and the one flag of theirs read here. */
#define SHT_CUDA_INFO 0x70000000u   /* .nv.info*: a list of attributes */
#define EIFMT_SVAL 4                /* an attribute with a u16 length */
/* Relocations: the 32-bit data types (R_CUDA_32, R_CUDA_G32) write 4
 * bytes; other data relocations at most a 64-bit address; a relocation in
 * code patches bit fields of one 16-byte instruction. */
#define R_CUDA_32 1
#define R_CUDA_G32 3
#define INSTRUCTION_BYTES 16

/* The caller's buffer for why an image was refused. */
struct why {
    char *buf;
    size_t len;
};

/* Records why (the first reason only: it names the innermost cause) and
 * returns 0, so that a check can end with `return refuse(...)`. */
static int refuse(struct why *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(struct why *w, const char *fmt, ...)
{
    if (w->buf && w->len && !w->buf[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->buf, w->len, fmt, ap);
        va_end(ap);
    }
    return 0;
}

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
static int inside(uint64_t off, uint64_t len, uint64_t n)
{
    return off <= n && len <= n - off;
}

/* ---- ELF ------------------------------------------------------------------------ */

/* A cubin being checked: its bytes and headers, read once. */
struct elf {
    const unsigned char *p;
    size_t n;
    Elf64_Ehdr eh;
    const Elf64_Shdr *sh;       /* a copy of the section headers (aligned) */
};

static unsigned long long ull(uint64_t v)
{
    return (unsigned long long)v;
}

static int header_ok(struct elf *e, struct why *w)
{
    const Elf64_Ehdr *eh = &e->eh;
    if (e->n < sizeof *eh)
        return refuse(w, "an ELF image of %zu bytes, shorter than its header", e->n);
    memcpy(&e->eh, e->p, sizeof e->eh);
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_ehsize < sizeof *eh)
        return refuse(w, "not a 64-bit little-endian ELF header");
    /* Counts kept in section 0 (no sections but a table, PN_XNUM,
     * SHN_XINDEX): cubins never need them, and a library would read them
     * from a place checked as a section, not as a count. */
    if ((eh->e_shnum == 0 && eh->e_shoff != 0) || eh->e_phnum == PN_XNUM ||
        eh->e_shnum >= SHN_LORESERVE)
        return refuse(w, "ELF counts kept in section 0 (e_shnum %u, e_phnum %u)", eh->e_shnum,
                      eh->e_phnum);
    /* Entries of exactly the structure's size: a library that steps by
     * sizeof must read the headers checked here. */
    if (eh->e_shnum && eh->e_shentsize != sizeof(Elf64_Shdr))
        return refuse(w, "section header entries of %u bytes", eh->e_shentsize);
    if (eh->e_phnum && eh->e_phentsize != sizeof(Elf64_Phdr))
        return refuse(w, "program header entries of %u bytes", eh->e_phentsize);
    if (!inside(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), e->n))
        return refuse(w, "the section header table (offset %llu, %u entries) reaches beyond "
                      "the %zu-byte image", ull(eh->e_shoff), eh->e_shnum, e->n);
    if (!inside(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), e->n))
        return refuse(w, "the program header table (offset %llu, %u entries) reaches beyond "
                      "the %zu-byte image", ull(eh->e_phoff), eh->e_phnum, e->n);
    if (eh->e_shnum && eh->e_shstrndx >= eh->e_shnum)
        return refuse(w, "the section name table is section %u of %u", eh->e_shstrndx,
                      eh->e_shnum);
    return 1;
}

static int segments_ok(const struct elf *e, struct why *w)
{
    for (unsigned i = 0; i < e->eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, e->p + e->eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if (!inside(ph.p_offset, ph.p_filesz, e->n))
            return refuse(w, "segment %u's bytes [%llu, +%llu) reach beyond the %zu-byte image",
                          i, ull(ph.p_offset), ull(ph.p_filesz), e->n);
        if (ph.p_filesz > ph.p_memsz)
            return refuse(w, "segment %u holds %llu bytes in a memory size of %llu", i,
                          ull(ph.p_filesz), ull(ph.p_memsz));
    }
    return 1;
}

/* Section k's bytes, checked by sections_ok. */
static const unsigned char *bytes_of(const struct elf *e, unsigned k)
{
    return e->p + e->sh[k].sh_offset;
}

/* A string table: non-empty and ending in NUL, so that every offset
 * inside it starts a string that ends inside it. */
static int strtab_ok(const struct elf *e, unsigned k, struct why *w)
{
    const Elf64_Shdr *s = &e->sh[k];
    if (s->sh_type != SHT_STRTAB)
        return refuse(w, "section %u is used as a string table but has type %u", k,
                      s->sh_type);
    if (s->sh_size == 0 || bytes_of(e, k)[s->sh_size - 1] != '\0')
        return refuse(w, "string table %u does not end in NUL", k);
    return 1;
}

/* Every section header, whatever its type: its bytes inside the image (a
 * section without file bytes, SHT_NOBITS, still has its offset inside),
 * its link a section, its entries whole.  Section 0 may not carry the
 * extended counts (header_ok refuses the forms that use them). */
static int section_ok(const struct elf *e, unsigned i, struct why *w)
{
    const Elf64_Shdr *s = &e->sh[i];
    uint64_t bytes = s->sh_type == SHT_NOBITS ? 0 : s->sh_size;
    if (!inside(s->sh_offset, bytes, e->n))
        return refuse(w, "section %u (type %u): bytes [%llu, +%llu) reach beyond the %zu-byte "
                      "image", i, s->sh_type, ull(s->sh_offset), ull(s->sh_size), e->n);
    if (s->sh_link >= e->eh.e_shnum)
        return refuse(w, "section %u links to section %u of %u", i, s->sh_link,
                      e->eh.e_shnum);
    if (s->sh_type != SHT_NOBITS && s->sh_entsize && s->sh_size % s->sh_entsize)
        return refuse(w, "section %u: %llu bytes are no whole number of %llu-byte entries", i,
                      ull(s->sh_size), ull(s->sh_entsize));
    if (i == 0 && (s->sh_size || s->sh_link || s->sh_info))
        return refuse(w, "section 0 carries counts or links");
    return 1;
}

static int names_ok(const struct elf *e, struct why *w)
{
    if (!e->eh.e_shnum)
        return 1;
    unsigned k = e->eh.e_shstrndx;
    if (!strtab_ok(e, k, w))
        return 0;
    for (unsigned i = 0; i < e->eh.e_shnum; i++)
        if (e->sh[i].sh_name >= e->sh[k].sh_size)
            return refuse(w, "section %u's name lies beyond the name table", i);
    return 1;
}

/* A table of entries of exactly size bytes (symbols, relocations). */
static int table_ok(const struct elf *e, unsigned i, uint64_t size, struct why *w)
{
    if (e->sh[i].sh_entsize != size)
        return refuse(w, "section %u (type %u) has entries of %llu bytes, not %llu", i,
                      e->sh[i].sh_type, ull(e->sh[i].sh_entsize), ull(size));
    return 1;     /* whole entries: section_ok */
}

/* A symbol table: names inside its string table; each symbol defined in
 * a section lies inside that section (a global's initialiser is read from
 * there); no extended or processor-specific section indices. */
static int symbols_ok(const struct elf *e, unsigned i, struct why *w)
{
    const Elf64_Shdr *s = &e->sh[i];
    uint64_t nsyms = s->sh_size / sizeof(Elf64_Sym);
    if (!table_ok(e, i, sizeof(Elf64_Sym), w) || !strtab_ok(e, s->sh_link, w))
        return 0;
    if (s->sh_info > nsyms)
        return refuse(w, "symbol table %u's first global is %u of %llu", i, s->sh_info,
                      ull(nsyms));
    for (uint64_t k = 0; k < nsyms; k++) {
        Elf64_Sym sym;
        memcpy(&sym, bytes_of(e, i) + k * sizeof sym, sizeof sym);
        if (sym.st_name >= e->sh[s->sh_link].sh_size)
            return refuse(w, "symbol %llu's name lies beyond its string table", ull(k));
        if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS || sym.st_shndx == SHN_COMMON)
            continue;
        if (sym.st_shndx >= e->eh.e_shnum)
            return refuse(w, "symbol %llu is in section %u of %u", ull(k), sym.st_shndx,
                          e->eh.e_shnum);
        uint64_t room = e->sh[sym.st_shndx].sh_size;
        if (!inside(sym.st_value, sym.st_size, room))
            return refuse(w, "symbol %llu: [%llu, +%llu) reaches beyond its section %u of "
                          "%llu bytes", ull(k), ull(sym.st_value), ull(sym.st_size),
                          sym.st_shndx, ull(room));
    }
    return 1;
}

/* The bytes a relocation of this type writes in the target section. */
static uint64_t reloc_width(const Elf64_Shdr *target, uint32_t type)
{
    if (target->sh_flags & SHF_EXECINSTR)
        return INSTRUCTION_BYTES;
    return type == R_CUDA_32 || type == R_CUDA_G32 ? 4 : 8;
}

/* A relocation table: it applies to a section (sh_info) with the symbols
 * of a symbol table (sh_link); every entry names one of those symbols and
 * writes inside its target section. */
static int relocations_ok(const struct elf *e, unsigned i, struct why *w)
{
    const Elf64_Shdr *s = &e->sh[i];
    uint64_t size = s->sh_type == SHT_RELA ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
    if (!table_ok(e, i, size, w))
        return 0;
    const Elf64_Shdr *syms = &e->sh[s->sh_link];
    if (syms->sh_type != SHT_SYMTAB && syms->sh_type != SHT_DYNSYM)
        return refuse(w, "relocations %u name symbols of section %u, not a symbol table", i,
                      s->sh_link);
    if (s->sh_info == 0 || s->sh_info >= e->eh.e_shnum)
        return refuse(w, "relocations %u apply to section %u of %u", i, s->sh_info,
                      e->eh.e_shnum);
    const Elf64_Shdr *target = &e->sh[s->sh_info];
    uint64_t nsyms = syms->sh_size / sizeof(Elf64_Sym);
    for (uint64_t k = 0; k < s->sh_size / size; k++) {
        Elf64_Rel r;    /* the first two fields of either form */
        memcpy(&r, bytes_of(e, i) + k * size, sizeof r);
        if (ELF64_R_SYM(r.r_info) >= nsyms)
            return refuse(w, "relocation %llu of section %u names symbol %llu of %llu", ull(k),
                          i, ull(ELF64_R_SYM(r.r_info)), ull(nsyms));
        uint32_t type = ELF64_R_TYPE(r.r_info);
        if (!inside(r.r_offset, reloc_width(target, type), target->sh_size))
            return refuse(w, "relocation %llu (type %u) of section %u writes at %llu of a "
                          "%llu-byte section", ull(k), type, i, ull(r.r_offset),
                          ull(target->sh_size));
    }
    return 1;
}

/* .nv.info: attributes {u8 format, u8 attribute, u16 value} or, in format
 * EIFMT_SVAL, {.., u16 length, length bytes}; the list must end exactly at
 * the section's end, so that a walk of it stays inside. */
static int attributes_ok(const struct elf *e, unsigned i, struct why *w)
{
    const unsigned char *p = bytes_of(e, i);
    uint64_t off = 0, n = e->sh[i].sh_size;
    while (n - off >= 4) {
        off += 4 + (p[off] == EIFMT_SVAL ? u16(p + off + 2) : 0);
        if (off > n)
            break;
    }
    if (off != n)
        return refuse(w, "the attribute list of section %u does not end at the section's end",
                      i);
    return 1;
}

/* The checks that depend on a section's type. */
static int typed_ok(const struct elf *e, unsigned i, struct why *w)
{
    switch (e->sh[i].sh_type) {
    case SHT_STRTAB:
        return strtab_ok(e, i, w);
    case SHT_SYMTAB:
    case SHT_DYNSYM:
        return symbols_ok(e, i, w);
    case SHT_REL:
    case SHT_RELA:
        return relocations_ok(e, i, w);
    case SHT_SYMTAB_SHNDX:
    case SHT_GROUP:
        return refuse(w, "section %u has type %u, which cubins do not use", i,
                      e->sh[i].sh_type);
    case SHT_CUDA_INFO:
        return attributes_ok(e, i, w);
    default:
        /* sh_info of the other types is NVIDIA's own: a section's index, a
         * symbol's, flags, or all ones for none. */
        return 1;
    }
}

static int sections_ok(const struct elf *e, struct why *w)
{
    unsigned n = e->eh.e_shnum;
    for (unsigned i = 0; i < n; i++)
        if (!section_ok(e, i, w))
            return 0;
    if (!names_ok(e, w))
        return 0;
    for (unsigned i = 0; i < n; i++)
        if (!typed_ok(e, i, w))
            return 0;
    return 1;
}

/* A cubin (or any ELF64 object): header, program headers, every section
 * header whatever its type, the string, symbol, relocation and attribute
 * tables inside their sections, every index naming what exists. */
static int cubin_ok(const unsigned char *p, size_t n, struct why *w)
{
    struct elf e = { .p = p, .n = n };
    if (!header_ok(&e, w) || !segments_ok(&e, w))
        return 0;
    Elf64_Shdr *sh = malloc((size_t)e.eh.e_shnum * sizeof *sh + 1);
    if (!sh)
        return refuse(w, "out of memory for %u section headers", e.eh.e_shnum);
    memcpy(sh, p + e.eh.e_shoff, (size_t)e.eh.e_shnum * sizeof *sh);
    e.sh = sh;
    int ok = sections_ok(&e, w);
    free(sh);
    return ok;
}

/* ---- fatbin --------------------------------------------------------------------- */

/* A compressed entry's payload, decompressed into a buffer of its declared
 * size, which it must fill exactly: a library decompresses it into a
 * buffer of that size, perhaps with a decoder that trusts the stream.
 * NULL (after saying why) when it does not. */
static unsigned char *decompressed(const unsigned char *src, uint64_t csize, uint64_t flags,
                                   uint64_t dsize, struct why *w)
{
    if ((flags & ENTRY_FLAG_LZ4) && (flags & ENTRY_FLAG_ZSTD)) {
        refuse(w, "a fatbin entry compressed with two codecs");
        return NULL;
    }
    if (dsize == 0 || dsize > IMAGE_ENTRY_MAX || csize == 0 || csize > INT_MAX) {
        refuse(w, "a compressed fatbin entry of %llu bytes declaring %llu (at most %llu)",
               ull(csize), ull(dsize), ull(IMAGE_ENTRY_MAX));
        return NULL;
    }
    unsigned char *out = malloc(dsize);
    if (!out) {
        refuse(w, "out of memory for a fatbin entry of %llu bytes", ull(dsize));
        return NULL;
    }
    uint64_t got = 0;
    if (flags & ENTRY_FLAG_LZ4) {
        int r = LZ4_decompress_safe((const char *)src, (char *)out, (int)csize, (int)dsize);
        got = r < 0 ? 0 : (uint64_t)r;
    } else {
        size_t r = ZSTD_decompress(out, dsize, src, csize);
        got = ZSTD_isError(r) ? 0 : r;
    }
    if (got != dsize) {
        refuse(w, "a %s fatbin entry of %llu bytes does not decompress to the %llu it "
               "declares", flags & ENTRY_FLAG_LZ4 ? "LZ4" : "zstd", ull(csize), ull(dsize));
        free(out);
        return NULL;
    }
    return out;
}

/* One entry's payload.  The loaders decompress PTX and ELF entries, and
 * load an ELF as a cubin: those are decompressed and checked here.  Other
 * kinds (LTO-IR for nvJitLink, with codecs of their own) are no module
 * code: their bytes are inside the container, which is all a loader that
 * skips them needs. */
static int payload_ok(const unsigned char *e, const unsigned char *payload, uint64_t psize,
                      struct why *w)
{
    uint64_t csize = u32(e + 16), flags = u64(e + 40), dsize = u64(e + 56);
    unsigned kind = u16(e);
    if (kind != ENTRY_KIND_ELF && kind != ENTRY_KIND_PTX)
        return 1;
    if (!(flags & (ENTRY_FLAG_LZ4 | ENTRY_FLAG_ZSTD)))
        return kind != ENTRY_KIND_ELF || cubin_ok(payload, psize, w);
    if (csize > psize)
        return refuse(w, "a fatbin entry compressed to %llu bytes in a payload of %llu",
                      ull(csize), ull(psize));
    unsigned char *plain = decompressed(payload, csize, flags, dsize, w);
    int ok = plain && (kind != ENTRY_KIND_ELF || cubin_ok(plain, dsize, w));
    free(plain);
    return ok;
}

/* One container's entries, c pointing at its first entry, n bytes of them. */
static int entries_ok(const unsigned char *c, uint64_t n, struct why *w)
{
    uint64_t off = 0;
    /* As the libraries walk them: entries while a header still fits. */
    while (n - off >= ENTRY_HEADER_MIN) {
        const unsigned char *e = c + off;
        uint64_t hsize = u32(e + 4), psize = u64(e + 8);
        uint64_t name = u32(e + 32), name_len = u32(e + 36);
        if (hsize < ENTRY_HEADER_MIN || !inside(off, hsize, n) || !inside(off + hsize, psize, n))
            return refuse(w, "a fatbin entry (header %llu, payload %llu bytes) reaches beyond "
                          "its container", ull(hsize), ull(psize));
        if (name_len && !inside(name, name_len, hsize + psize))
            return refuse(w, "a fatbin entry's name lies beyond the entry");
        if (!payload_ok(e, e + hsize, psize, w))
            return 0;
        off += hsize + psize;
    }
    return 1;
}

static int fatbin_ok(const unsigned char *p, size_t n, struct why *w)
{
    size_t off = 0;
    if (n < FATBIN_HEADER)
        return refuse(w, "a fatbin of %zu bytes, shorter than its header", n);
    while (off < n) {
        const unsigned char *h = p + off;
        if (n - off < FATBIN_HEADER || u32(h) != FATBIN_MAGIC)
            return refuse(w, "%zu bytes after a fatbin container are not another", n - off);
        uint16_t hsize = u16(h + 6);
        uint64_t fat = u64(h + 8);
        if (hsize < FATBIN_HEADER || !inside(off, hsize, n) || !inside(off + hsize, fat, n))
            return refuse(w, "a fatbin container of %llu bytes reaches beyond the %zu-byte "
                          "image", ull(fat), n);
        if (!entries_ok(h + hsize, fat, w))
            return 0;
        off += hsize + fat;
    }
    return 1;
}

int image_check(const void *image, size_t n, char *why, size_t whylen)
{
    const unsigned char *p = image;
    struct why w = { why, whylen };
    if (why && whylen)
        why[0] = '\0';
    if (n >= 4 && u32(p) == FATBIN_WRAPPER_MAGIC) {
        refuse(&w, "a fatbin wrapper: its data pointer would be followed in the session "
               "(send the container)");
        return IMAGE_WRAPPER;
    }
    if (n >= 4 && u32(p) == FATBIN_MAGIC)
        return fatbin_ok(p, n, &w) ? IMAGE_OK : IMAGE_BAD;
    if (n >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0)
        return cubin_ok(p, n, &w) ? IMAGE_OK : IMAGE_BAD;
    /* Anything else is read as PTX text, up to its NUL. */
    if (memchr(p, '\0', n))
        return IMAGE_OK;
    refuse(&w, "text without its terminating NUL");
    return IMAGE_BAD;
}

/* An ar archive ("!<arch>\n", then members of a 60-byte header whose
 * size field is ten decimal digits, each padded to an even offset): every
 * member inside the buffer, ELF members checked as such. */
#define AR_MAGIC "!<arch>\n"
#define AR_HEADER 60

static int ar_ok(const unsigned char *p, size_t n, struct why *w)
{
    size_t off = sizeof AR_MAGIC - 1;
    while (off < n) {
        char digits[11];
        char *end;
        if (n - off < AR_HEADER || memcmp(p + off + 58, "`\n", 2) != 0)
            return refuse(w, "an archive member header at %zu is cut short or malformed", off);
        memcpy(digits, p + off + 48, 10);
        digits[10] = '\0';
        unsigned long long size = strtoull(digits, &end, 10);
        if (end == digits || !inside(off + AR_HEADER, size, n))
            return refuse(w, "an archive member at %zu reaches beyond the %zu-byte archive",
                          off, n);
        const unsigned char *member = p + off + AR_HEADER;
        if (size >= SELFMAG && memcmp(member, ELFMAG, SELFMAG) == 0 && !cubin_ok(member, size, w))
            return 0;
        off += AR_HEADER + size + (size & 1);
    }
    return 1;
}

int image_check_sized(const void *image, size_t n, char *why, size_t whylen)
{
    const unsigned char *p = image;
    struct why w = { why, whylen };
    if (why && whylen)
        why[0] = '\0';
    if (n >= sizeof AR_MAGIC - 1 && memcmp(p, AR_MAGIC, sizeof AR_MAGIC - 1) == 0)
        return ar_ok(p, n, &w) ? IMAGE_OK : IMAGE_BAD;
    if ((n >= 4 && (u32(p) == FATBIN_WRAPPER_MAGIC || u32(p) == FATBIN_MAGIC)) ||
        (n >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0))
        return image_check(p, n, why, whylen);
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

static int acceptable(int why_status, const char *what, size_t n, const char *why)
{
    if (why_status != IMAGE_OK)
        rgpu_warn("refusing %s of %zu bytes: %s", what, n, why);
    return why_status == IMAGE_OK;
}

int image_acceptable(const void *p, size_t n)
{
    char why[256];
    return acceptable(image_check(p, n, why, sizeof why), "a module image", n, why);
}

int image_acceptable_sized(const void *p, size_t n)
{
    char why[256];
    return acceptable(image_check_sized(p, n, why, sizeof why), "a link input", n, why);
}
