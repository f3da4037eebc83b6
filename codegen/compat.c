/* rgpu-gen --compat: a stub library for an older major of a CUDA library
 * (libcudart.so.12 beside libcudart.so.13), made of the newer stub's code.
 *
 *   rgpu-gen --compat ANNOTATIONS NEW_ROOT NEW_REF NEW_COVERAGE OLD_ROOT OLD_REF OLD_SONAME
 *                     OUTDIR [FLAG]
 *
 * The older library must export exactly what its real counterpart (OLD_REF,
 * a library or an export list) exports, under its own version node.  Each
 * of those functions is either
 *   - the same function as in the newer release: exported by the newer
 *     library too, and every type it passes spelled out the same in both
 *     releases' headers (parse.c's ABI signatures: sizes, field offsets,
 *     through pointers).  The newer stub's code serves it, and the session
 *     replays it with the same procedure; or
 *   - refused: missing from the newer library, or passing a type whose
 *     layout differs (cudaDeviceProp): the old caller's bytes would be
 *     misread.  Its stub returns the not-supported status and names the
 *     release in its log line.
 * A function defined (RGPU_EXPORT NAME(...)) in stubs/cuda12/<lib>12_*.c,
 * beside codegen/, is served there for the old layout instead.
 * A function the newer stub refuses (NEW_COVERAGE, its coverage report)
 * keeps that stub, which ignores its arguments whatever their layout.
 * FLAG is one more compiler flag for the old headers (-DCUBLASAPI=).
 *
 * Output in OUTDIR, named after the library and the old major (cudart12):
 *   cudart12.map           the version script: OLD_SONAME's node, its exports
 *   cudart12_refused.c     the refused stubs
 *   cudart12_renames.h     force-included when compiling the newer stub's
 *                          code for the old library: gives the functions
 *                          refused here other symbol names there, so that
 *                          the newer definitions stay inside (their callers
 *                          in that code follow them).  A pragma, not a macro:
 *                          that code #undefs the names CUDA's headers define
 *   cudart12-coverage.txt  every export: same, or refused and why
 *   cudart12-layouts.txt   the functions whose prototypes differ, and where
 *   cudart12_names.c       for rgpud: the CUDA 12 function behind each CUDA 13
 *                          procedure, where one takes the same bytes
 */
#include "rgpu-gen.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct compat_fn {
    const char *name;
    const char *hand_file;      /* stubs/cuda12/<lib>12_*.c serves it for the old layout */
    const char *reason;         /* NULL: the same function in both releases */
    char detail[512];           /* for the layouts report */
    int extended;               /* the newer layout extends the older (detail says how) */
};

static int listed(char **names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* ---- layouts one release extends compatibly --------------------------------
 *
 * Minor releases, and CUDA 13 for many of CUDA 12's structures, add fields
 * where the older headers had reserved bytes, and alternatives to unions,
 * keeping every size and every older field where it was.  An older caller's
 * bytes then mean the same to the newer library (the fields it leaves
 * reserved are the new ones, which the headers ask to be zero), and a newer
 * library's answer holds the older fields where an older caller reads them.
 * parse.c's signatures are flattened here into their leaves (scalars,
 * pointers, arrays, enums, function pointers, handles) with their bit
 * offsets, each pointer's pointee a space of its own, to check exactly
 * that: every older leaf that is not reserved is in the newer layout at the
 * same place with the same type, and every record pointed at or passed has
 * the same size. */

struct leaf {
    char space[96];         /* "" for the parameter, "@64*" for what a pointer there points at */
    long offset;            /* in bits */
    char *type;             /* spelled out whole, as the signature has it */
    char name[64];
    int reserved;
    int record;             /* a record's own entry: type holds "{SIZE" */
    int outer;              /* the record a space is (the parameter's, a pointee's) */
};

struct leaves {
    struct leaf *v;
    int n, cap;
};

static void add_leaf(struct leaves *out, const char *space, long offset, const char *type,
                     size_t typelen, const char *name, int reserved, int record)
{
    if (!out)
        return;
    if (out->n == out->cap) {
        out->cap = out->cap ? out->cap * 2 : 64;
        out->v = realloc(out->v, (size_t)out->cap * sizeof *out->v);
        if (!out->v)
            die("out of memory");
    }
    int first = 1;
    for (int i = 0; i < out->n && first; i++)
        first = strcmp(out->v[i].space, space) != 0;
    struct leaf *l = &out->v[out->n++];
    l->outer = record && first;
    snprintf(l->space, sizeof l->space, "%s", space);
    l->offset = offset;
    l->type = xcalloc(1, typelen + 1);
    memcpy(l->type, type, typelen);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->reserved = reserved;
    l->record = record;
}

static void free_leaves(struct leaves *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i].type);
    free(l->v);
}

/* Fields the headers keep for later: reserved, _internal_padding, pad... */
static int reserved_name(const char *name)
{
    return name[0] == '_' || strncmp(name, "reserved", 8) == 0 ||
           strncmp(name, "pad", 3) == 0 || strncmp(name, "unused", 6) == 0;
}

static int type_ends(char c)
{
    return c == '\0' || c == ';' || c == ',' || c == ')' || c == '}';
}

static void flatten(const char **p, const char *space, long base, const char *name,
                    int reserved, struct leaves *out);

/* The record at *p ("{SIZE:name@OFF:TYPE;...}"). */
static void flatten_record(const char **p, const char *space, long base, const char *name,
                           int reserved, struct leaves *out)
{
    char *end;
    long size = strtol(*p + 1, &end, 10);
    if (*end != ':')
        die("unreadable signature at '%.40s'", *p);
    add_leaf(out, space, base, *p, (size_t)(end - *p), name, reserved, 1);
    (void)size;
    *p = end + 1;
    while (**p && **p != '}') {
        char field[64];
        const char *at = strchr(*p, '@');
        if (!at || at - *p >= (long)sizeof field)
            die("unreadable signature at '%.40s'", *p);
        snprintf(field, sizeof field, "%.*s", (int)(at - *p), *p);
        long off = strtol(at + 1, &end, 10);
        if (*end != ':')
            die("unreadable signature at '%.40s'", at);
        *p = end + 1;
        flatten(p, space, base + off, field, reserved || reserved_name(field), out);
        if (**p != ';')
            die("unreadable signature at '%.40s'", *p);
        (*p)++;
    }
    if (**p == '}')
        (*p)++;
}

/* One type of a signature (parse.c's sig_type spells them), from *p. */
static void flatten(const char **p, const char *space, long base, const char *name,
                    int reserved, struct leaves *out)
{
    const char *start = *p;
    if (strncmp(*p, "const ", 6) == 0)
        *p += 6;
    if (**p == '*') {
        char pointee[96];
        (*p)++;
        add_leaf(out, space, base, "*", 1, name, reserved, 0);
        snprintf(pointee, sizeof pointee, "%s@%ld*", space, base);
        if (!type_ends(**p))
            flatten(p, pointee, 0, name, reserved, out);
        return;
    }
    if (**p == '[') {           /* an array: one leaf, spelled out whole */
        const char *close = strchr(*p, ']');
        if (!close)
            die("unreadable signature at '%.40s'", *p);
        *p = close + 1;
        flatten(p, space, base, name, reserved, NULL);
        add_leaf(out, space, base, start, (size_t)(*p - start), name, reserved, 0);
        return;
    }
    if (**p == '{') {
        flatten_record(p, space, base, name, reserved, out);
        return;
    }
    if (strncmp(*p, "fn(", 3) == 0) {
        *p += 3;
        while (**p && **p != ')') {
            flatten(p, "", 0, "", 0, NULL);
            if (**p == ',')
                (*p)++;
        }
        if (**p == ')')
            (*p)++;
        flatten(p, "", 0, "", 0, NULL);
    } else {                    /* handle, enumN, or a scalar: letters and a size */
        while (isalpha((unsigned char)**p) || **p == '_')
            (*p)++;
        while (isdigit((unsigned char)**p) || **p == '-')
            (*p)++;
    }
    add_leaf(out, space, base, start, (size_t)(*p - start), name, reserved, 0);
}

static const struct leaf *find_leaf(const struct leaves *l, const struct leaf *want)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i].offset == want->offset && l->v[i].record == want->record &&
            l->v[i].outer == want->outer && strcmp(l->v[i].space, want->space) == 0 &&
            strcmp(l->v[i].type, want->type) == 0)
            return &l->v[i];
    return NULL;
}

/* Whether an older leaf of this name sits where l does (l is not new). */
static int named_in(const struct leaves *o, const struct leaf *l)
{
    for (int i = 0; i < o->n; i++)
        if (o->v[i].offset == l->offset && strcmp(o->v[i].name, l->name) == 0 &&
            strcmp(o->v[i].space, l->space) == 0)
            return 1;
    return 0;
}

/* Whether the older record a pointer leads to fits in the newer one: as
 * large or larger (the older library then reads and writes a prefix of
 * the newer caller's record: CUDA 13's cudaPointerAttributes is CUDA 12's
 * with a reserved tail).  By value a record keeps its size exactly. */
static int fits(const struct leaves *n, const struct leaf *old)
{
    for (int i = 0; i < n->n; i++)
        if (n->v[i].outer && strcmp(n->v[i].space, old->space) == 0)
            return atol(n->v[i].type + 1) >= atol(old->type + 1);
    return 0;
}

/* Whether the newer type extends the older as the comment above says; the
 * newer fields' names go in added ("a, b").  larger: what a pointer leads
 * to may have grown (fits()), for an older library given newer bytes. */
static int extends_as(const char *old_sig, const char *new_sig, char *added, size_t addedlen,
                      int larger)
{
    struct leaves o = { 0 }, n = { 0 };
    const char *p = old_sig, *q = new_sig;
    int ok = 1;
    flatten(&p, "", 0, "", 0, &o);
    flatten(&q, "", 0, "", 0, &n);
    for (int i = 0; ok && i < o.n; i++) {
        const struct leaf *l = &o.v[i];
        /* Records: a space's own record keeps its size; inner ones may grow
         * into reserved bytes, their fields are checked one by one. */
        if (l->record ? l->outer && !find_leaf(&n, l) && !(larger && l->space[0] && fits(&n, l))
                      : !l->reserved && !find_leaf(&n, l))
            ok = 0;
    }
    added[0] = '\0';
    for (int i = 0; ok && i < n.n; i++) {
        const struct leaf *l = &n.v[i];
        if (l->record || l->reserved || !l->name[0] || named_in(&o, l))
            continue;
        size_t len = strlen(added);
        if (strstr(added, l->name) == NULL && len + strlen(l->name) + 3 < addedlen)
            snprintf(added + len, addedlen - len, "%s%s", len ? ", " : "", l->name);
    }
    free_leaves(&o);
    free_leaves(&n);
    return ok;
}

static int extends(const char *old_sig, const char *new_sig, char *added, size_t addedlen)
{
    return extends_as(old_sig, new_sig, added, addedlen, 0);
}

/* Whether every parameter of the newer prototype equals or extends the
 * older's (and the return types agree); the detail says what was added. */
static int extended(struct compat_fn *c, const struct gen_func *newf, const struct gen_func *oldf,
                    const char *new_release)
{
    char added[384], all[sizeof c->detail] = "";
    if (strcmp(newf->ret, oldf->ret) != 0)
        return 0;
    for (int k = 0; k < oldf->nparams; k++) {
        if (strcmp(newf->params[k].abi, oldf->params[k].abi) == 0)
            continue;
        if (!extends(oldf->params[k].abi, newf->params[k].abi, added, sizeof added))
            return 0;
        size_t len = strlen(all);
        snprintf(all + len, sizeof all - len, "%sparameter %d (%s): CUDA %s adds %s",
                 len ? "; " : "", k + 1, oldf->params[k].type, new_release,
                 added[0] ? added : "nothing named (only reserved bytes change)");
    }
    snprintf(c->detail, sizeof c->detail, "extended, the same bytes: %s", all);
    c->extended = 1;
    return 1;
}

/* Why the old function cannot be the new one, or NULL when it can. */
static const char *compare(struct compat_fn *c, const struct gen_func *newf,
                           const struct gen_func *oldf, int in_new, const char *new_release)
{
    static char buf[8192];
    if (!in_new) {
        snprintf(buf, sizeof buf, "not in CUDA %s, whose functions rgpu serves this client "
                 "through", new_release);
        return xstrdup(buf);
    }
    if (!newf && !oldf)
        return NULL;    /* declared by neither: hand-written, same name (nvcc's entry points) */
    if (!newf || !oldf)
        return "declared by only one release's headers: cannot be compared";
    if (strcmp(newf->abi, oldf->abi) == 0)
        return NULL;
    if (newf->nparams == oldf->nparams && extended(c, newf, oldf, new_release))
        return NULL;
    if (newf->nparams != oldf->nparams) {
        snprintf(c->detail, sizeof c->detail, "%d parameters, %d in CUDA %s", oldf->nparams,
                 newf->nparams, new_release);
    } else {
        for (int k = 0; k < oldf->nparams; k++)
            if (strcmp(newf->params[k].abi, oldf->params[k].abi) != 0) {
                snprintf(c->detail, sizeof c->detail, "parameter %d (%s %s): its layout "
                         "differs from CUDA %s's (%s)", k + 1, oldf->params[k].type,
                         oldf->params[k].name, new_release, newf->params[k].type);
                break;
            }
        if (!c->detail[0])
            snprintf(c->detail, sizeof c->detail, "return type %s, %s in CUDA %s", oldf->ret,
                     newf->ret, new_release);
    }
    snprintf(buf, sizeof buf, "its prototype differs from CUDA %s's: %s", new_release,
             c->detail);
    return xstrdup(buf);
}

/* The functions the newer stub refuses, from its coverage report. */
static char **refused_by_new(const char *coverage, int *n)
{
    FILE *f = fopen(coverage, "r");
    char line[4096], name[256], disp[32];
    int count = 0, cap = 256;
    char **out = xcalloc((size_t)cap, sizeof *out);
    if (!f)
        die("%s: cannot read", coverage);
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%255s %31s", name, disp) != 2 || strcmp(disp, "refused") != 0)
            continue;
        if (count == cap) {
            cap *= 2;
            out = realloc(out, (size_t)cap * sizeof *out);
            if (!out)
                die("out of memory");
        }
        out[count++] = xstrdup(name);
    }
    fclose(f);
    *n = count;
    return out;
}

/* Whether the newer stub's code defines this refused function, which must
 * then take another symbol name in the old library. */
static int renamed(const struct compat_fn *c, char **newx, int nnew, char **new_refused,
                   int nnew_refused)
{
    return (c->reason || c->hand_file) && listed(newx, nnew, c->name) &&
           !listed(new_refused, nnew_refused, c->name);
}

/* The newer prototype, parameters unnamed (every type spelling is then a
 * valid abstract declarator, arrays and function pointers included). */
static void declare(FILE *f, const struct gen_func *fn)
{
    if (!fn)
        return;
    fprintf(f, "%s %s(", fn->ret, fn->name);
    for (int k = 0; k < fn->nparams; k++)
        fprintf(f, "%s%s", k ? ", " : "", fn->params[k].type);
    fprintf(f, "%s);\n", fn->nparams ? "" : "void");
}

/* The file of stubs/cuda12 beside codegen/ (the annotations' folder) that
 * defines name for stem (cudart12_*.c), or NULL. */
static const char *hand_file(const char *ann_path, const char *stem, const char *name)
{
    static char found[512];
    char dir[4096], path[8192], line[1024];
    const char *slash = strrchr(ann_path, '/');
    snprintf(dir, sizeof dir, "%.*s/../stubs/cuda12", slash ? (int)(slash - ann_path) : 1,
             slash ? ann_path : ".");
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    const char *result = NULL;
    size_t stemlen = strlen(stem), namelen = strlen(name);
    for (struct dirent *e; !result && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, stem, stemlen) != 0 || e->d_name[stemlen] != '_' || n < 2 ||
            strcmp(e->d_name + n - 2, ".c") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        while (f && !result && fgets(line, sizeof line, f)) {
            char *at = strncmp(line, "RGPU_EXPORT ", 12) == 0 ? strstr(line, name) : NULL;
            if (at && at[namelen] == '(' && (at[-1] == ' ' || at[-1] == '*')) {
                snprintf(found, sizeof found, "stubs/cuda12/%s", e->d_name);
                result = found;
            }
        }
        if (f)
            fclose(f);
    }
    closedir(d);
    return result ? xstrdup(result) : NULL;
}

static void emit_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static FILE *open_out(const char *outdir, const char *stem, const char *suffix)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s", outdir, stem, suffix);
    FILE *f = fopen(path, "w");
    if (!f)
        die("%s: cannot write", path);
    return f;
}

/* "libcudart.so.12" -> "12", and of an export list, "libcudart.so.13.exports"
 * -> "13" */
static const char *major_of(const char *soname)
{
    static char majors[2][16];
    static int next;
    const char *v = strstr(soname, ".so.");
    size_t n = v ? strspn(v + 4, "0123456789") : 0;
    if (!n || n >= sizeof majors[0])
        die("%s: not a versioned soname", soname);
    char *out = majors[next++ % 2];
    memcpy(out, v + 4, n);
    out[n] = '\0';
    return out;
}

/* ---- the older library behind the newer procedures (rgpud) ---------------
 *
 * A session may serve an older major's client with that major's own
 * libraries (rgpud --cuda12-lib-dir).  Its procedures are the newer
 * release's, so each must reach the older library's function that takes
 * the same bytes: the same name where the older prototype equals the newer
 * or the newer extends it, else the older release's versioned name of it
 * (CUDA 13's cudaStreamGetCaptureInfo is CUDA 12's
 * cudaStreamGetCaptureInfo_v3, _ptsz forms alike), else none: the session
 * refuses the procedure (daemon/backend.c). */

/* Whether the older function takes what the newer one is given. */
static int same_bytes(const struct gen_func *newf, const struct gen_func *oldf)
{
    char added[384];
    if (!newf || !oldf)
        return !newf && !oldf;      /* declared by neither: nvcc's entry points */
    if (strcmp(newf->abi, oldf->abi) == 0)
        return 1;
    if (newf->nparams != oldf->nparams || strcmp(newf->ret, oldf->ret) != 0)
        return 0;
    for (int k = 0; k < newf->nparams; k++)
        if (strcmp(newf->params[k].abi, oldf->params[k].abi) != 0 &&
            !extends_as(oldf->params[k].abi, newf->params[k].abi, added, sizeof added, 1))
            return 0;
    return 1;
}

/* The older export taking what the newer `name` is given, or NULL. */
static const char *older_name(const char *name, struct gen_func *newf, int nnew_funcs,
                              struct gen_func *oldf, int nold_funcs, char **oldx, int nold)
{
    static char cand[256];
    const struct gen_func *n = gen_find_func(newf, nnew_funcs, name);
    size_t len = strlen(name);
    const char *suffix = len > 5 && (strcmp(name + len - 5, "_ptsz") == 0 ||
                                     strcmp(name + len - 5, "_ptds") == 0)
                             ? name + len - 5 : "";
    int stem = (int)(len - strlen(suffix));
    for (int v = 1; v <= 9; v++) {
        if (v == 1)
            snprintf(cand, sizeof cand, "%s", name);
        else
            snprintf(cand, sizeof cand, "%.*s_v%d%s", stem, name, v, suffix);
        if (listed(oldx, nold, cand) && same_bytes(n, gen_find_func(oldf, nold_funcs, cand)))
            return cand;
    }
    return NULL;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* OUTDIR/<stem>_names.c: {newer name, older name} for every newer export
 * the older library can serve, sorted by the newer name. */
static void emit_older_names(const char *outdir, const char *stem, const char *soname,
                             const char *new_release, struct gen_func *newf,
                             int nnew_funcs, char **newx, int nnew, struct gen_func *oldf,
                             int nold_funcs, char **oldx, int nold)
{
    FILE *f = open_out(outdir, stem, "_names.c");
    char **sorted = xcalloc((size_t)nnew, sizeof *sorted);
    memcpy(sorted, newx, (size_t)nnew * sizeof *sorted);
    qsort(sorted, (size_t)nnew, sizeof *sorted, cmp_name);
    fprintf(f, "/* Generated by rgpu-gen --compat: for each function of CUDA %s's library, the "
            "function of %s\n * that takes the same bytes (rgpud serving this major with its "
            "own libraries). */\n#include \"older_names.h\"\n\n", new_release, soname);
    fprintf(f, "const struct rgpu_older_name rgpu_%s_names[] = {\n", stem);
    int count = 0;
    for (int i = 0; i < nnew; i++) {
        const char *o = older_name(sorted[i], newf, nnew_funcs, oldf, nold_funcs, oldx, nold);
        if (!o)
            continue;
        fprintf(f, "    { \"%s\", \"%s\" },\n", sorted[i], o);
        count++;
    }
    fprintf(f, "};\nconst unsigned rgpu_%s_nnames = %d;\n", stem, count);
    fclose(f);
    free(sorted);
}

int compat_main(int argc, char **argv)
{
    struct annotations ann;
    int nnew_funcs, nold_funcs, nnew, nold, nnew_refused;
    if (argc != 9 && argc != 10)
        die("usage: rgpu-gen --compat ANNOTATIONS NEW_ROOT NEW_REF NEW_COVERAGE OLD_ROOT OLD_REF "
            "OLD_SONAME OUTDIR [FLAG]");
    const char *new_root = argv[2], *old_root = argv[5], *soname = argv[7], *outdir = argv[8];
    ann_load(argv[1], &ann);
    struct gen_func *newf = parse_headers(&ann, new_root, &nnew_funcs);
    parse_extra_flag = argc == 10 ? argv[9] : NULL;
    struct gen_func *oldf = parse_headers(&ann, old_root, &nold_funcs);
    char **newx = elf_exported_functions(argv[3], &nnew);
    char **new_refused = refused_by_new(argv[4], &nnew_refused);
    char **oldx = elf_exported_functions(argv[6], &nold);
    const char *major = major_of(soname);
    const char *new_release = major_of(strrchr(argv[3], '/') ? strrchr(argv[3], '/') + 1 : argv[3]);
    char stem[128];
    snprintf(stem, sizeof stem, "%s%s", ann.library, major);

    struct compat_fn *fns = xcalloc((size_t)nold, sizeof *fns);
    int nrefused = 0, nhand = 0;
    for (int i = 0; i < nold; i++) {
        fns[i].name = oldx[i];
        fns[i].reason = compare(&fns[i], gen_find_func(newf, nnew_funcs, oldx[i]),
                                gen_find_func(oldf, nold_funcs, oldx[i]),
                                listed(newx, nnew, oldx[i]), new_release);
        if (fns[i].reason && (fns[i].hand_file = hand_file(argv[1], stem, oldx[i])))
            fns[i].reason = NULL;
        struct gen_func *o = gen_find_func(oldf, nold_funcs, oldx[i]);
        if (fns[i].reason && o && strcmp(o->ret, ann.status_type) != 0)
            die("%s: %s returns %s and differs from CUDA %s's: a refused stub cannot answer "
                "that; serve it by hand", o->where, o->name, o->ret, new_release);
        nrefused += fns[i].reason != NULL;
        nhand += fns[i].hand_file != NULL;
    }

    FILE *map = open_out(outdir, stem, ".map");
    fprintf(map, "/* Generated by rgpu-gen --compat: the functions %s exports. */\n", soname);
    fprintf(map, "%s {\n  global:\n", ann.versioned ? soname : "");
    for (int i = 0; i < nold; i++)
        fprintf(map, "    %s;\n", fns[i].name);
    fprintf(map, "  local:\n    *;\n};\n");
    fclose(map);

    FILE *ref = open_out(outdir, stem, "_refused.c");
    FILE *ren = open_out(outdir, stem, "_renames.h");
    fprintf(ref, "/* Generated by rgpu-gen --compat: what %s refuses. */\n", soname);
    fprintf(ref, "#include \"rgpu_client.h\"\n#include \"%s_procs.h\"\n", ann.library);
    fprintf(ren, "/* Generated by rgpu-gen --compat: the CUDA %s definitions of what %s "
            "refuses, kept inside. */\n#pragma once\n", new_release, soname);
    /* A pragma applies to the declarations after it: it comes first, the
     * headers next, then a declaration of each function that only an
     * internal variant of the headers declares (cudaMemPrefetchAsync_ptsz). */
    for (int i = 0; i < nold; i++)
        if (renamed(&fns[i], newx, nnew, new_refused, nnew_refused))
            fprintf(ren, "#pragma redefine_extname %s rgpu_cuda%s_%s\n", fns[i].name,
                    new_release, fns[i].name);
    for (int h = 0; h < ann.nheaders; h++)
        if (ann.headers[h][0] != '/')
            fprintf(ren, "#include <%s>\n", ann.headers[h]);
    for (int i = 0; i < nold; i++)
        if (renamed(&fns[i], newx, nnew, new_refused, nnew_refused))
            declare(ren, gen_find_func(newf, nnew_funcs, fns[i].name));
    for (int i = 0; i < nold; i++) {
        if (!fns[i].reason || fns[i].hand_file || listed(new_refused, nnew_refused, fns[i].name))
            continue;
        fprintf(ref, "\nRGPU_EXPORT int %s(void);\nRGPU_EXPORT int %s(void)\n{\n", fns[i].name,
                fns[i].name);
        fprintf(ref, "    static int logged;\n    return rgpu_refused(&rgpu_%s_lib, \"%s\", ",
                ann.library, fns[i].name);
        char why[8192];
        snprintf(why, sizeof why, "CUDA %s: %s", major, fns[i].reason);
        emit_string(ref, why);
        fprintf(ref, ", &logged);\n}\n");
    }
    fclose(ref);
    fclose(ren);

    FILE *cov = open_out(outdir, stem, "-coverage.txt");
    FILE *lay = open_out(outdir, stem, "-layouts.txt");
    fprintf(cov, "%s: %d exported functions\n", soname, nold);
    fprintf(cov, "  served as in CUDA %s:         %d (see %s-coverage.txt)\n", new_release,
            nold - nrefused - nhand, ann.library);
    fprintf(cov, "  served for CUDA %s by hand:   %d (stubs/cuda12)\n", major, nhand);
    fprintf(cov, "  refused (not supported):     %d\n\n", nrefused);
    fprintf(lay, "%s: functions whose prototype differs from CUDA %s's\n\n", soname,
            new_release);
    for (int i = 0; i < nold; i++) {
        if (fns[i].hand_file)
            fprintf(cov, "%-50s hand        for CUDA %s, by hand [%s]\n", fns[i].name,
                    major, fns[i].hand_file);
        else if (fns[i].reason)
            fprintf(cov, "%-50s refused     %s\n", fns[i].name, fns[i].reason);
        else
            fprintf(cov, "%-50s as CUDA %s%s\n", fns[i].name, new_release,
                    fns[i].extended ? " (whose layout extends this one's: layouts.txt)" : "");
        if (fns[i].detail[0])
            fprintf(lay, "%-50s %s\n", fns[i].name, fns[i].detail);
    }
    fclose(cov);
    fclose(lay);
    emit_older_names(outdir, stem, soname, new_release, newf, nnew_funcs, newx, nnew, oldf,
                     nold_funcs, oldx, nold);
    return 0;
}

/* rgpu-gen --compare ANNOTATIONS NEW_ROOT NEW_REF NEW_RELEASE OLD_ROOT OLD_REF OLD_RELEASE
 *                   REPORT [FLAG]
 *
 * One major, two minor releases: the stubs are generated from the newer
 * (NEW_ROOT, 13.5) and the servers they meet may run the older (OLD_ROOT,
 * the toolkit's 13.0).  A function both export must pass the same bytes in
 * both: equal, or extended as extends() allows; REPORT lists the extended
 * ones and what each release brought.  One whose layout changed otherwise
 * stops the build: an older server would misread it, and it must be served
 * by hand or refused (docs/cuda12.md). */
int compare_main(int argc, char **argv)
{
    struct annotations ann;
    int nnew_funcs, nold_funcs, nnew, nold, nbad = 0;
    if (argc != 9 && argc != 10)
        die("usage: rgpu-gen --compare ANNOTATIONS NEW_ROOT NEW_REF NEW_RELEASE OLD_ROOT "
            "OLD_REF OLD_RELEASE REPORT [FLAG]");
    const char *new_release = argv[4], *old_release = argv[7];
    ann_load(argv[1], &ann);
    parse_extra_flag = argc == 10 ? argv[9] : NULL;
    struct gen_func *newf = parse_headers(&ann, argv[2], &nnew_funcs);
    struct gen_func *oldf = parse_headers(&ann, argv[5], &nold_funcs);
    char **newx = elf_exported_functions(argv[3], &nnew);
    char **oldx = elf_exported_functions(argv[6], &nold);
    FILE *f = fopen(argv[8], "w");
    if (!f)
        die("%s: cannot write", argv[8]);
    fprintf(f, "lib%s: CUDA %s's headers (the stubs') against CUDA %s's (a server's)\n\n",
            ann.library, new_release, old_release);
    fprintf(f, "Functions whose layouts CUDA %s extends (the same bytes to a CUDA %s library):\n",
            new_release, old_release);
    for (int i = 0; i < nold; i++) {
        struct compat_fn c = { .name = oldx[i] };
        if (!listed(newx, nnew, oldx[i]))
            continue;
        const struct gen_func *n = gen_find_func(newf, nnew_funcs, oldx[i]);
        const struct gen_func *o = gen_find_func(oldf, nold_funcs, oldx[i]);
        const char *why = compare(&c, n, o, 1, new_release);
        if (why) {
            fprintf(stderr, "rgpu-gen: %s: %s; a CUDA %s server would misread it: serve it by "
                    "hand or refuse it in %s\n", oldx[i], why, old_release, ann.path);
            nbad++;
        } else if (c.detail[0]) {
            fprintf(f, "  %-48s %s\n", oldx[i], c.detail);
        }
    }
    fprintf(f, "\nFunctions CUDA %s exports and %s does not (refused against an older server, "
            "or served on the client: %s-coverage.txt):\n", new_release, old_release,
            ann.library);
    for (int i = 0; i < nnew; i++)
        if (!listed(oldx, nold, newx[i]))
            fprintf(f, "  %s\n", newx[i]);
    fprintf(f, "\nFunctions CUDA %s exports and %s does not:\n", old_release, new_release);
    for (int i = 0; i < nold; i++)
        if (!listed(newx, nnew, oldx[i]))
            fprintf(f, "  %s\n", oldx[i]);
    fclose(f);
    if (nbad)
        die("%d functions pass other bytes in CUDA %s than in %s", nbad, new_release,
            old_release);
    return 0;
}
