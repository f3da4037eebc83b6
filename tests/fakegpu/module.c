// Module images: fatbin wrappers, fatbin containers, cubins.
//
// Layouts below were read off nvcc 13.0 output (nvcc -fatbin / -cubin,
// -Xfatbin -compress-all, -compress-mode=...); see README.md for the facts.
// The fake runs no machine code: from the cubin it needs only the kernel
// names, their parameter layouts and the module's variables.
#include "fakegpu.h"

#include <elf.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define FATBIN_WRAPPER_MAGIC  0x466243B1u
#define FATBIN_MAGIC          0xBA55ED50u
#define FATBIN_KIND_PTX       1
#define FATBIN_KIND_ELF       2
#define FATBIN_FLAG_LZ4       0x2000
#define FATBIN_FLAG_ZSTD      0x8000
#define MAX_CONTAINERS        64
#define MAX_IMAGE             (1ull << 30)

#define EM_CUDA_MACHINE       190
#define STO_CUDA_ENTRY        0x10    // st_other bit of a __global__ function
#define STT_CUDA_OBJECT       13      // a variable's type in relocatable cubins (-rdc)

// .nv.info attributes (EIATTR_*): every entry is {u8 format, u8 attribute}
// and, for format 4 (EIFMT_SVAL), a u16 size and that many bytes; the other
// formats keep a 2-byte value in the header.
#define EIFMT_SVAL            4
#define EIATTR_PARAM_CBANK    0x0a    // {u32 sym, u16 offset, u16 size}
#define EIATTR_MAX_THREADS    0x05    // {u32 x, y, z} from __launch_bounds__
#define EIATTR_FRAME_SIZE     0x11    // {u32 sym, u32 bytes}
#define EIATTR_KPARAM_INFO    0x17    // see parse_kparam
#define EIATTR_CBANK_PARAM_SIZE 0x19  // u16 in header
#define EIATTR_REGCOUNT       0x2f    // {u32 sym, u32 regs}
#define EIATTR_KPARAM_INFO_V2 0x45    // {u32 index, u16 ordinal, u16 offset, u32 size}

struct fatbin_wrapper {
    uint32_t magic, version;
    const void *data;
    const void *unused;
};

struct fatbin_header {
    uint32_t magic;
    uint16_t version, header_size;
    uint64_t fat_size;                  // bytes after the header
};

struct fatbin_entry {
    uint16_t kind, version;             // kind: 1 PTX, 2 ELF; version 0x101
    uint32_t header_size;               // 0x40 ELF, 0x50 PTX
    uint64_t payload_size;              // bytes after the header, padded
    uint32_t compressed_size;           // 0 when stored plainly
    uint32_t unknown0;
    uint32_t unknown1;
    uint32_t arch;                      // 90 for sm_90
    uint32_t name_offset, name_size;
    uint64_t flags;                     // 0x2000 LZ4, 0x8000 zstd
    uint64_t unknown2;
    uint64_t uncompressed_size;         // 0 when stored plainly
};
_Static_assert(sizeof(struct fatbin_entry) == 64, "fatbin entry header");

// ---- Image unpacking -------------------------------------------------------------

struct blob { unsigned char *p; size_t size; int arch; };

static CUresult entry_payload(const struct fatbin_entry *e,
                              const unsigned char *src, struct blob *out)
{
    size_t csize = e->compressed_size, dsize = e->uncompressed_size;

    if (!(e->flags & (FATBIN_FLAG_LZ4 | FATBIN_FLAG_ZSTD))) {
        out->p = malloc(e->payload_size ? e->payload_size : 1);
        if (!out->p)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(out->p, src, e->payload_size);
        out->size = e->payload_size;
        return CUDA_SUCCESS;
    }
    if (csize > e->payload_size || dsize == 0 || dsize > MAX_IMAGE)
        return CUDA_ERROR_INVALID_IMAGE;
    out->p = malloc(dsize);
    if (!out->p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (e->flags & FATBIN_FLAG_LZ4) {
        // A raw LZ4 block, not an LZ4 frame.
        int n = LZ4_decompress_safe((const char *)src, (char *)out->p,
                                    (int)csize, (int)dsize);
        out->size = n < 0 ? 0 : (size_t)n;
    } else {
        // A zstd frame.
        size_t n = ZSTD_decompress(out->p, dsize, src, csize);
        out->size = ZSTD_isError(n) ? 0 : n;
    }
    if (out->size == 0) {
        free(out->p);
        out->p = NULL;
        return CUDA_ERROR_INVALID_IMAGE;
    }
    return CUDA_SUCCESS;
}

// Whether machine code for sm_<arch> runs on the fake sm_90: same major and
// no newer minor.
static int arch_runs_here(uint32_t arch)
{
    return arch / 10 == FG_CC_MAJOR && arch % 10 <= FG_CC_MINOR;
}

// Picks the ELF of one container.  A GPU runs an ELF for its own arch or JIT
// compiles the PTX; the fake cannot compile, so when only PTX fits it takes
// any ELF of the container for the names and layouts (they do not depend on
// the arch).  PTX alone is refused.
static CUresult container_elf(const unsigned char *c, struct blob *out)
{
    struct fatbin_header h;
    const unsigned char *e, *end;
    const unsigned char *best = NULL, *any = NULL;
    int ptx = 0;

    memcpy(&h, c, sizeof h);
    if (h.header_size < sizeof h || h.fat_size > MAX_IMAGE)
        return CUDA_ERROR_INVALID_IMAGE;
    e = c + h.header_size;
    end = e + h.fat_size;
    while ((size_t)(end - e) >= sizeof(struct fatbin_entry)) {
        struct fatbin_entry en;

        memcpy(&en, e, sizeof en);
        if (en.header_size < sizeof en ||
            en.header_size > (size_t)(end - e) ||
            en.payload_size > (size_t)(end - e) - en.header_size)
            return CUDA_ERROR_INVALID_IMAGE;
        if (en.kind == FATBIN_KIND_PTX && en.arch <= FG_SM_ARCH)
            ptx = 1;                    // PTX JIT compiles for newer GPUs
        if (en.kind == FATBIN_KIND_ELF) {
            if (arch_runs_here(en.arch) && !best)
                best = e;
            if (!any)
                any = e;
        }
        e += en.header_size + en.payload_size;
    }
    if (!best && ptx)
        best = any;
    if (!best)
        return ptx ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NO_BINARY_FOR_GPU;
    {
        struct fatbin_entry en;
        memcpy(&en, best, sizeof en);
        out->arch = arch_runs_here(en.arch) ? (int)en.arch : FG_SM_ARCH;
        return entry_payload(&en, best + en.header_size, out);
    }
}

// Size of an ELF given only its start: the furthest of its headers and
// sections.
static size_t elf_extent(const unsigned char *p)
{
    Elf64_Ehdr eh;
    size_t end;

    memcpy(&eh, p, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr))
        return 0;
    end = eh.e_shoff + (size_t)eh.e_shnum * sizeof(Elf64_Shdr);
    if (eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize > end)
        end = eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, p + eh.e_shoff + i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > end)
            end = sh.sh_offset + sh.sh_size;
    }
    return end > MAX_IMAGE ? 0 : end;
}

static int looks_like_ptx(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    return !strncmp(s, "//", 2) || !strncmp(s, ".version", 8) ||
           !strncmp(s, ".target", 7);
}

// ---- ELF reading --------------------------------------------------------------------

struct elf {
    const unsigned char *p;
    size_t size;
    Elf64_Ehdr eh;
    const char *shstr;
    size_t shstr_size;
    Elf64_Sym *syms;        // copied out, so aligned
    size_t nsyms;
    const char *str;
    size_t str_size;
};

static int elf_shdr(const struct elf *e, unsigned i, Elf64_Shdr *sh)
{
    if (i >= e->eh.e_shnum)
        return -1;
    memcpy(sh, e->p + e->eh.e_shoff + i * sizeof *sh, sizeof *sh);
    if (sh->sh_type != SHT_NOBITS &&
        (sh->sh_offset > e->size || sh->sh_size > e->size - sh->sh_offset))
        return -1;
    return 0;
}

static const char *elf_str(const char *tab, size_t size, size_t off)
{
    if (off >= size || !memchr(tab + off, 0, size - off))
        return "";
    return tab + off;
}

static const char *elf_shname(const struct elf *e, const Elf64_Shdr *sh)
{
    return elf_str(e->shstr, e->shstr_size, sh->sh_name);
}

static int elf_find_section(const struct elf *e, const char *name,
                            Elf64_Shdr *out)
{
    for (unsigned i = 1; i < e->eh.e_shnum; i++)
        if (!elf_shdr(e, i, out) && !strcmp(elf_shname(e, out), name))
            return 0;
    return -1;
}

static int elf_open(struct elf *e, const unsigned char *p, size_t size)
{
    Elf64_Shdr sh, strsh;

    memset(e, 0, sizeof *e);
    e->p = p;
    e->size = size;
    if (size < sizeof e->eh || memcmp(p, ELFMAG, SELFMAG))
        return -1;
    memcpy(&e->eh, p, sizeof e->eh);
    if (e->eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        e->eh.e_machine != EM_CUDA_MACHINE ||
        e->eh.e_shentsize != sizeof(Elf64_Shdr) ||
        e->eh.e_shoff > size ||
        e->eh.e_shnum > (size - e->eh.e_shoff) / sizeof(Elf64_Shdr) ||
        elf_shdr(e, e->eh.e_shstrndx, &sh))
        return -1;
    e->shstr = (const char *)p + sh.sh_offset;
    e->shstr_size = sh.sh_size;
    for (unsigned i = 1; i < e->eh.e_shnum; i++) {
        if (elf_shdr(e, i, &sh) || sh.sh_type != SHT_SYMTAB)
            continue;
        if (elf_shdr(e, sh.sh_link, &strsh))
            return -1;
        e->nsyms = sh.sh_size / sizeof(Elf64_Sym);
        e->syms = malloc(e->nsyms * sizeof(Elf64_Sym) + 1);
        if (!e->syms)
            return -1;
        memcpy(e->syms, p + sh.sh_offset, e->nsyms * sizeof(Elf64_Sym));
        e->str = (const char *)p + strsh.sh_offset;
        e->str_size = strsh.sh_size;
        break;
    }
    return 0;
}

static const char *elf_symname(const struct elf *e, const Elf64_Sym *s)
{
    return elf_str(e->str, e->str_size, s->st_name);
}

// Calls fn for each attribute of a .nv.info section.
static void nvinfo_each(const struct elf *e, const Elf64_Shdr *sh,
                        void (*fn)(void *arg, unsigned attr,
                                   const unsigned char *val, size_t len),
                        void *arg)
{
    const unsigned char *p = e->p + sh->sh_offset, *end = p + sh->sh_size;

    while (end - p >= 4) {
        unsigned fmt = p[0], attr = p[1];
        size_t len = 2;
        const unsigned char *val = p + 2;

        if (fmt == EIFMT_SVAL) {
            uint16_t n;
            memcpy(&n, p + 2, 2);
            len = n;
            val = p + 4;
            if ((size_t)(end - val) < len)
                return;
            p = val + len;
        } else {
            p += 4;
        }
        fn(arg, attr, val, len);
    }
}

static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t rd16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }

// EIATTR_KPARAM_INFO, 12 bytes: u32 index (0), u16 ordinal, u16 offset,
// u32 bits whose top 14 bits (>> 18) are the size in bytes; the low bits
// (0x1f000 in every sample) say "constant bank".  Parameters past 16 KiB of
// size use EIATTR_KPARAM_INFO_V2 with a plain u32 size instead.
struct kparam_acc { struct fg_func *f; unsigned cap; int bad; };

static void kparam_add(struct kparam_acc *a, unsigned ord, uint32_t off,
                       uint32_t size)
{
    struct fg_func *f = a->f;

    if (ord >= 4096) {
        a->bad = 1;
        return;
    }
    if (ord >= a->cap) {
        unsigned cap = ord + 16;
        struct fg_param *n = realloc(f->params, cap * sizeof *n);
        if (!n) {
            a->bad = 1;
            return;
        }
        memset(n + a->cap, 0, (cap - a->cap) * sizeof *n);
        f->params = n;
        a->cap = cap;
    }
    f->params[ord] = (struct fg_param){ off, size };
    if (ord + 1 > f->nparams)
        f->nparams = ord + 1;
    if (off + size > f->param_size)
        f->param_size = off + size;
}

static void kernel_attr(void *arg, unsigned attr, const unsigned char *v,
                        size_t len)
{
    struct kparam_acc *a = arg;

    if (attr == EIATTR_KPARAM_INFO && len >= 12)
        kparam_add(a, rd16(v + 4), rd16(v + 6), rd32(v + 8) >> 18);
    else if (attr == EIATTR_KPARAM_INFO_V2 && len >= 12)
        kparam_add(a, rd16(v + 4), rd16(v + 6), rd32(v + 8));
    else if (attr == EIATTR_PARAM_CBANK && len >= 8 &&
             rd16(v + 6) > a->f->param_size)
        a->f->param_size = rd16(v + 6);
    else if (attr == EIATTR_CBANK_PARAM_SIZE && rd16(v) > a->f->param_size)
        a->f->param_size = rd16(v);
    else if (attr == EIATTR_MAX_THREADS && len >= 12)
        a->f->max_threads = (int)(rd32(v) * rd32(v + 4) * rd32(v + 8));
}

struct module_attr_acc { struct fg_module *m; const struct elf *e; };

// Module-wide .nv.info: per-kernel register counts and frame sizes, keyed by
// symbol index.
static void module_attr(void *arg, unsigned attr, const unsigned char *v,
                        size_t len)
{
    struct module_attr_acc *a = arg;
    const char *name;
    struct fg_func *f;

    if ((attr != EIATTR_REGCOUNT && attr != EIATTR_FRAME_SIZE) || len < 8 ||
        rd32(v) >= a->e->nsyms)
        return;
    name = elf_symname(a->e, &a->e->syms[rd32(v)]);
    f = fg_module_func(a->m, name);
    if (!f)
        return;
    if (attr == EIATTR_REGCOUNT)
        f->num_regs = (int)rd32(v + 4);
    else
        f->local_size = (int)rd32(v + 4);
}

static CUresult load_kernel(struct fg_module *m, const struct elf *e,
                            const char *name)
{
    struct fg_func *f = &m->funcs[m->nfuncs];
    struct kparam_acc acc = { .f = f };
    size_t len = strlen(name) + sizeof ".nv.shared.";
    char *secname = malloc(len);        // mangled names can be long
    Elf64_Shdr sh;

    memset(f, 0, sizeof *f);
    f->mod = m;
    f->arch = m->arch;
    f->max_threads = FG_MAX_THREADS;
    f->name = strdup(name);
    if (!f->name || !secname) {
        free(secname);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->nfuncs++;
    snprintf(secname, len, ".nv.info.%s", name);
    if (!elf_find_section(e, secname, &sh))
        nvinfo_each(e, &sh, kernel_attr, &acc);
    for (unsigned i = 0; i < f->nparams; i++)
        if (f->params[i].size == 0)
            acc.bad = 1;            // a gap in the ordinals
    snprintf(secname, len, ".nv.shared.%s", name);
    if (!acc.bad && !elf_find_section(e, secname, &sh))
        f->shared_size = (int)sh.sh_size;
    free(secname);
    if (acc.bad)
        return CUDA_ERROR_INVALID_IMAGE;
    f->handle = (CUfunction)(uintptr_t)fg_handle_new(FG_FUNC, f, m->owner);
    return f->handle ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

// Variables live in .nv.global (zero filled), .nv.global.init and
// .nv.constant<N> (N > 0; bank 0 holds kernel parameters).
static int is_variable_section(const char *s)
{
    return !strcmp(s, ".nv.global") || !strcmp(s, ".nv.global.init") ||
           (!strncmp(s, ".nv.constant", 12) && s[12] >= '1' && s[12] <= '9');
}

// Initialisers that hold addresses of other variables need relocations,
// which the fake does not apply: such pointers read as their raw bytes.
static CUresult load_global(struct fg_module *m, const struct elf *e,
                            const Elf64_Sym *s, const Elf64_Shdr *sh)
{
    struct fg_global *g = &m->globals[m->nglobals];
    const void *init = NULL;
    CUresult r;

    if (sh->sh_type != SHT_NOBITS && s->st_value <= sh->sh_size &&
        s->st_size <= sh->sh_size - s->st_value)
        init = e->p + sh->sh_offset + s->st_value;
    r = fg_mem_alloc_global(s->st_size, init, init ? s->st_size : 0, &g->dptr);
    if (r != CUDA_SUCCESS)
        return r;
    g->size = s->st_size;
    g->name = strdup(elf_symname(e, s));
    m->nglobals++;
    return g->name ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult load_elf(struct fg_module *m, const struct elf *e)
{
    CUresult r = CUDA_SUCCESS;
    struct module_attr_acc acc = { m, e };
    Elf64_Shdr sh;

    m->funcs = calloc(e->nsyms + 1, sizeof *m->funcs);
    m->globals = calloc(e->nsyms + 1, sizeof *m->globals);
    if (!m->funcs || !m->globals)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < e->nsyms && r == CUDA_SUCCESS; i++) {
        const Elf64_Sym *s = &e->syms[i];
        const char *name = elf_symname(e, s);

        if (!*name || elf_shdr(e, s->st_shndx, &sh))
            continue;
        if (ELF64_ST_TYPE(s->st_info) == STT_FUNC &&
            (s->st_other & STO_CUDA_ENTRY))
            r = load_kernel(m, e, name);
        else if ((ELF64_ST_TYPE(s->st_info) == STT_OBJECT ||
                  ELF64_ST_TYPE(s->st_info) == STT_CUDA_OBJECT) &&
                 is_variable_section(elf_shname(e, &sh)))
            r = load_global(m, e, s, &sh);
    }
    if (r != CUDA_SUCCESS)
        return r;
    if (!elf_find_section(e, ".nv.info", &sh))
        nvinfo_each(e, &sh, module_attr, &acc);
    if (!elf_find_section(e, ".nv.constant3", &sh))
        m->const_size = sh.sh_size;
    for (unsigned i = 0; i < m->nfuncs; i++)
        m->funcs[i].twin = fg_twin_find(&m->funcs[i]);
    return CUDA_SUCCESS;
}

// Parses one ELF blob into m (which must be empty).
static CUresult load_blob(struct fg_module *m, const struct blob *b)
{
    struct elf e;
    CUresult r;

    if (elf_open(&e, b->p, b->size) < 0) {
        free(e.syms);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    m->arch = b->arch ? b->arch : (int)((e.eh.e_flags >> 8) & 0xff);
    r = load_elf(m, &e);
    free(e.syms);
    return r;
}

static void module_clear(struct fg_module *m)
{
    for (unsigned i = 0; i < m->nfuncs; i++) {
        if (m->funcs[i].handle)
            fg_handle_drop((uint64_t)(uintptr_t)m->funcs[i].handle);
        free(m->funcs[i].name);
        free(m->funcs[i].params);
    }
    for (unsigned i = 0; i < m->nglobals; i++) {
        fg_mem_free_global(m->globals[i].dptr);
        free(m->globals[i].name);
    }
    free(m->funcs);
    free(m->globals);
    m->funcs = NULL;
    m->globals = NULL;
    m->nfuncs = m->nglobals = 0;
    m->const_size = 0;
}

// Containers may come back to back.  Stop at the first whose ELF has a
// kernel: the API gives no length, so reading on past the last container
// would run off the caller's buffer.  Only a container without kernels makes
// us look (16 bytes) past it.
static CUresult load_containers(struct fg_module *m, const unsigned char *c)
{
    CUresult r = CUDA_ERROR_INVALID_IMAGE;

    for (int n = 0; n < MAX_CONTAINERS; n++) {
        struct fatbin_header h;
        struct blob b = { 0 };

        memcpy(&h, c, sizeof h);
        if (h.magic != FATBIN_MAGIC)
            break;
        module_clear(m);
        r = container_elf(c, &b);
        if (r == CUDA_SUCCESS)
            r = load_blob(m, &b);
        free(b.p);
        if (r != CUDA_SUCCESS || m->nfuncs > 0)
            break;
        c += h.header_size + h.fat_size;
    }
    return r;
}

static CUresult load_image(struct fg_module *m, const void *image)
{
    const unsigned char *p = image;
    uint32_t magic;

    memcpy(&magic, p, 4);
    if (magic == FATBIN_WRAPPER_MAGIC) {
        struct fatbin_wrapper w;
        memcpy(&w, p, sizeof w);
        if (!w.data)
            return CUDA_ERROR_INVALID_IMAGE;
        return load_containers(m, w.data);
    }
    if (magic == FATBIN_MAGIC)
        return load_containers(m, p);
    if (!memcmp(p, ELFMAG, SELFMAG)) {
        struct blob b = { .size = elf_extent(p) };
        CUresult r;

        if (b.size == 0)
            return CUDA_ERROR_INVALID_IMAGE;
        b.p = malloc(b.size);
        if (!b.p)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(b.p, p, b.size);
        r = load_blob(m, &b);
        free(b.p);
        if (r == CUDA_SUCCESS && !arch_runs_here((unsigned)m->arch))
            r = CUDA_ERROR_NO_BINARY_FOR_GPU;
        return r;
    }
    if (looks_like_ptx(image))
        return CUDA_ERROR_NOT_SUPPORTED;    // no JIT in the fake
    return CUDA_ERROR_INVALID_IMAGE;
}

// ---- Link inputs ---------------------------------------------------------------------

static unsigned elf_kernels(const struct elf *e)
{
    unsigned n = 0;
    for (size_t i = 0; i < e->nsyms; i++)
        n += ELF64_ST_TYPE(e->syms[i].st_info) == STT_FUNC &&
             (e->syms[i].st_other & STO_CUDA_ENTRY);
    return n;
}

// The bytes of a cubin given with its size: its headers inside them.
static CUresult sized_elf(const unsigned char *p, size_t size, struct blob *out)
{
    Elf64_Ehdr eh;
    size_t ext;

    if (size < sizeof eh)
        return CUDA_ERROR_INVALID_IMAGE;
    memcpy(&eh, p, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_shoff > size || eh.e_shnum > (size - eh.e_shoff) / sizeof(Elf64_Shdr) ||
        eh.e_phoff > size || (eh.e_phnum && (eh.e_phentsize < sizeof(Elf64_Phdr) ||
                               eh.e_phnum > (size - eh.e_phoff) / eh.e_phentsize)))
        return CUDA_ERROR_INVALID_IMAGE;
    ext = elf_extent(p);
    if (ext == 0 || ext > size)
        return CUDA_ERROR_INVALID_IMAGE;
    out->p = malloc(ext);
    if (!out->p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(out->p, p, ext);
    out->size = ext;
    out->arch = (int)((eh.e_flags >> 8) & 0xff);
    return arch_runs_here((unsigned)out->arch) ? CUDA_SUCCESS : CUDA_ERROR_NO_BINARY_FOR_GPU;
}

static CUresult sized_fatbin(const unsigned char *p, size_t size, struct blob *out)
{
    struct fatbin_header h;

    if (size < sizeof h)
        return CUDA_ERROR_INVALID_IMAGE;
    memcpy(&h, p, sizeof h);
    if (h.header_size < sizeof h || h.header_size > size ||
        h.fat_size > size - h.header_size)
        return CUDA_ERROR_INVALID_IMAGE;
    return container_elf(p, out);
}

CUresult fg_image_elf(const void *data, size_t size, unsigned char **elf,
                      size_t *elf_size, unsigned *nkernels)
{
    const unsigned char *p = data;
    struct blob b = { 0 };
    struct elf e = { 0 };
    uint32_t magic = 0;
    CUresult r;

    if (size >= 4)
        memcpy(&magic, p, 4);
    if (magic == FATBIN_MAGIC)
        r = sized_fatbin(p, size, &b);
    else if (size >= SELFMAG && !memcmp(p, ELFMAG, SELFMAG))
        r = sized_elf(p, size, &b);
    else
        r = CUDA_ERROR_INVALID_IMAGE;
    if (r == CUDA_SUCCESS && elf_open(&e, b.p, b.size) < 0)
        r = CUDA_ERROR_INVALID_IMAGE;
    else if (r == CUDA_SUCCESS)
        *nkernels = elf_kernels(&e);
    free(e.syms);
    if (r != CUDA_SUCCESS) {
        free(b.p);
        return r;
    }
    *elf = b.p;
    *elf_size = b.size;
    return CUDA_SUCCESS;
}

CUresult fg_module_load(const void *image, int is_library, struct fg_ctx *owner,
                        struct fg_module **out)
{
    struct fg_module *m;
    CUresult r;

    if (!image)
        return CUDA_ERROR_INVALID_VALUE;
    m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->is_library = is_library;
    m->owner = is_library ? NULL : owner;
    r = load_image(m, image);
    if (r == CUDA_SUCCESS) {
        m->handle = (CUmodule)(uintptr_t)fg_handle_new(FG_MOD, m, m->owner);
        if (!m->handle)
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS) {
        fg_module_free(m);
        return r;
    }
    *out = m;
    return CUDA_SUCCESS;
}

void fg_module_free(struct fg_module *m)
{
    if (!m)
        return;
    module_clear(m);
    if (m->handle)
        fg_handle_drop((uint64_t)(uintptr_t)m->handle);
    free(m);
}

struct fg_func *fg_module_func(struct fg_module *m, const char *name)
{
    for (unsigned i = 0; i < m->nfuncs; i++)
        if (!strcmp(m->funcs[i].name, name))
            return &m->funcs[i];
    return NULL;
}

struct fg_global *fg_module_global(struct fg_module *m, const char *name)
{
    for (unsigned i = 0; i < m->nglobals; i++)
        if (!strcmp(m->globals[i].name, name))
            return &m->globals[i];
    return NULL;
}
