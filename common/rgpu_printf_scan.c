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
#include "rgpu_fatbin.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The most a compressed fatbin entry may declare it holds. */
#define MAX_UNCOMPRESSED (1ull << 30)

#define EM_CUDA_MACHINE 190
#define STO_CUDA_ENTRY 0x10         /* st_other of a __global__ function */
#define CALLGRAPH_BLOCKS 4

#define NO_NODE UINT32_MAX

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

/* A cubin with its symbol table. */
struct cubin {
    struct rgpu_elf elf;
    unsigned symtab, strtab;        /* the symbol table's section and its names' */
    size_t nsyms;
};

/* Symbol i (< nsyms: always inside its table). */
static void cubin_sym(const struct cubin *c, size_t i, Elf64_Sym *s)
{
    if (rgpu_elf_entry(&c->elf, c->symtab, i, s, sizeof *s) < 0)
        memset(s, 0, sizeof *s);
}

/* The first symbol table, every section before it inside the image. */
static int cubin_symtab(struct cubin *c)
{
    const struct rgpu_elf *e = &c->elf;
    for (unsigned i = 1; i < e->eh.e_shnum; i++) {
        const Elf64_Shdr *sh = &e->sh[i];
        if (!rgpu_elf_section_inside(e, i))
            return -1;
        if (sh->sh_type != SHT_SYMTAB)
            continue;
        if (sh->sh_entsize != sizeof(Elf64_Sym) || !rgpu_elf_section_inside(e, sh->sh_link) ||
            e->sh[sh->sh_link].sh_type != SHT_STRTAB)
            return -1;
        c->symtab = i;
        c->strtab = sh->sh_link;
        c->nsyms = sh->sh_size / sizeof(Elf64_Sym);
        return 0;
    }
    return -1;
}

/* rgpu_elf_close() after, whatever it returns. */
static int cubin_open(struct cubin *c, const unsigned char *p, size_t n)
{
    memset(c, 0, sizeof *c);
    if (rgpu_elf_open(&c->elf, p, n) != RGPU_ELF_OK || c->elf.eh.e_machine != EM_CUDA_MACHINE ||
        !rgpu_elf_section_inside(&c->elf, c->elf.eh.e_shstrndx))
        return -1;
    return cubin_symtab(c);
}

static int is_vprintf(const struct cubin *c, const Elf64_Sym *s)
{
    const char *name = rgpu_elf_string(&c->elf, c->strtab, s->st_name);
    return s->st_shndx == SHN_UNDEF && name && strcmp(name, "vprintf") == 0;
}

static int defined(const struct cubin *c, const Elf64_Sym *s)
{
    return s->st_shndx != SHN_UNDEF && s->st_shndx < SHN_LORESERVE &&
           s->st_shndx < c->elf.eh.e_shnum;
}

/* The node of each symbol: its section's (node i is section i), vprintf's
 * (node vp), or none (other undefined symbols: the driver's functions). */
static uint32_t *symbol_nodes(const struct cubin *c, uint32_t vp, int *names_vprintf)
{
    uint32_t *node = malloc((c->nsyms ? c->nsyms : 1) * sizeof *node);
    *names_vprintf = 0;
    for (size_t i = 0; node && i < c->nsyms; i++) {
        Elf64_Sym s;
        cubin_sym(c, i, &s);
        node[i] = defined(c, &s) ? s.st_shndx : is_vprintf(c, &s) ? vp : NO_NODE;
        if (node[i] == vp)
            *names_vprintf = 1;
    }
    return node;
}

/* The first section of that name; 0 when there is none. */
static unsigned find_section(const struct cubin *c, const char *name)
{
    const struct rgpu_elf *e = &c->elf;
    for (unsigned i = 1; i < e->eh.e_shnum; i++) {
        const char *s = rgpu_elf_string(e, e->eh.e_shstrndx, e->sh[i].sh_name);
        if (s && strcmp(s, name) == 0)
            return i;
    }
    return 0;
}

/* The pairs of .nv.callgraph (see the top of the file): 0, or -1 when
 * they are not what they should be. */
static int read_callgraph(struct graph *g, const struct cubin *c, const uint32_t *node,
                          const unsigned char *cg, size_t len)
{
    int block = 0;
    if (len % 8)
        return -1;
    for (size_t off = 0; off < len; off += 8) {
        int32_t a = (int32_t)rgpu_get32(cg + off), b = (int32_t)rgpu_get32(cg + off + 4);
        if (a == 0 && b < 0) {
            if (b < -CALLGRAPH_BLOCKS)
                return -1;
            block = -b;
            continue;
        }
        if (block == 0 || a <= 0 || (size_t)a >= c->nsyms)
            return -1;
        if (block == 2)
            continue;               /* address taken: the pointer calls cover it */
        if (block == 3) {
            if (node[a] != NO_NODE)
                g->indirect[node[a]] = 1;
            continue;
        }
        if (b < 0 || (size_t)b >= c->nsyms)
            return -1;
        if (graph_edge(g, node[a], node[b]) < 0)
            return -2;
    }
    return 0;
}

static int executable(const struct rgpu_elf *e, unsigned i)
{
    return rgpu_elf_section_inside(e, i) && (e->sh[i].sh_flags & SHF_EXECINSTR);
}

/* Every relocation of code: an edge from the code's section to what it
 * names.  -1 on a malformed section, -2 out of memory. */
static int read_relocations(struct graph *g, const struct cubin *c, const uint32_t *node)
{
    const struct rgpu_elf *e = &c->elf;
    for (unsigned i = 1; i < e->eh.e_shnum; i++) {
        const Elf64_Shdr *sh = &e->sh[i];
        if (!rgpu_elf_section_inside(e, i))
            return -1;
        if ((sh->sh_type != SHT_REL && sh->sh_type != SHT_RELA) || !executable(e, sh->sh_info))
            continue;
        size_t ent = sh->sh_type == SHT_RELA ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
        if (sh->sh_entsize != ent)
            return -1;
        Elf64_Rela r;
        for (uint64_t k = 0; rgpu_elf_relocation(e, i, k, &r) == 0; k++) {
            uint64_t sym = ELF64_R_SYM(r.r_info);
            if (sym >= c->nsyms)
                return -1;
            if (graph_edge(g, sh->sh_info, node[sym]) < 0)
                return -2;
        }
    }
    return 0;
}

static void cubin_kernels(struct scan *sc, const struct cubin *c, const struct graph *g)
{
    for (size_t i = 0; i < c->nsyms; i++) {
        Elf64_Sym s;
        const char *name;
        cubin_sym(c, i, &s);
        if (ELF64_ST_TYPE(s.st_info) == STT_FUNC && (s.st_other & STO_CUDA_ENTRY) &&
            defined(c, &s) && (name = rgpu_elf_string(&c->elf, c->strtab, s.st_name)))
            found(sc, name, strlen(name), g && g->prints[s.st_shndx]);
    }
}

static void scan_elf(struct scan *sc, const unsigned char *p, size_t n)
{
    struct cubin c;
    struct graph g = { 0 };
    uint32_t *node = NULL;
    unsigned cg;
    int rc = -1, names_vprintf;

    if (cubin_open(&c, p, n) < 0)
        goto out;
    uint32_t vp = c.elf.eh.e_shnum;
    if (!(node = symbol_nodes(&c, vp, &names_vprintf))) {
        rc = -2;
        goto out;
    }
    if (!names_vprintf) {
        cubin_kernels(sc, &c, NULL);    /* nothing here can print */
        rc = 0;
        goto out;
    }
    cg = find_section(&c, ".nv.callgraph");
    if (!cg || !rgpu_elf_section_inside(&c.elf, cg) || c.elf.sh[cg].sh_type == SHT_NOBITS)
        goto out;
    if (graph_nodes(&g, vp + 1) < 0) {
        rc = -2;
        goto out;
    }
    g.prints[vp] = 1;
    if ((rc = read_callgraph(&g, &c, node, rgpu_elf_section_bytes(&c.elf, cg),
                             c.elf.sh[cg].sh_size)) < 0 ||
        (rc = read_relocations(&g, &c, node)) < 0)
        goto out;
    if (graph_close(&g) < 0) {
        rc = -2;
        goto out;
    }
    cubin_kernels(sc, &c, &g);
    rc = 0;
out:
    if (rc == -2)
        sc->oom = 1;
    if (rc < 0)
        sc->unknown = 1;
    free(node);
    graph_free(&g);
    rgpu_elf_close(&c.elf);
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

/* Whether one of the GPUs may run an entry for arch (major * 10 + minor):
 * a cubin runs on GPUs of its major version (with a minor as large, or of
 * its architecture or family alone: all count here), PTX is compiled for
 * GPUs of its version or newer. */
static int runs_on_gpus(const struct scan *sc, unsigned kind, uint32_t arch)
{
    for (size_t i = 0; i < sc->narchs; i++)
        if (kind == RGPU_FATBIN_ELF ? sc->archs[i] / 10 == arch / 10 : arch <= sc->archs[i])
            return 1;
    return sc->narchs == 0;
}

static void scan_entry(struct scan *sc, const struct rgpu_fatbin_entry *e)
{
    const unsigned char *p = e->payload;
    size_t len = e->payload_size;
    unsigned char *plain = NULL;
    if (e->kind != RGPU_FATBIN_PTX && e->kind != RGPU_FATBIN_ELF) {
        sc->unknown = 1;
        return;
    }
    if (!runs_on_gpus(sc, e->kind, e->arch))
        return;                 /* the driver never loads it */
    if (rgpu_fatbin_compressed(e)) {
        if (rgpu_fatbin_decompress(e, MAX_UNCOMPRESSED, &plain) != RGPU_FATBIN_OK) {
            sc->unknown = 1;
            return;
        }
        p = plain;
        len = e->plain_size;
    }
    if (e->kind == RGPU_FATBIN_ELF)
        scan_elf(sc, p, len);
    else
        scan_ptx(sc, p, len);
    free(plain);
}

static void scan_entries(struct scan *sc, const struct rgpu_fatbin_container *c)
{
    struct rgpu_fatbin_entry e;
    uint64_t off = 0;
    int more = 0;
    while (!sc->unknown && (more = rgpu_fatbin_next_entry(c, &off, &e)) > 0)
        scan_entry(sc, &e);
    if (more < 0)
        sc->unknown = 1;
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
        struct rgpu_fatbin_container c;
        while (p[off] == 0)
            off++;
        if (rgpu_fatbin_container(p, n, off, &c) != RGPU_FATBIN_OK) {
            sc->unknown = 1;
            return;
        }
        scan_entries(sc, &c);
        off = c.end;
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
    else if (size >= 4 && rgpu_get32(p) == RGPU_FATBIN_MAGIC)
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
