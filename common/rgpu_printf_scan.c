/* Which kernels of a module image may call printf (rgpu_printf_scan.h).
 *
 * Device printf is a call of vprintf, which the driver provides: a cubin
 * names it in its symbol table, undefined; PTX declares it .extern and
 * calls it.  A kernel may print when vprintf is reachable from it through
 * calls, which the image records:
 *
 *   - a cubin's .nv.callgraph section: pairs of u32 symbol indices
 *     (caller, callee), in blocks each opened by a marker pair (0, -k).
 *     Read off nvcc 13's output (cubins of kernels calling printf directly,
 *     through __noinline__ and recursive device functions, through
 *     function pointers and virtual functions; whole-program, -rdc and
 *     nvlink-linked): block 1 holds direct calls, block 2 the functions
 *     whose address is taken and block 3 those that call through a pointer
 *     (each with a prototype number, not a symbol), block 4 the candidates
 *     of virtual calls.  Whole-program code (nvcc's default) keeps a
 *     kernel's device functions inside the kernel's own section and lists
 *     the kernel as calling vprintf itself; relocatable code keeps a
 *     section per function, lists every call, and its relocation sections
 *     (.rela.text.<fn>) name the callees again.  Both are read: a callgraph
 *     pair or a relocation of a function's code makes an edge from that
 *     function's section to the section (or the undefined symbol) named.
 *   - PTX: the `call` instructions of each .entry and .func body.
 *
 * A function that calls through a pointer may reach any function: it
 * prints when anything in its image prints.  What cannot be read (an entry
 * of another kind, a failed decompression, a cubin naming vprintf without
 * a call graph, a marker of another meaning) makes the whole image
 * unknown: every kernel may print.  A fatbin's entries (per architecture,
 * cubins and PTX, LZ4- or zstd-compressed) are read where the GPUs the
 * image is for may run them, and a kernel may print when it does in any of
 * those: kernels differ by architecture (PyTorch's flash attention calls
 * printf in its cubins for GPUs too old for it, and only there). */
#include "rgpu_printf_scan.h"

#include <elf.h>
#include <lz4.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define FATBIN_MAGIC 0xba55ed50u
#define FATBIN_HEADER 16            /* u32 magic, u16 version, u16 header size, u64 size */
/* An entry's header: u16 kind, u16 version, u32 header size, u64 payload
 * size, u32 compressed size (at 16), u64 flags (at 40), u64 uncompressed
 * size (at 56); 64 bytes for cubins, more for PTX and some cubins. */
#define ENTRY_HEADER_MIN 64
#define ENTRY_PTX 1
#define ENTRY_ELF 2
#define ENTRY_LZ4 0x2000u           /* a raw LZ4 block */
#define ENTRY_ZSTD 0x8000u          /* a zstd frame */
#define MAX_UNCOMPRESSED (1ull << 30)

#define EM_CUDA_MACHINE 190
#define STO_CUDA_ENTRY 0x10         /* st_other of a __global__ function */
#define CALLGRAPH_BLOCKS 4

#define NO_NODE UINT32_MAX

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

/* ---- what the scan found ------------------------------------------------------------ */

struct names {
    char **v;
    size_t n, cap;
};

struct scan {
    struct names clean, printing;   /* kernels as each entry found them */
    const unsigned *archs;          /* the GPUs', major * 10 + minor */
    size_t narchs;                  /* 0: any GPU */
    int unknown;
    int oom;
};

static void names_free(struct names *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

static int names_add(struct names *a, const char *s, size_t len)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        char **v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    a->v[a->n++] = copy;
    return 0;
}

static void found(struct scan *sc, const char *name, size_t len, int prints)
{
    if (names_add(prints ? &sc->printing : &sc->clean, name, len) < 0)
        sc->oom = 1;
}

/* ---- calls: which functions reach a printing one ------------------------------------ */

struct edge {
    uint32_t from, to;      /* from calls to */
};

struct graph {
    uint32_t n, cap;
    unsigned char *prints;      /* per node: calls vprintf, directly or not */
    unsigned char *indirect;    /* per node: calls through a pointer */
    struct edge *e;
    size_t ne, ecap;
};

static void graph_free(struct graph *g)
{
    free(g->prints);
    free(g->indirect);
    free(g->e);
    memset(g, 0, sizeof *g);
}

/* A new node; NO_NODE when out of memory. */
static uint32_t graph_node(struct graph *g)
{
    if (g->n == g->cap) {
        uint32_t cap = g->cap ? g->cap * 2 : 64;
        unsigned char *p = realloc(g->prints, cap), *q;
        if (!p)
            return NO_NODE;
        g->prints = p;
        if (!(q = realloc(g->indirect, cap)))
            return NO_NODE;
        g->indirect = q;
        g->cap = cap;
    }
    g->prints[g->n] = 0;
    g->indirect[g->n] = 0;
    return g->n++;
}

static int graph_nodes(struct graph *g, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (graph_node(g) == NO_NODE)
            return -1;
    return 0;
}

static int graph_edge(struct graph *g, uint32_t from, uint32_t to)
{
    if (from == NO_NODE || to == NO_NODE || from == to)
        return 0;
    if (g->ne == g->ecap) {
        size_t cap = g->ecap ? g->ecap * 2 : 256;
        struct edge *e = realloc(g->e, cap * sizeof *e);
        if (!e)
            return -1;
        g->e = e;
        g->ecap = cap;
    }
    g->e[g->ne++] = (struct edge){ from, to };
    return 0;
}

/* The callers of each node, as one array: callers of node i are
 * by[first[i] .. first[i + 1]). */
struct callers {
    size_t *first;
    uint32_t *by;
};

static int callers_of(const struct graph *g, struct callers *c)
{
    c->first = calloc((size_t)g->n + 1, sizeof *c->first);
    c->by = malloc((g->ne ? g->ne : 1) * sizeof *c->by);
    if (!c->first || !c->by)
        return -1;
    for (size_t i = 0; i < g->ne; i++)
        c->first[g->e[i].to + 1]++;
    for (uint32_t i = 0; i < g->n; i++)
        c->first[i + 1] += c->first[i];
    size_t *at = malloc(((size_t)g->n + 1) * sizeof *at);
    if (!at)
        return -1;
    memcpy(at, c->first, ((size_t)g->n + 1) * sizeof *at);
    for (size_t i = 0; i < g->ne; i++)
        c->by[at[g->e[i].to]++] = g->e[i].from;
    free(at);
    return 0;
}

/* Mark node printing and queue it (queue has room for every node). */
static void mark(struct graph *g, uint32_t node, uint32_t *queue, size_t *tail)
{
    if (!g->prints[node]) {
        g->prints[node] = 1;
        queue[(*tail)++] = node;
    }
}

/* Every caller of a printing node prints; then, if anything prints, so
 * does every node that calls through a pointer, and its callers. */
static int graph_close(struct graph *g)
{
    struct callers c = { NULL, NULL };
    uint32_t *queue = malloc(((size_t)g->n + 1) * sizeof *queue);
    size_t head = 0, tail = 0;
    int rc = -1;

    if (!queue || callers_of(g, &c) < 0)
        goto out;
    for (uint32_t i = 0; i < g->n; i++)
        if (g->prints[i])
            queue[tail++] = i;
    int any = tail > 0;
    for (;;) {
        while (head < tail) {
            uint32_t x = queue[head++];
            for (size_t k = c.first[x]; k < c.first[x + 1]; k++)
                mark(g, c.by[k], queue, &tail);
        }
        size_t before = tail;
        for (uint32_t i = 0; any && i < g->n; i++)
            if (g->indirect[i])
                mark(g, i, queue, &tail);
        if (tail == before)
            break;
    }
    rc = 0;
out:
    free(queue);
    free(c.first);
    free(c.by);
    return rc;
}

/* ---- cubins ----------------------------------------------------------------------------- */

struct elf {
    const unsigned char *p;
    size_t n;
    Elf64_Ehdr eh;
    const unsigned char *syms;      /* Elf64_Sym entries, unaligned */
    size_t nsyms;
    const char *str, *shstr;
    size_t nstr, nshstr;
};

static int elf_section(const struct elf *e, unsigned i, Elf64_Shdr *sh)
{
    if (i >= e->eh.e_shnum)
        return -1;
    memcpy(sh, e->p + e->eh.e_shoff + (size_t)i * sizeof *sh, sizeof *sh);
    return sh->sh_type == SHT_NOBITS || inside(sh->sh_offset, sh->sh_size, e->n) ? 0 : -1;
}

static void elf_sym(const struct elf *e, size_t i, Elf64_Sym *s)
{
    memcpy(s, e->syms + i * sizeof *s, sizeof *s);
}

/* The NUL-terminated string at off of a string table, or NULL. */
static const char *table_string(const char *tab, size_t n, uint64_t off)
{
    return off < n && memchr(tab + off, 0, n - off) ? tab + off : NULL;
}

static int elf_symtab(struct elf *e)
{
    Elf64_Shdr sh, strsh;
    for (unsigned i = 1; i < e->eh.e_shnum; i++) {
        if (elf_section(e, i, &sh) < 0)
            return -1;
        if (sh.sh_type != SHT_SYMTAB)
            continue;
        if (sh.sh_entsize != sizeof(Elf64_Sym) || elf_section(e, sh.sh_link, &strsh) < 0 ||
            strsh.sh_type != SHT_STRTAB)
            return -1;
        e->syms = e->p + sh.sh_offset;
        e->nsyms = sh.sh_size / sizeof(Elf64_Sym);
        e->str = (const char *)e->p + strsh.sh_offset;
        e->nstr = strsh.sh_size;
        return 0;
    }
    return -1;
}

static int elf_open(struct elf *e, const unsigned char *p, size_t n)
{
    Elf64_Shdr sh;
    memset(e, 0, sizeof *e);
    e->p = p;
    e->n = n;
    if (n < sizeof e->eh || memcmp(p, ELFMAG, SELFMAG) != 0)
        return -1;
    memcpy(&e->eh, p, sizeof e->eh);
    if (e->eh.e_ident[EI_CLASS] != ELFCLASS64 || e->eh.e_machine != EM_CUDA_MACHINE ||
        e->eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !inside(e->eh.e_shoff, (uint64_t)e->eh.e_shnum * sizeof(Elf64_Shdr), n) ||
        elf_section(e, e->eh.e_shstrndx, &sh) < 0)
        return -1;
    e->shstr = (const char *)p + sh.sh_offset;
    e->nshstr = sh.sh_size;
    return elf_symtab(e);
}

static int is_vprintf(const struct elf *e, const Elf64_Sym *s)
{
    const char *name = table_string(e->str, e->nstr, s->st_name);
    return s->st_shndx == SHN_UNDEF && name && strcmp(name, "vprintf") == 0;
}

static int defined(const struct elf *e, const Elf64_Sym *s)
{
    return s->st_shndx != SHN_UNDEF && s->st_shndx < SHN_LORESERVE &&
           s->st_shndx < e->eh.e_shnum;
}

/* The node of each symbol: its section's (node i is section i), vprintf's
 * (node vp), or none (other undefined symbols: the driver's functions). */
static uint32_t *symbol_nodes(const struct elf *e, uint32_t vp, int *names_vprintf)
{
    uint32_t *node = malloc((e->nsyms ? e->nsyms : 1) * sizeof *node);
    *names_vprintf = 0;
    for (size_t i = 0; node && i < e->nsyms; i++) {
        Elf64_Sym s;
        elf_sym(e, i, &s);
        node[i] = defined(e, &s) ? s.st_shndx : is_vprintf(e, &s) ? vp : NO_NODE;
        if (node[i] == vp)
            *names_vprintf = 1;
    }
    return node;
}

static int elf_find_section(const struct elf *e, const char *name, Elf64_Shdr *out)
{
    for (unsigned i = 1; i < e->eh.e_shnum; i++) {
        const char *s;
        if (elf_section(e, i, out) == 0 &&
            (s = table_string(e->shstr, e->nshstr, out->sh_name)) && strcmp(s, name) == 0)
            return 0;
    }
    return -1;
}

/* The pairs of .nv.callgraph (see the top of the file): 0, or -1 when
 * they are not what they should be. */
static int read_callgraph(struct graph *g, const struct elf *e, const uint32_t *node,
                          const unsigned char *cg, size_t len)
{
    int block = 0;
    if (len % 8)
        return -1;
    for (size_t off = 0; off < len; off += 8) {
        int32_t a = (int32_t)u32(cg + off), b = (int32_t)u32(cg + off + 4);
        if (a == 0 && b < 0) {
            if (b < -CALLGRAPH_BLOCKS)
                return -1;
            block = -b;
            continue;
        }
        if (block == 0 || a <= 0 || (size_t)a >= e->nsyms)
            return -1;
        if (block == 2)
            continue;               /* address taken: the pointer calls cover it */
        if (block == 3) {
            if (node[a] != NO_NODE)
                g->indirect[node[a]] = 1;
            continue;
        }
        if (b < 0 || (size_t)b >= e->nsyms)
            return -1;
        if (graph_edge(g, node[a], node[b]) < 0)
            return -2;
    }
    return 0;
}

static int executable(const struct elf *e, unsigned i)
{
    Elf64_Shdr sh;
    return elf_section(e, i, &sh) == 0 && (sh.sh_flags & SHF_EXECINSTR);
}

/* Every relocation of code: an edge from the code's section to what it
 * names.  -1 on a malformed section, -2 out of memory. */
static int read_relocations(struct graph *g, const struct elf *e, const uint32_t *node)
{
    Elf64_Shdr sh;
    for (unsigned i = 1; i < e->eh.e_shnum; i++) {
        if (elf_section(e, i, &sh) < 0)
            return -1;
        if ((sh.sh_type != SHT_REL && sh.sh_type != SHT_RELA) || !executable(e, sh.sh_info))
            continue;
        size_t ent = sh.sh_type == SHT_RELA ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
        if (sh.sh_entsize != ent)
            return -1;
        for (size_t off = 0; off + ent <= sh.sh_size; off += ent) {
            uint64_t sym = ELF64_R_SYM(u64(e->p + sh.sh_offset + off + 8));
            if (sym >= e->nsyms)
                return -1;
            if (graph_edge(g, sh.sh_info, node[sym]) < 0)
                return -2;
        }
    }
    return 0;
}

static void elf_kernels(struct scan *sc, const struct elf *e, const struct graph *g)
{
    for (size_t i = 0; i < e->nsyms; i++) {
        Elf64_Sym s;
        const char *name;
        elf_sym(e, i, &s);
        if (ELF64_ST_TYPE(s.st_info) == STT_FUNC && (s.st_other & STO_CUDA_ENTRY) &&
            defined(e, &s) && (name = table_string(e->str, e->nstr, s.st_name)))
            found(sc, name, strlen(name), g && g->prints[s.st_shndx]);
    }
}

static void scan_elf(struct scan *sc, const unsigned char *p, size_t n)
{
    struct elf e;
    struct graph g = { 0 };
    uint32_t *node = NULL;
    Elf64_Shdr cg;
    int rc = -1, names_vprintf;

    if (elf_open(&e, p, n) < 0)
        goto out;
    uint32_t vp = e.eh.e_shnum;
    if (!(node = symbol_nodes(&e, vp, &names_vprintf))) {
        rc = -2;
        goto out;
    }
    if (!names_vprintf) {
        elf_kernels(sc, &e, NULL);      /* nothing here can print */
        rc = 0;
        goto out;
    }
    if (elf_find_section(&e, ".nv.callgraph", &cg) < 0 || cg.sh_type == SHT_NOBITS)
        goto out;
    if (graph_nodes(&g, vp + 1) < 0) {
        rc = -2;
        goto out;
    }
    g.prints[vp] = 1;
    if ((rc = read_callgraph(&g, &e, node, e.p + cg.sh_offset, cg.sh_size)) < 0 ||
        (rc = read_relocations(&g, &e, node)) < 0)
        goto out;
    if (graph_close(&g) < 0) {
        rc = -2;
        goto out;
    }
    elf_kernels(sc, &e, &g);
    rc = 0;
out:
    if (rc == -2)
        sc->oom = 1;
    if (rc < 0)
        sc->unknown = 1;
    free(node);
    graph_free(&g);
}

/* ---- PTX -------------------------------------------------------------------------------- */

struct token {
    const char *s;
    size_t len;             /* 0: the end */
};

struct lexer {
    const char *p, *end;
};

static int word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '$' || c == '.' || c == '%';
}

/* Whitespace, comments and string literals (of .file and pragmas). */
static void skip_blank(struct lexer *lx)
{
    while (lx->p < lx->end) {
        const char *p = lx->p;
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            lx->p++;
        } else if (*p == '/' && p + 1 < lx->end && p[1] == '/') {
            const char *nl = memchr(p, '\n', (size_t)(lx->end - p));
            lx->p = nl ? nl + 1 : lx->end;
        } else if (*p == '/' && p + 1 < lx->end && p[1] == '*') {
            const char *q = p + 2;
            while (q + 1 < lx->end && !(q[0] == '*' && q[1] == '/'))
                q++;
            lx->p = q + 1 < lx->end ? q + 2 : lx->end;
        } else if (*p == '"') {
            const char *q = memchr(p + 1, '"', (size_t)(lx->end - p - 1));
            lx->p = q ? q + 1 : lx->end;
        } else {
            return;
        }
    }
}

/* A word (identifiers, directives, opcodes, registers, numbers) or one
 * punctuation character. */
static struct token next_token(struct lexer *lx)
{
    struct token t = { lx->p, 0 };
    skip_blank(lx);
    t.s = lx->p;
    if (lx->p >= lx->end)
        return t;
    if (!word_char(*lx->p)) {
        lx->p++;
        t.len = 1;
        return t;
    }
    while (lx->p < lx->end && word_char(*lx->p))
        lx->p++;
    t.len = (size_t)(lx->p - t.s);
    return t;
}

static int is(struct token t, const char *s)
{
    return t.len == strlen(s) && memcmp(t.s, s, t.len) == 0;
}

/* `call`, `call.uni`...: not `callseq` or a name that begins so. */
static int is_call(struct token t)
{
    return is(t, "call") || (t.len > 5 && memcmp(t.s, "call.", 5) == 0);
}

static int is_word(struct token t)
{
    return t.len > 0 && word_char(t.s[0]);
}

/* Function names to nodes: open addressing, grown at half load. */
struct name_slot {
    const char *s;
    size_t len;
    uint32_t node;
};

struct ptx {
    struct graph g;
    struct name_slot *slot;
    size_t cap, used;
    struct name_slot *entries;  /* the .entry functions */
    size_t nentries, entries_cap;
    int bad;                    /* text it cannot follow */
    int oom;
};

static size_t name_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return (size_t)h;
}

static struct name_slot *name_find(struct name_slot *slot, size_t cap, const char *s,
                                   size_t len)
{
    size_t i = name_hash(s, len) & (cap - 1);
    while (slot[i].s && !(slot[i].len == len && memcmp(slot[i].s, s, len) == 0))
        i = (i + 1) & (cap - 1);
    return &slot[i];
}

static int names_grow(struct ptx *x)
{
    size_t cap = x->cap ? x->cap * 2 : 256;
    struct name_slot *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return -1;
    for (size_t i = 0; i < x->cap; i++)
        if (x->slot[i].s)
            *name_find(slot, cap, x->slot[i].s, x->slot[i].len) = x->slot[i];
    free(x->slot);
    x->slot = slot;
    x->cap = cap;
    return 0;
}

/* The node of a function name, made on first sight; NO_NODE when out of
 * memory. */
static uint32_t ptx_node(struct ptx *x, struct token name)
{
    if ((x->used + 1) * 2 > x->cap && names_grow(x) < 0) {
        x->oom = 1;
        return NO_NODE;
    }
    struct name_slot *s = name_find(x->slot, x->cap, name.s, name.len);
    if (s->s)
        return s->node;
    uint32_t node = graph_node(&x->g);
    if (node == NO_NODE) {
        x->oom = 1;
        return NO_NODE;
    }
    *s = (struct name_slot){ name.s, name.len, node };
    x->used++;
    if (is(name, "vprintf"))
        x->g.prints[node] = 1;
    return node;
}

static void ptx_entry(struct ptx *x, struct token name, uint32_t node)
{
    if (x->nentries == x->entries_cap) {
        size_t cap = x->entries_cap ? x->entries_cap * 2 : 64;
        struct name_slot *e = realloc(x->entries, cap * sizeof *e);
        if (!e) {
            x->oom = 1;
            return;
        }
        x->entries = e;
        x->entries_cap = cap;
    }
    x->entries[x->nentries++] = (struct name_slot){ name.s, name.len, node };
}

/* After a `call` in the body of caller: [(results),] target, ... */
static void ptx_call(struct ptx *x, struct lexer *lx, uint32_t caller)
{
    struct token t = next_token(lx);
    if (is(t, "(")) {
        while (t.len && !is(t, ")"))
            t = next_token(lx);
        if (!is(next_token(lx), ","))
            x->bad = 1;
        t = next_token(lx);
    }
    if (is_word(t) && t.s[0] != '%') {
        if (graph_edge(&x->g, caller, ptx_node(x, t)) < 0)
            x->oom = 1;
    } else {
        x->g.indirect[caller] = 1;      /* through a register, or unreadable */
    }
}

/* `.alias a, b;`: a is b. */
static void ptx_alias(struct ptx *x, struct lexer *lx)
{
    struct token a = next_token(lx), comma = next_token(lx), b = next_token(lx);
    if (!is_word(a) || !is(comma, ",") || !is_word(b)) {
        x->bad = 1;
        return;
    }
    if (graph_edge(&x->g, ptx_node(x, a), ptx_node(x, b)) < 0)
        x->oom = 1;
}

/* The module's text: functions declared at depth 0 by .entry or .func,
 * their name the first word outside parentheses that is not a directive,
 * their body the braces that follow (a `;` first: a declaration only);
 * other braces at depth 0 are initialisers. */
static void ptx_parse(struct ptx *x, const char *text, size_t n)
{
    struct lexer lx = { text, text + n };
    struct token t, name = { NULL, 0 };
    int depth = 0, parens = 0, declaring = 0, entry = 0;
    uint32_t current = NO_NODE;

    while (!x->oom && (t = next_token(&lx)).len) {
        if (depth > 0) {
            if (is(t, "{")) {
                depth++;
            } else if (is(t, "}")) {
                if (--depth == 0)
                    current = NO_NODE;
            } else if (current != NO_NODE && is_call(t)) {
                ptx_call(x, &lx, current);
            }
        } else if (is(t, ".entry") || is(t, ".func")) {
            declaring = 1;
            entry = is(t, ".entry");
            name.len = 0;
        } else if (is(t, ".alias")) {
            ptx_alias(x, &lx);
        } else if (is(t, "(")) {
            parens++;
        } else if (is(t, ")")) {
            parens--;
        } else if (is(t, ";") && parens == 0) {
            declaring = 0;
        } else if (is(t, "{")) {
            depth = 1;
            if (declaring && name.len) {
                current = ptx_node(x, name);
                if (entry && current != NO_NODE)
                    ptx_entry(x, name, current);
            }
            declaring = 0;
        } else if (is(t, "}")) {
            x->bad = 1;
        } else if (declaring && parens == 0 && !name.len && is_word(t) && t.s[0] != '.') {
            name = t;
        }
    }
    if (depth != 0 || parens != 0)
        x->bad = 1;
}

static void scan_ptx(struct scan *sc, const unsigned char *p, size_t n)
{
    struct ptx x;
    const unsigned char *nul = memchr(p, 0, n);
    memset(&x, 0, sizeof x);
    ptx_parse(&x, (const char *)p, nul ? (size_t)(nul - p) : n);
    if (!x.oom && !x.bad && graph_close(&x.g) < 0)
        x.oom = 1;
    if (x.oom || x.bad) {
        sc->unknown = 1;
        sc->oom |= x.oom;
    } else {
        for (size_t i = 0; i < x.nentries; i++)
            found(sc, x.entries[i].s, x.entries[i].len, x.g.prints[x.entries[i].node]);
    }
    free(x.slot);
    free(x.entries);
    graph_free(&x.g);
}

/* ---- fatbins ---------------------------------------------------------------------------- */

/* An entry's payload, decompressed into *out (to free) when it was
 * compressed: its bytes and length, or NULL when it cannot be read. */
static const unsigned char *entry_bytes(const unsigned char *h, const unsigned char *payload,
                                        size_t payload_len, unsigned char **out, size_t *len)
{
    uint64_t flags = u64(h + 40), usize = u64(h + 56);
    size_t csize = u32(h + 16);
    *out = NULL;
    *len = payload_len;
    if (!(flags & (ENTRY_LZ4 | ENTRY_ZSTD)))
        return payload;
    if ((flags & ENTRY_LZ4) && (flags & ENTRY_ZSTD))
        return NULL;
    if (csize > payload_len || csize > INT32_MAX || usize == 0 || usize > MAX_UNCOMPRESSED ||
        !(*out = malloc(usize)))
        return NULL;
    size_t got;
    if (flags & ENTRY_LZ4) {
        int n = LZ4_decompress_safe((const char *)payload, (char *)*out, (int)csize, (int)usize);
        got = n < 0 ? 0 : (size_t)n;
    } else {
        size_t n = ZSTD_decompress(*out, usize, payload, csize);
        got = ZSTD_isError(n) ? 0 : n;
    }
    if (got != usize) {
        free(*out);
        *out = NULL;
        return NULL;
    }
    *len = usize;
    return *out;
}

/* Whether one of the GPUs may run an entry for arch (major * 10 + minor):
 * a cubin runs on GPUs of its major version (with a minor as large, or of
 * its architecture or family alone: all count here), PTX is compiled for
 * GPUs of its version or newer. */
static int runs_on_gpus(const struct scan *sc, unsigned kind, uint32_t arch)
{
    for (size_t i = 0; i < sc->narchs; i++)
        if (kind == ENTRY_ELF ? sc->archs[i] / 10 == arch / 10 : arch <= sc->archs[i])
            return 1;
    return sc->narchs == 0;
}

static void scan_entry(struct scan *sc, const unsigned char *h, size_t header_len,
                       size_t payload_len)
{
    unsigned kind = u16(h);
    unsigned char *owned;
    size_t len;
    if (kind != ENTRY_PTX && kind != ENTRY_ELF) {
        sc->unknown = 1;
        return;
    }
    if (!runs_on_gpus(sc, kind, u32(h + 28)))
        return;                 /* the driver never loads it */
    const unsigned char *p = entry_bytes(h, h + header_len, payload_len, &owned, &len);
    if (!p)
        sc->unknown = 1;
    else if (kind == ENTRY_ELF)
        scan_elf(sc, p, len);
    else
        scan_ptx(sc, p, len);
    free(owned);
}

/* The entries of one container's n bytes; fewer bytes than a header at
 * the end are padding. */
static void scan_entries(struct scan *sc, const unsigned char *p, size_t n)
{
    size_t off = 0;
    while (!sc->unknown && n - off >= ENTRY_HEADER_MIN) {
        uint32_t header_len = u32(p + off + 4);
        uint64_t payload_len = u64(p + off + 8);
        if (header_len < ENTRY_HEADER_MIN || !inside(off, header_len, n) ||
            !inside(off + header_len, payload_len, n)) {
            sc->unknown = 1;
            return;
        }
        scan_entry(sc, p + off, header_len, payload_len);
        off += header_len + payload_len;
    }
}

static int zeros(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* Containers back to back (zero bytes between them are padding). */
static void scan_fatbin(struct scan *sc, const unsigned char *p, size_t n)
{
    size_t off = 0;
    while (!sc->unknown && off < n && !zeros(p + off, n - off)) {
        while (p[off] == 0)
            off++;
        if (n - off < FATBIN_HEADER || u32(p + off) != FATBIN_MAGIC) {
            sc->unknown = 1;
            return;
        }
        uint16_t header_len = u16(p + off + 6);
        uint64_t fat_len = u64(p + off + 8);
        if (header_len < FATBIN_HEADER || !inside(off + header_len, fat_len, n)) {
            sc->unknown = 1;
            return;
        }
        scan_entries(sc, p + off + header_len, fat_len);
        off += header_len + fat_len;
    }
}

/* ---- the result ------------------------------------------------------------------------- */

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int listed(const struct names *sorted, const char *name)
{
    return sorted->n && bsearch(&name, sorted->v, sorted->n, sizeof *sorted->v, compare_names);
}

/* The clean kernels, less those that print in another entry, once each:
 * into s->clean (the strings move there). */
static void settle(struct scan *sc, struct rgpu_print_scan *s)
{
    if (sc->clean.n)
        qsort(sc->clean.v, sc->clean.n, sizeof *sc->clean.v, compare_names);
    if (sc->printing.n)
        qsort(sc->printing.v, sc->printing.n, sizeof *sc->printing.v, compare_names);
    size_t kept = 0;
    for (size_t i = 0; i < sc->clean.n; i++) {
        char *name = sc->clean.v[i];
        if ((kept && strcmp(sc->clean.v[kept - 1], name) == 0) || listed(&sc->printing, name))
            free(name);
        else
            sc->clean.v[kept++] = name;
    }
    sc->clean.n = kept;
    s->clean = sc->clean.v;
    s->nclean = kept;
    s->any_prints = sc->printing.n > 0;
    memset(&sc->clean, 0, sizeof sc->clean);
}

int rgpu_print_scan(const void *image, size_t size, const unsigned *archs, size_t narchs,
                    struct rgpu_print_scan *s)
{
    struct scan sc;
    const unsigned char *p = image;
    memset(&sc, 0, sizeof sc);
    memset(s, 0, sizeof *s);
    sc.archs = archs;
    sc.narchs = archs ? narchs : 0;

    if (!p || size == 0)
        sc.unknown = 1;
    else if (size >= 4 && u32(p) == FATBIN_MAGIC)
        scan_fatbin(&sc, p, size);
    else if (size >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0)
        scan_elf(&sc, p, size);
    else
        scan_ptx(&sc, p, size);
    if (!sc.unknown && !sc.oom)
        settle(&sc, s);
    else
        s->unknown = s->any_prints = 1;
    names_free(&sc.clean);
    names_free(&sc.printing);
    return sc.oom ? -1 : 0;
}

int rgpu_print_scan_may_print(const struct rgpu_print_scan *s, const char *name)
{
    struct names sorted = { s->clean, s->nclean, s->nclean };
    return s->unknown || !name || !listed(&sorted, name);
}

void rgpu_print_scan_free(struct rgpu_print_scan *s)
{
    for (size_t i = 0; i < s->nclean; i++)
        free(s->clean[i]);
    free(s->clean);
    memset(s, 0, sizeof *s);
}
