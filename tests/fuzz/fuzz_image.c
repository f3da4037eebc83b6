/* libFuzzer harness: the module image checks (daemon/image_check.c) on
 * arbitrary bytes, as a session runs them on every image a client sends
 * before a CUDA library reads it.
 *
 * Each input goes through image_check (the loads without a size) and
 * image_check_sized (cuLinkAddData).  Beyond "no crash, no sanitizer
 * report":
 *  - a refusal says why, in a NUL-terminated sentence;
 *  - what is accepted, a loader model walks as a library would, from a
 *    copy of exactly the image's bytes: every container and entry, every
 *    compressed payload decompressed into a buffer of its declared size,
 *    and in every ELF (plain or decompressed) the header tables, each
 *    section's bytes whatever its type, the name, string and symbol
 *    tables, each symbol's data in its section, each relocation's target
 *    bytes, each .nv.info attribute.  Any read the model makes outside
 *    the bytes it was given aborts, naming what it read: an image the
 *    checks passed that a loader would read beyond.
 * The model is written apart from the checks, from what a loader needs,
 * not from the checks' own rules, so that a gap in one shows up.
 *
 * The client's printf scan (common/rgpu_printf_scan.c) reads the same
 * formats with the same walker (common/rgpu_fatbin.c): it runs on each
 * input too, every fatbin entry read, and must stay inside its bytes. */
#include "image_check.h"
#include "rgpu_printf_scan.h"

#include <elf.h>
#include <lz4.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* Bytes the model reads from, and where they came from. */
struct span {
    const unsigned char *p;
    uint64_t n;
    const char *what;
};

static void beyond(const struct span *s, const char *read, uint64_t off, uint64_t len)
{
    fprintf(stderr, "fuzz_image: accepted %s, but a loader reads %s at [%llu, +%llu) of its "
            "%llu bytes\n", s->what, read, (unsigned long long)off, (unsigned long long)len,
            (unsigned long long)s->n);
    abort();
}

/* The bytes [off, off + len) of s, or abort. */
static const unsigned char *at(const struct span *s, uint64_t off, uint64_t len, const char *read)
{
    if (off > s->n || len > s->n - off)
        beyond(s, read, off, len);
    return s->p + off;
}

static uint64_t get(const struct span *s, uint64_t off, unsigned size, const char *read)
{
    uint64_t v = 0;
    memcpy(&v, at(s, off, size, read), size);
    return v;
}

/* A NUL-terminated string at off of table t (inside s). */
static void string_at(const struct span *s, uint64_t t_off, uint64_t t_size, uint64_t off,
                      const char *read)
{
    const unsigned char *t = at(s, t_off, t_size, read);
    if (off >= t_size || !memchr(t + off, '\0', t_size - off))
        beyond(s, read, t_off + off, t_size > off ? t_size - off : 0);
}

static Elf64_Shdr shdr(const struct span *s, const Elf64_Ehdr *eh, uint64_t i)
{
    Elf64_Shdr sh;
    memcpy(&sh, at(s, eh->e_shoff + i * eh->e_shentsize, sizeof sh, "a section header"),
           sizeof sh);
    return sh;
}

/* The bytes a relocation may write at its offset: up to a 16-byte
 * instruction in code, 4 for the 32-bit data relocations, 8 for the rest. */
static uint64_t reloc_width(const Elf64_Shdr *target, uint32_t type)
{
    if (target->sh_flags & SHF_EXECINSTR)
        return 16;
    return type == 1 || type == 3 ? 4 : 8;
}

static void walk_symbols(const struct span *s, const Elf64_Ehdr *eh, const Elf64_Shdr *tab)
{
    Elf64_Shdr str = shdr(s, eh, tab->sh_link);
    uint64_t n = tab->sh_size / sizeof(Elf64_Sym);
    for (uint64_t k = 0; k < n; k++) {
        Elf64_Sym sym;
        memcpy(&sym, at(s, tab->sh_offset + k * sizeof sym, sizeof sym, "a symbol"), sizeof sym);
        string_at(s, str.sh_offset, str.sh_size, sym.st_name, "a symbol's name");
        if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE)
            continue;
        if (sym.st_shndx >= eh->e_shnum)
            beyond(s, "a symbol's section header", sym.st_shndx, 1);
        Elf64_Shdr sec = shdr(s, eh, sym.st_shndx);
        /* The symbol's bytes in its section (a global's initialiser). */
        if (sym.st_value > sec.sh_size || sym.st_size > sec.sh_size - sym.st_value)
            beyond(s, "a symbol's data in its section", sec.sh_offset + sym.st_value,
                   sym.st_size);
        if (sec.sh_type != SHT_NOBITS)
            at(s, sec.sh_offset + sym.st_value, sym.st_size, "a symbol's data");
    }
}

static void walk_relocations(const struct span *s, const Elf64_Ehdr *eh, const Elf64_Shdr *rel)
{
    uint64_t size = rel->sh_type == SHT_RELA ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
    Elf64_Shdr syms = shdr(s, eh, rel->sh_link);
    if (rel->sh_info >= eh->e_shnum)
        beyond(s, "a relocation's target section header", rel->sh_info, 1);
    Elf64_Shdr target = shdr(s, eh, rel->sh_info);
    for (uint64_t k = 0; k < rel->sh_size / size; k++) {
        uint64_t off = get(s, rel->sh_offset + k * size, 8, "a relocation");
        uint64_t info = get(s, rel->sh_offset + k * size + 8, 8, "a relocation");
        at(s, syms.sh_offset + ELF64_R_SYM(info) * sizeof(Elf64_Sym), sizeof(Elf64_Sym),
           "a relocation's symbol");
        uint64_t width = reloc_width(&target, (uint32_t)ELF64_R_TYPE(info));
        if (off > target.sh_size || width > target.sh_size - off)
            beyond(s, "a relocation's field in its target", target.sh_offset + off, width);
    }
}

static void walk_attributes(const struct span *s, const Elf64_Shdr *sec)
{
    struct span list = { at(s, sec->sh_offset, sec->sh_size, ".nv.info"), sec->sh_size,
                         s->what };
    uint64_t off = 0;
    while (off < list.n) {
        unsigned format = (unsigned)get(&list, off, 1, "an attribute's format");
        uint64_t len = format == 4 ? get(&list, off + 2, 2, "an attribute's length") : 0;
        at(&list, off, 4 + len, "an attribute");
        off += 4 + len;
    }
}

static void walk_elf(const struct span *s)
{
    Elf64_Ehdr eh;
    memcpy(&eh, at(s, 0, sizeof eh, "the ELF header"), sizeof eh);
    for (uint64_t i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, at(s, eh.e_phoff + i * eh.e_phentsize, sizeof ph, "a program header"),
               sizeof ph);
        at(s, ph.p_offset, ph.p_filesz, "a segment's bytes");
        if (ph.p_filesz > ph.p_memsz)
            beyond(s, "a segment larger than its memory", ph.p_offset, ph.p_filesz);
    }
    if (!eh.e_shnum)
        return;
    Elf64_Shdr names = shdr(s, &eh, eh.e_shstrndx);
    for (uint64_t i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sec = shdr(s, &eh, i);
        /* The extent a loader computes from every header, whatever its type. */
        at(s, sec.sh_offset, sec.sh_type == SHT_NOBITS ? 0 : sec.sh_size, "a section's bytes");
        string_at(s, names.sh_offset, names.sh_size, sec.sh_name, "a section's name");
        if (sec.sh_link >= eh.e_shnum)
            beyond(s, "a section's linked section header", sec.sh_link, 1);
        if (sec.sh_type == SHT_SYMTAB || sec.sh_type == SHT_DYNSYM)
            walk_symbols(s, &eh, &sec);
        else if (sec.sh_type == SHT_REL || sec.sh_type == SHT_RELA)
            walk_relocations(s, &eh, &sec);
        else if (sec.sh_type == 0x70000000u)
            walk_attributes(s, &sec);
    }
}

/* A compressed entry's payload, decompressed into exactly its declared
 * size as a loader would; the model then walks the ELF inside. */
static void walk_compressed(const struct span *s, const unsigned char *e, uint64_t payload,
                            uint64_t psize)
{
    uint64_t csize = get(s, e - s->p + 16, 4, "an entry's compressed size");
    uint64_t flags = get(s, e - s->p + 40, 8, "an entry's flags");
    uint64_t dsize = get(s, e - s->p + 56, 8, "an entry's size");
    if (csize > psize)
        beyond(s, "a compressed payload", payload, csize);
    const unsigned char *src = at(s, payload, csize, "a compressed payload");
    unsigned char *out = malloc(dsize ? dsize : 1);
    if (!out)
        abort();
    uint64_t got;
    if (flags & 0x2000) {
        int r = LZ4_decompress_safe((const char *)src, (char *)out, (int)csize, (int)dsize);
        got = r < 0 ? 0 : (uint64_t)r;
    } else {
        size_t r = ZSTD_decompress(out, dsize, src, csize);
        got = ZSTD_isError(r) ? 0 : r;
    }
    if (got != dsize)
        beyond(s, "a payload that does not fill its declared size", payload, dsize);
    struct span plain = { out, dsize, "a decompressed ELF entry" };
    if ((uint16_t)get(s, e - s->p, 2, "an entry's kind") == 2)
        walk_elf(&plain);
    free(out);
}

static void walk_fatbin(const struct span *s)
{
    uint64_t off = 0;
    while (off < s->n) {
        uint64_t hsize = get(s, off + 6, 2, "a container header");
        uint64_t fat = get(s, off + 8, 8, "a container header");
        const unsigned char *c = at(s, off + hsize, fat, "a container's entries");
        uint64_t e = 0;
        while (fat - e >= 64) {
            uint64_t base = (uint64_t)(c - s->p) + e;
            unsigned kind = (unsigned)get(s, base, 2, "an entry header");
            uint64_t ehsize = get(s, base + 4, 4, "an entry header");
            uint64_t psize = get(s, base + 8, 8, "an entry header");
            uint64_t flags = get(s, base + 40, 8, "an entry header");
            if (ehsize > fat - e || psize > fat - e - ehsize)
                beyond(s, "an entry beyond its container", base, ehsize + psize);
            at(s, base, ehsize + psize, "an entry");
            if ((kind == 1 || kind == 2) && (flags & (0x2000 | 0x8000)))
                walk_compressed(s, s->p + base, base + ehsize, psize);
            else if (kind == 2) {
                struct span elf = { s->p + base + ehsize, psize, "an ELF entry" };
                walk_elf(&elf);
            }
            e += ehsize + psize;
        }
        off += hsize + fat;
    }
}

/* An ar archive (cuLinkAddData's libraries): each member's header and
 * bytes, ELF members as such. */
static void walk_archive(const struct span *s)
{
    uint64_t off = 8;
    while (off < s->n) {
        char digits[11];
        memcpy(digits, at(s, off + 48, 10, "a member's size"), 10);
        digits[10] = '\0';
        uint64_t size = strtoull(digits, NULL, 10);
        struct span m = { at(s, off + 60, size, "an archive member"), size, "an archive member" };
        if (size >= SELFMAG && memcmp(m.p, ELFMAG, SELFMAG) == 0)
            walk_elf(&m);
        off += 60 + size + (size & 1);
    }
}

/* sized: as cuLinkAddData reads its input (archives too); else as the
 * loads without a size do (an archive is text to them). */
static void walk(const struct span *s, int sized)
{
    uint32_t magic = s->n >= 4 ? (uint32_t)get(s, 0, 4, "the magic") : 0;
    if (magic == 0xba55ed50u)
        walk_fatbin(s);
    else if (s->n >= SELFMAG && memcmp(s->p, ELFMAG, SELFMAG) == 0)
        walk_elf(s);
    else if (sized && s->n >= 8 && memcmp(s->p, "!<arch>\n", 8) == 0)
        walk_archive(s);
}

static void check_why(const char *why, size_t size)
{
    if (!memchr(why, '\0', size) || !why[0]) {
        fprintf(stderr, "fuzz_image: a refusal without a reason\n");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[256];
    /* Exactly the image's bytes: ASan sees a read one byte beyond. */
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    struct span s = { copy, size, "an image" };
    int verdict = image_check(copy, size, why, sizeof why);
    if (verdict == IMAGE_OK)
        walk(&s, 0);
    else
        check_why(why, sizeof why);
    verdict = image_check_sized(copy, size, why, sizeof why);
    if (verdict == IMAGE_OK)
        walk(&s, 1);
    else
        check_why(why, sizeof why);
    struct rgpu_print_scan scan;
    rgpu_print_scan(copy, size, NULL, 0, &scan);
    rgpu_print_scan_free(&scan);
    free(copy);
    return 0;
}
