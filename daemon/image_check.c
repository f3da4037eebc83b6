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
 * Every refusal says why, in the caller's buffer: the session logs it.
 * The image is read with common/rgpu_fatbin.c, which reads nothing outside
 * the bytes it is given; the rules above are this file's. */
#include "image_check.h"
#include "rgpu_fatbin.h"
#include "rgpu_log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static unsigned long long ull(uint64_t v)
{
    return (unsigned long long)v;
}

/* ---- ELF ------------------------------------------------------------------------ */

/* Whether rgpu_elf_open() found the header and its tables inside the
 * image, and if not, why. */
static int header_ok(const struct rgpu_elf *e, int status, struct why *w)
{
    const Elf64_Ehdr *eh = &e->eh;
    switch (status) {
    case RGPU_ELF_OK:
        return 1;
    case RGPU_ELF_SHORT:
        return refuse(w, "an ELF image of %zu bytes, shorter than its header", e->n);
    case RGPU_ELF_IDENT:
        return refuse(w, "not a 64-bit little-endian ELF header");
    case RGPU_ELF_EXTENDED:
        /* A library would read them from a place checked as a section,
         * not as a count. */
        return refuse(w, "ELF counts kept in section 0 (e_shnum %u, e_phnum %u)", eh->e_shnum,
                      eh->e_phnum);
    case RGPU_ELF_SHENTSIZE:
        return refuse(w, "section header entries of %u bytes", eh->e_shentsize);
    case RGPU_ELF_PHENTSIZE:
        return refuse(w, "program header entries of %u bytes", eh->e_phentsize);
    case RGPU_ELF_SHTABLE:
        return refuse(w, "the section header table (offset %llu, %u entries) reaches beyond "
                      "the %zu-byte image", ull(eh->e_shoff), eh->e_shnum, e->n);
    case RGPU_ELF_PHTABLE:
        return refuse(w, "the program header table (offset %llu, %u entries) reaches beyond "
                      "the %zu-byte image", ull(eh->e_phoff), eh->e_phnum, e->n);
    case RGPU_ELF_SHSTRNDX:
        return refuse(w, "the section name table is section %u of %u", eh->e_shstrndx,
                      eh->e_shnum);
    default:
        return refuse(w, "out of memory for %u section headers", eh->e_shnum);
    }
}

static int segments_ok(const struct rgpu_elf *e, struct why *w)
{
    for (unsigned i = 0; i < e->eh.e_phnum; i++) {
        Elf64_Phdr ph = rgpu_elf_segment(e, i);
        if (!rgpu_inside(ph.p_offset, ph.p_filesz, e->n))
            return refuse(w, "segment %u's bytes [%llu, +%llu) reach beyond the %zu-byte image",
                          i, ull(ph.p_offset), ull(ph.p_filesz), e->n);
        if (ph.p_filesz > ph.p_memsz)
            return refuse(w, "segment %u holds %llu bytes in a memory size of %llu", i,
                          ull(ph.p_filesz), ull(ph.p_memsz));
    }
    return 1;
}

/* A string table: non-empty and ending in NUL, so that every offset
 * inside it starts a string that ends inside it. */
static int strtab_ok(const struct rgpu_elf *e, unsigned k, struct why *w)
{
    const Elf64_Shdr *s = &e->sh[k];
    if (s->sh_type != SHT_STRTAB)
        return refuse(w, "section %u is used as a string table but has type %u", k,
                      s->sh_type);
    if (s->sh_size == 0 || rgpu_elf_section_bytes(e, k)[s->sh_size - 1] != '\0')
        return refuse(w, "string table %u does not end in NUL", k);
    return 1;
}

/* Every section header, whatever its type: its bytes inside the image (a
 * section without file bytes, SHT_NOBITS, still has its offset inside),
 * its link a section, its entries whole.  Section 0 may not carry the
 * extended counts (rgpu_elf_open refuses the forms that use them). */
static int section_ok(const struct rgpu_elf *e, unsigned i, struct why *w)
{
    const Elf64_Shdr *s = &e->sh[i];
    if (!rgpu_elf_section_inside(e, i))
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

static int names_ok(const struct rgpu_elf *e, struct why *w)
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
static int table_ok(const struct rgpu_elf *e, unsigned i, uint64_t size, struct why *w)
{
    if (e->sh[i].sh_entsize != size)
        return refuse(w, "section %u (type %u) has entries of %llu bytes, not %llu", i,
                      e->sh[i].sh_type, ull(e->sh[i].sh_entsize), ull(size));
    return 1;     /* whole entries: section_ok */
}

/* A symbol table: names inside its string table; each symbol defined in
 * a section lies inside that section (a global's initialiser is read from
 * there); no extended or processor-specific section indices. */
static int symbols_ok(const struct rgpu_elf *e, unsigned i, struct why *w)
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
        if (rgpu_elf_entry(e, i, k, &sym, sizeof sym) < 0)
            return refuse(w, "symbol %llu lies beyond its table", ull(k));
        if (sym.st_name >= e->sh[s->sh_link].sh_size)
            return refuse(w, "symbol %llu's name lies beyond its string table", ull(k));
        if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS || sym.st_shndx == SHN_COMMON)
            continue;
        if (sym.st_shndx >= e->eh.e_shnum)
            return refuse(w, "symbol %llu is in section %u of %u", ull(k), sym.st_shndx,
                          e->eh.e_shnum);
        uint64_t room = e->sh[sym.st_shndx].sh_size;
        if (!rgpu_inside(sym.st_value, sym.st_size, room))
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
static int relocations_ok(const struct rgpu_elf *e, unsigned i, struct why *w)
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
        Elf64_Rela r;
        if (rgpu_elf_relocation(e, i, k, &r) < 0)
            return refuse(w, "relocation %llu lies beyond its section %u", ull(k), i);
        if (ELF64_R_SYM(r.r_info) >= nsyms)
            return refuse(w, "relocation %llu of section %u names symbol %llu of %llu", ull(k),
                          i, ull(ELF64_R_SYM(r.r_info)), ull(nsyms));
        uint32_t type = ELF64_R_TYPE(r.r_info);
        if (!rgpu_inside(r.r_offset, reloc_width(target, type), target->sh_size))
            return refuse(w, "relocation %llu (type %u) of section %u writes at %llu of a "
                          "%llu-byte section", ull(k), type, i, ull(r.r_offset),
                          ull(target->sh_size));
    }
    return 1;
}

/* .nv.info: attributes {u8 format, u8 attribute, u16 value} or, in format
 * EIFMT_SVAL, {.., u16 length, length bytes}; the list must end exactly at
 * the section's end, so that a walk of it stays inside. */
static int attributes_ok(const struct rgpu_elf *e, unsigned i, struct why *w)
{
    const unsigned char *p = rgpu_elf_section_bytes(e, i);
    uint64_t off = 0, n = e->sh[i].sh_size;
    while (n - off >= 4) {
        off += 4 + (p[off] == EIFMT_SVAL ? rgpu_get16(p + off + 2) : 0);
        if (off > n)
            break;
    }
    if (off != n)
        return refuse(w, "the attribute list of section %u does not end at the section's end",
                      i);
    return 1;
}

/* The checks that depend on a section's type. */
static int typed_ok(const struct rgpu_elf *e, unsigned i, struct why *w)
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

static int sections_ok(const struct rgpu_elf *e, struct why *w)
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
    struct rgpu_elf e;
    int ok = header_ok(&e, rgpu_elf_open(&e, p, n), w) && segments_ok(&e, w) &&
             sections_ok(&e, w);
    rgpu_elf_close(&e);
    return ok;
}

/* ---- fatbin --------------------------------------------------------------------- */

/* A compressed entry's payload, decompressed into a buffer of its declared
 * size, which it must fill exactly: a library decompresses it into a
 * buffer of that size, perhaps with a decoder that trusts the stream.
 * NULL (after saying why) when it does not. */
static unsigned char *decompressed(const struct rgpu_fatbin_entry *e, struct why *w)
{
    unsigned char *plain;
    switch (rgpu_fatbin_decompress(e, IMAGE_ENTRY_MAX, &plain)) {
    case RGPU_FATBIN_OK:
        return plain;
    case RGPU_FATBIN_CUT:
        refuse(w, "a fatbin entry compressed to %llu bytes in a payload of %llu",
               ull(e->compressed_size), ull(e->payload_size));
        return NULL;
    case RGPU_FATBIN_TWO_CODECS:
        refuse(w, "a fatbin entry compressed with two codecs");
        return NULL;
    case RGPU_FATBIN_SIZES:
        refuse(w, "a compressed fatbin entry of %llu bytes declaring %llu (at most %llu)",
               ull(e->compressed_size), ull(e->plain_size), ull(IMAGE_ENTRY_MAX));
        return NULL;
    case RGPU_FATBIN_NOMEM:
        refuse(w, "out of memory for a fatbin entry of %llu bytes", ull(e->plain_size));
        return NULL;
    default:
        refuse(w, "a %s fatbin entry of %llu bytes does not decompress to the %llu it "
               "declares", e->flags & RGPU_FATBIN_LZ4 ? "LZ4" : "zstd",
               ull(e->compressed_size), ull(e->plain_size));
        return NULL;
    }
}

/* One entry's payload.  The loaders decompress PTX and ELF entries, and
 * load an ELF as a cubin: those are decompressed and checked here.  Other
 * kinds (LTO-IR for nvJitLink, with codecs of their own) are no module
 * code: their bytes are inside the container, which is all a loader that
 * skips them needs. */
static int payload_ok(const struct rgpu_fatbin_entry *e, struct why *w)
{
    if (e->kind != RGPU_FATBIN_ELF && e->kind != RGPU_FATBIN_PTX)
        return 1;
    if (!rgpu_fatbin_compressed(e))
        return e->kind != RGPU_FATBIN_ELF || cubin_ok(e->payload, e->payload_size, w);
    unsigned char *plain = decompressed(e, w);
    int ok = plain && (e->kind != RGPU_FATBIN_ELF || cubin_ok(plain, e->plain_size, w));
    free(plain);
    return ok;
}

/* One container's entries: each inside it, its name inside the entry. */
static int entries_ok(const struct rgpu_fatbin_container *c, struct why *w)
{
    struct rgpu_fatbin_entry e;
    uint64_t off = 0;
    int more;
    while ((more = rgpu_fatbin_next_entry(c, &off, &e)) > 0) {
        if (e.name_len && !rgpu_inside(e.name_off, e.name_len,
                                       (uint64_t)e.header_size + e.payload_size))
            return refuse(w, "a fatbin entry's name lies beyond the entry");
        if (!payload_ok(&e, w))
            return 0;
    }
    if (more < 0)
        return refuse(w, "a fatbin entry (header %llu, payload %llu bytes) reaches beyond "
                      "its container", ull(e.header_size), ull(e.payload_size));
    return 1;
}

/* Containers back to back, filling the image. */
static int fatbin_ok(const unsigned char *p, size_t n, struct why *w)
{
    size_t off = 0;
    if (n < RGPU_FATBIN_HEADER)
        return refuse(w, "a fatbin of %zu bytes, shorter than its header", n);
    while (off < n) {
        struct rgpu_fatbin_container c;
        switch (rgpu_fatbin_container(p, n, off, &c)) {
        case RGPU_FATBIN_OK:
            break;
        case RGPU_FATBIN_NOT_CONTAINER:
            return refuse(w, "%zu bytes after a fatbin container are not another", n - off);
        default:
            return refuse(w, "a fatbin container of %llu bytes reaches beyond the %zu-byte "
                          "image", ull(c.size), n);
        }
        if (!entries_ok(&c, w))
            return 0;
        off = c.end;
    }
    return 1;
}

int image_check(const void *image, size_t n, char *why, size_t whylen)
{
    const unsigned char *p = image;
    struct why w = { why, whylen };
    if (why && whylen)
        why[0] = '\0';
    if (n >= 4 && rgpu_get32(p) == RGPU_FATBIN_WRAPPER_MAGIC) {
        refuse(&w, "a fatbin wrapper: its data pointer would be followed in the session "
               "(send the container)");
        return IMAGE_WRAPPER;
    }
    if (n >= 4 && rgpu_get32(p) == RGPU_FATBIN_MAGIC)
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
        if (end == digits || !rgpu_inside(off + AR_HEADER, size, n))
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
    uint32_t magic = n >= 4 ? rgpu_get32(p) : 0;
    if (magic == RGPU_FATBIN_WRAPPER_MAGIC || magic == RGPU_FATBIN_MAGIC ||
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
