/* Reading CUDA module images within their bytes (rgpu_fatbin.c): fatbin
 * containers and their entries, compressed entries, and ELF (cubin)
 * headers, sections, symbols, relocations and strings.
 *
 * Every function here reads only inside the bytes it is given, whatever
 * they hold: rgpud's image checks (daemon/image_check.c) run it on a
 * client's bytes, the client's printf scan (rgpu_printf_scan.c) on a
 * program's.  What it refuses it says by a status; what to make of that
 * (a refusal and its reason, an unknown scan) is the caller's. */
#ifndef RGPU_FATBIN_H
#define RGPU_FATBIN_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A fatbin wrapper, as nvcc registers it: the container's address, in
 * the process that holds it. */
#define RGPU_FATBIN_WRAPPER_MAGIC 0x466243b1u
struct rgpu_fatbin_wrapper {
    uint32_t magic, version;
    const void *data;                   /* the container */
    const void *filename_or_fatbins;
};
/* A container: u32 magic, u16 version, u16 header size, u64 size of the
 * entries that follow the header. */
#define RGPU_FATBIN_MAGIC 0xba55ed50u
#define RGPU_FATBIN_HEADER 16
/* An entry: u16 kind, u16 version, u32 header size, u64 payload size,
 * then u32 compressed size (at 16), u32 architecture (at 28), u32 name
 * offset and length (at 32, 36, from the entry's start), u64 flags (at
 * 40), u64 uncompressed size (at 56); 64 bytes for cubins, more for PTX. */
#define RGPU_FATBIN_ENTRY_HEADER 64
#define RGPU_FATBIN_PTX 1
#define RGPU_FATBIN_ELF 2
#define RGPU_FATBIN_LZ4 0x2000u     /* flags: a raw LZ4 block */
#define RGPU_FATBIN_ZSTD 0x8000u    /* flags: zstd frames */

/* Little-endian fields at any alignment. */
static inline uint16_t rgpu_get16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t rgpu_get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t rgpu_get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* [off, off + len) inside n bytes, without overflow. */
static inline int rgpu_inside(uint64_t off, uint64_t len, uint64_t n)
{
    return off <= n && len <= n - off;
}

/* ---- fatbin --------------------------------------------------------------------- */

enum rgpu_fatbin_status {
    RGPU_FATBIN_OK = 0,
    RGPU_FATBIN_NOT_CONTAINER,  /* fewer bytes than a container header, or no magic */
    RGPU_FATBIN_BEYOND,         /* a header, or what it declares, reaches beyond */
    RGPU_FATBIN_CUT,            /* a compressed size beyond the entry's payload */
    RGPU_FATBIN_TWO_CODECS,     /* flagged both LZ4 and zstd */
    RGPU_FATBIN_SIZES,          /* a size of 0, or over the caller's limit */
    RGPU_FATBIN_NOMEM,
    RGPU_FATBIN_CORRUPT,        /* does not decompress to exactly its declared size */
};

struct rgpu_fatbin_container {
    const unsigned char *entries;   /* the bytes after its header */
    uint64_t size;                  /* how many: its declared size */
    uint64_t end;                   /* the offset after it in the image */
};

struct rgpu_fatbin_entry {
    const unsigned char *payload;
    unsigned kind;
    uint32_t header_size, arch, name_off, name_len;
    uint64_t payload_size, flags;
    uint64_t compressed_size, plain_size;   /* of a compressed payload */
};

/* The size of the container whose header is at p (RGPU_FATBIN_HEADER
 * bytes the caller vouches for): header and entries, or 0 when it is
 * none.  For the stubs, which find a registered image's extent this way. */
size_t rgpu_fatbin_size(const void *p);
/* The container at off of the n bytes at p: RGPU_FATBIN_OK, or
 * NOT_CONTAINER, or BEYOND (c->size then says what it declared). */
int rgpu_fatbin_container(const unsigned char *p, size_t n, size_t off,
                          struct rgpu_fatbin_container *c);
/* The entry at *off of a container, as the libraries walk them: entries
 * while a header still fits (fewer bytes at the end are padding).  1 with
 * *off past it, 0 at the end, -1 when its header or payload reaches
 * beyond the container (e's sizes then say what it declared). */
int rgpu_fatbin_next_entry(const struct rgpu_fatbin_container *c, uint64_t *off,
                           struct rgpu_fatbin_entry *e);
int rgpu_fatbin_compressed(const struct rgpu_fatbin_entry *e);
/* A compressed entry's payload decompressed into a malloc'd *out of
 * exactly its declared size, which must be at most max bytes and which it
 * must fill: RGPU_FATBIN_OK, or why not (CUT, TWO_CODECS, SIZES, NOMEM,
 * CORRUPT, checked in that order; *out is then NULL). */
int rgpu_fatbin_decompress(const struct rgpu_fatbin_entry *e, uint64_t max, unsigned char **out);

/* ---- ELF ------------------------------------------------------------------------ */

enum rgpu_elf_status {
    RGPU_ELF_OK = 0,
    RGPU_ELF_SHORT,         /* shorter than an ELF header */
    RGPU_ELF_IDENT,         /* not a 64-bit little-endian ELF header */
    RGPU_ELF_EXTENDED,      /* counts kept in section 0 (PN_XNUM, SHN_XINDEX) */
    RGPU_ELF_SHENTSIZE,     /* section headers not of Elf64_Shdr's size */
    RGPU_ELF_PHENTSIZE,     /* program headers not of Elf64_Phdr's size */
    RGPU_ELF_SHTABLE,       /* the section header table reaches beyond */
    RGPU_ELF_PHTABLE,       /* the program header table reaches beyond */
    RGPU_ELF_SHSTRNDX,      /* the section name table is no section */
    RGPU_ELF_NOMEM,
};

/* An ELF64 image whose header and header tables lie inside its bytes. */
struct rgpu_elf {
    const unsigned char *p;
    size_t n;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh;         /* a copy of the section headers, eh.e_shnum of them */
};

/* RGPU_ELF_OK, or why the n bytes at p are not such an image (e->eh
 * holds the header when n was large enough).  rgpu_elf_close() after
 * either. */
int rgpu_elf_open(struct rgpu_elf *e, const void *p, size_t n);
void rgpu_elf_close(struct rgpu_elf *e);
/* Program header i (i < e_phnum). */
Elf64_Phdr rgpu_elf_segment(const struct rgpu_elf *e, unsigned i);
/* Whether section i exists and its bytes lie inside the image (a section
 * without file bytes, SHT_NOBITS: its offset). */
int rgpu_elf_section_inside(const struct rgpu_elf *e, unsigned i);
/* Section i's bytes where rgpu_elf_section_inside(), else NULL. */
const unsigned char *rgpu_elf_section_bytes(const struct rgpu_elf *e, unsigned i);
/* Entry k of section i's table of size-byte entries, copied to out: 0, or
 * -1 when it does not lie whole inside the section and the image. */
int rgpu_elf_entry(const struct rgpu_elf *e, unsigned i, uint64_t k, void *out, size_t size);
/* Relocation k of a SHT_REL or SHT_RELA section (r_addend 0 for REL). */
int rgpu_elf_relocation(const struct rgpu_elf *e, unsigned i, uint64_t k, Elf64_Rela *r);
/* The NUL-terminated string at off of string table section i, or NULL
 * when no NUL ends it inside the section. */
const char *rgpu_elf_string(const struct rgpu_elf *e, unsigned i, uint64_t off);

#endif
