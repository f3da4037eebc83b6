/* rgpu-gen: generates, for one CUDA library, the client stubs, the server
 * dispatch, the linker version script and a coverage report.
 *
 *   rgpu-gen ANNOTATIONS CUDA_ROOT REFERENCE_LIB SONAME OUTDIR
 *
 * The reference library (NVIDIA's own, from the toolkit) says which
 * functions the stub must export; the headers (parsed with libclang) give
 * their prototypes; the annotation file says what neither can.  Every
 * exported function ends up generated, hand-written, answered locally or
 * refused with a reason; anything else stops the build with file:line.
 *
 * Output, all in OUTDIR, named after the library (e.g. cudart):
 *   cudart_procs.h      procedure table declarations and per-function handles
 *   cudart_table.c      parameter descriptions and the procedure table
 *   cudart_client.c     client stubs of generated functions
 *   cudart_refused.c    stubs of refused functions
 *   cudart_server.c     server thunks, one per procedure
 *   cudart_errors.c     error names and descriptions (with `errors`)
 *   cudart.map          linker version script
 *   cudart-coverage.txt what is served how, and what is refused and why
 */
#include "rgpu-gen.h"
#include "../common/rgpu_proto.h"
#include "../common/rgpu_handles.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void die(const char *fmt, ...)
{
    va_list ap;
    fputs("rgpu-gen: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* Problems with one function are collected, so that one run lists them all. */
static int nproblems;

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
    va_list ap;
    fputs("rgpu-gen: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    nproblems++;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        die("out of memory");
    return p;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");
    if (!p)
        die("out of memory");
    return p;
}

/* ---- deciding each export's fate ------------------------------------------ */

static int rule_matches(const struct ann_rule *r, const char *name)
{
    return fnmatch(r->pattern, name, 0) == 0;
}

static int has_versioned_sibling(char **exports, int n, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < n; i++)
        if (strncmp(exports[i], name, len) == 0 && exports[i][len] == '_' &&
            exports[i][len + 1] == 'v' && isdigit((unsigned char)exports[i][len + 2]))
            return 1;
    return 0;
}

static int has_narrow_address(const struct gen_func *f)
{
    for (int i = 0; f && i < f->nparams; i++)
        if (f->params[i].narrow_address)
            return 1;
    return 0;
}

/* The first matching disposition rule wins; exact names are written before
 * globs in the files, so they take precedence by order. */
static void decide(struct export_fn *e, struct annotations *ann, char **exports, int nexp)
{
    e->disp = D_GENERATED;
    for (int i = 0; i < ann->nrules; i++) {
        struct ann_rule *r = &ann->rules[i];
        if (r->verb == A_ARG || r->verb == A_ASYNC || r->verb == A_DESTROYS ||
            r->verb == A_KEEPS || r->verb == A_NULLABLE || r->verb == A_PURE)
            continue;
        if (r->verb == A_REFUSE_SUPERSEDED) {
            if (e->proto || !has_versioned_sibling(exports, nexp, e->name))
                continue;
        } else if (r->verb == A_REFUSE_NARROW) {
            if (!has_narrow_address(e->proto))
                continue;
        } else if (!rule_matches(r, e->name)) {
            continue;
        }
        r->used = 1;
        e->reason = r->reason;
        switch (r->verb) {
        case A_SERVE: e->disp = D_GENERATED; break;
        case A_LOCAL: e->disp = D_LOCAL; break;
        case A_HAND: e->disp = D_HAND; break;
        case A_CLIENT: e->disp = D_CLIENT_HAND; break;
        default: e->disp = D_REFUSED; break;
        }
        return;
    }
}

/* The version that brought e: the highest of the `since` rules naming it. */
static unsigned since_of(const struct export_fn *e, const struct annotations *ann)
{
    unsigned since = 0;
    for (int i = 0; i < ann->nrules; i++)
        if (ann->rules[i].since > since && rule_matches(&ann->rules[i], e->name))
            since = ann->rules[i].since;
    return since;
}

static int param_index(const struct gen_func *f, const char *name)
{
    for (int i = 0; i < f->nparams; i++)
        if (strcmp(f->params[i].name, name) == 0)
            return i;
    return -1;
}

static int is_scalar_kind(enum gen_kind k)
{
    return k == K_SCALAR_IN || k == K_SCALAR_OUT || k == K_SCALAR_INOUT;
}

static int index_of_type_param(const struct gen_func *f, const char *name, const char *what,
                               const struct ann_rule *r, const char *ann_path)
{
    int k = param_index(f, name);
    if (k < 0 || f->params[k].kind != K_VAL)
        die("%s:%d: %s=%s must name a by-value parameter of %s", ann_path, r->line, what, name,
            f->name);
    return k;
}

static void apply_arg_rule(struct ann_rule *r, struct gen_func *f, const char *ann_path)
{
    int i = param_index(f, r->param);
    /* A glob rule names parameters some functions lack: it applies only
     * where all of them exist. */
    if (strpbrk(r->pattern, "*?[") &&
        (i < 0 || (r->len_param && param_index(f, r->len_param) < 0) ||
         (r->aux_param && param_index(f, r->aux_param) < 0) ||
         (r->elem_param && param_index(f, r->elem_param) < 0)))
        return;
    if (i < 0)
        die("%s:%d: %s has no parameter '%s' (%s)", ann_path, r->line, f->name, r->param,
            f->where);
    struct gen_param *p = &f->params[i];
    /* A glob written for the 64-bit ABI (cuMemsetD8*) also matches the
     * CUDA 2.x entry point of the same name, whose address is 32 bits:
     * that one stays unclassified, for a refuse rule to decide. */
    if (p->narrow_address) {
        if (strpbrk(r->pattern, "*?["))
            return;
        die("%s:%d: %s.%s is a device address narrower than 64 bits: refuse %s instead",
            ann_path, r->line, f->name, r->param, f->name);
    }
    p->kind = r->kind;
    p->size = r->size;
    if (!p->size && r->kind == K_VAL)
        p->size = 8;
    if (!p->size && (r->kind == K_IN || r->kind == K_OUT || r->kind == K_INOUT))
        p->size = p->pointee_size;
    if (!p->size && (r->kind == K_IN_BUF || r->kind == K_OUT_BUF || r->kind == K_INOUT_BUF))
        p->size = p->pointee_size ? p->pointee_size : 1;
    if (!p->size && r->kind == K_DEVPTR)
        p->size = p->pointee_size ? p->pointee_size : 1;    /* bytes per len unit */
    if (!p->size && is_scalar_kind(r->kind))
        p->size = p->pointee_size;  /* 0 for void *: the type parameters decide */
    if (r->len_param)
        p->len_arg = index_of_type_param(f, r->len_param, "len/type", r, ann_path);
    if (r->aux_param)
        p->aux_arg = index_of_type_param(f, r->aux_param, "ctype", r, ann_path);
    if (r->elem_param) {
        p->aux_arg = index_of_type_param(f, r->elem_param, "elem", r, ann_path);
        p->elem_func = r->elem_func;
        p->size = 0;
    }
    p->stream = r->stream;
    p->sink = r->sink;
    if (r->used_param && (p->used_arg = param_index(f, r->used_param)) < 0)
        die("%s:%d: used=%s names no parameter of %s", ann_path, r->line, r->used_param,
            f->name);

    if ((r->kind == K_IN || r->kind == K_OUT || r->kind == K_INOUT) && !p->size)
        die("%s:%d: %s.%s: give size=N", ann_path, r->line, f->name, r->param);
}

static void apply_param_rules(struct export_fn *e, struct annotations *ann)
{
    for (int i = 0; i < ann->nrules; i++) {
        struct ann_rule *r = &ann->rules[i];
        if (!rule_matches(r, e->name))
            continue;
        if (r->verb == A_ARG) {
            r->used = 1;
            apply_arg_rule(r, e->proto, ann->path);
        } else if (r->verb == A_ASYNC) {
            r->used = 1;
            e->async = 1;
        } else if (r->verb == A_PURE) {
            r->used = 1;
            e->pure = 1;
        }
    }
}

/* Bytes that travel outside the frame buffer (stream, sink) need a serve_
 * function that reads or sends them: rgpu's own procedures only.  A
 * stream is the last parameter (its bytes follow the frame's head), a
 * sink the one of its call; used= names an output of at most 8 bytes. */
static void check_bulk(const struct export_fn *e, const struct annotations *ann)
{
    const struct gen_func *f = e->proto;
    int sinks = 0;
    for (int i = 0; i < f->nparams; i++) {
        const struct gen_param *p = &f->params[i];
        if ((p->stream || p->sink) && e->disp != D_OWN)
            problem("%s: %s.%s: stream and sink are for rgpu's own procedures (%s)", f->where,
                    e->name, p->name, ann->path);
        if (p->stream && i != f->nparams - 1)
            problem("%s: %s.%s: a stream parameter comes last (%s)", f->where, e->name,
                    p->name, ann->path);
        sinks += p->sink;
        if (p->used_arg >= 0 && (f->params[p->used_arg].kind != K_OUT ||
                                 f->params[p->used_arg].size == 0 ||
                                 f->params[p->used_arg].size > 8))
            problem("%s: %s.%s: used= names an output of at most 8 bytes (%s)", f->where,
                    e->name, p->name, ann->path);
    }
    if (sinks > 1)
        problem("%s: %s: one sink per procedure (%s)", f->where, e->name, ann->path);
}

/* A generated function must be fully understood; say exactly what is not. */
static void check_generated(struct export_fn *e, const struct annotations *ann)
{
    struct gen_func *f = e->proto;     /* main checked there is one */
    if (!f->ret_is_status)
        problem("%s: %s returns %s, not %s: annotate it in %s (local or hand)", f->where,
            e->name, f->ret, ann->status_type, ann->path);
    for (int i = 0; i < f->nparams; i++)
        if (is_scalar_kind(f->params[i].kind) && !f->params[i].size && f->params[i].len_arg < 0)
            problem("%s: %s: untyped scalar '%s': give type=PARAM in %s", f->where, e->name,
                    f->params[i].name, ann->path);
    for (int i = 0; i < f->nparams; i++)
        if (f->params[i].kind == K_NONE)
            problem("%s: %s: parameter '%s' (%s): %s; annotate it in %s (arg, hand or refuse)",
                f->where, e->name, f->params[i].name, f->params[i].type, f->params[i].why,
                ann->path);
    /* async with outputs is allowed: the client waits whenever a call
     * fills host memory, and goes without waiting only when it does not
     * (rgpu_has_host_outputs). */
    check_bulk(e, ann);
}

/* ---- handles: checked on the way in, recorded on the way out ------------- */

static int unchecked_class(struct annotations *ann, const char *cls)
{
    for (int i = 0; i < ann->nunchecked; i++)
        if (strcmp(ann->unchecked[i], cls) == 0) {
            ann->unchecked_used[i] = 1;
            return 1;
        }
    return 0;
}

static int default_destroyer(const char *name)
{
    return strstr(name, "Destroy") || strstr(name, "Free") || strstr(name, "Unload");
}

/* Which handle a destroy function forgets: the annotation's, else the only
 * handle of a function the default rule matches. */
static void mark_destroyed(struct export_fn *e, struct annotations *ann)
{
    struct gen_func *f = e->proto;
    int keeps = 0, annotated = 0;
    for (int i = 0; i < ann->nrules; i++) {
        struct ann_rule *r = &ann->rules[i];
        if ((r->verb != A_DESTROYS && r->verb != A_KEEPS) || !rule_matches(r, e->name))
            continue;
        r->used = 1;
        if (r->verb == A_KEEPS) {
            keeps = 1;
            continue;
        }
        int k = param_index(f, r->param);
        if (k < 0 || f->params[k].kind != K_HANDLE)
            die("%s:%d: destroys %s %s: not a checked handle parameter", ann->path, r->line,
                e->name, r->param);
        f->params[k].destroys = 1;
        annotated = 1;
    }
    if (keeps || annotated || !default_destroyer(e->name))
        return;
    int found = -1, n = 0;
    for (int k = 0; k < f->nparams; k++)
        if (f->params[k].kind == K_HANDLE) {
            found = k;
            n++;
        }
    if (n > 1)
        problem("%s: %s takes %d handles: say which it destroys (destroys FUNC PARAM, or "
                "keeps FUNC \"why\") in %s", f->where, e->name, n, ann->path);
    else if (n == 1)
        f->params[found].destroys = 1;
}

/* nullable FUNC PARAM: NULL is a valid value of that handle. */
static void mark_nullable(struct export_fn *e, struct annotations *ann)
{
    struct gen_func *f = e->proto;
    for (int i = 0; i < ann->nrules; i++) {
        struct ann_rule *r = &ann->rules[i];
        if (r->verb != A_NULLABLE || !rule_matches(r, e->name))
            continue;
        r->used = 1;
        int k = param_index(f, r->param);
        if (k < 0 || f->params[k].kind != K_HANDLE)
            die("%s:%d: nullable %s %s: not a checked handle parameter", ann->path, r->line,
                e->name, r->param);
        f->params[k].nullable = 1;
    }
}

/* Every opaque handle a generated function takes is checked on the server
 * (K_HANDLE) unless its class is declared unchecked; a handle it returns is
 * recorded by its class. */
static void classify_handles(struct export_fn *e, struct annotations *ann)
{
    struct gen_func *f = e->proto;
    for (int k = 0; k < f->nparams; k++) {
        struct gen_param *p = &f->params[k];
        if (p->kind == K_VAL && p->handle_class && !unchecked_class(ann, p->handle_class))
            p->kind = K_HANDLE;
        if (p->kind != K_HANDLE && p->handle_class)
            p->handle_class = NULL;
        if (p->pointee_class && unchecked_class(ann, p->pointee_class))
            p->pointee_class = NULL;
        /* Handles travel only inside host buffers of whole 8-byte values. */
        int carries = p->kind == K_OUT || p->kind == K_IN || p->kind == K_INOUT ||
                      p->kind == K_IN_BUF || p->kind == K_OUT_BUF || p->kind == K_INOUT_BUF;
        if (!carries || (p->size && p->size % 8) || p->elem_func)
            p->pointee_class = NULL;
    }
    for (int k = 0; k < f->nparams; k++)
        if ((f->params[k].kind == K_HANDLE || f->params[k].pointee_class) && !ann->invalid_handle)
            problem("%s: %s takes or returns handles: give invalid-handle STATUS in %s", f->where,
                    e->name, ann->path);
    mark_destroyed(e, ann);
    mark_nullable(e, ann);
}

static int has_procedure(const struct export_fn *e)
{
    return e->disp == D_GENERATED || e->disp == D_CLIENT_HAND;
}

/* ---- emitting ----------------------------------------------------------- */

struct gen {
    const struct annotations *ann;
    const char *lib;            /* cudart */
    const char *soname;
    const char *outdir;
    struct export_fn *exp;
    int nexp;
    struct export_fn **procs;   /* exports with a procedure and rgpu's own, sorted by id */
    int nprocs;
    unsigned version;           /* the headers' version of the library (`version`) */
    struct export_fn *own;      /* rgpu's own procedures (procedures FILE) */
    int nown;
};

static FILE *out_open(const struct gen *g, const char *suffix)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s%s", g->outdir, g->lib, suffix);
    FILE *f = fopen(path, "w");
    if (!f)
        die("%s: cannot write", path);
    fprintf(f, "/* Generated by rgpu-gen from %s: do not edit. */\n", g->ann->path);
    return f;
}

static void upper(char *dst, const char *src, size_t n)
{
    size_t i;
    for (i = 0; i + 1 < n && src[i]; i++)
        dst[i] = (char)toupper((unsigned char)src[i]);
    dst[i] = '\0';
}

static const char *kind_name(enum gen_kind k)
{
    static const char *const names[] = {
        "RGPU_VAL", "RGPU_BYVAL", "RGPU_IN", "RGPU_OUT", "RGPU_INOUT",
        "RGPU_STR", "RGPU_IN_BUF", "RGPU_OUT_BUF",
        "RGPU_SCALAR_IN", "RGPU_SCALAR_OUT", "RGPU_SCALAR_INOUT", "RGPU_INOUT_BUF",
        "RGPU_DEVPTR",
    };
    return k == K_HANDLE ? "RGPU_HANDLE" : names[k];
}

/* The status a refused handle of class cls returns: the class's own, else
 * 0 (the library's invalid-handle status). */
static const char *class_status(const struct annotations *ann, const char *cls)
{
    for (int i = 0; cls && i < ann->nclass_status; i++)
        if (strcmp(ann->class_status_class[i], cls) == 0)
            return ann->class_status[i];
    return "0";
}

static void emit_param_row(FILE *f, const struct gen *g, const struct gen_param *p)
{
    const char *cls = p->kind == K_HANDLE ? p->handle_class : p->pointee_class;
    fprintf(f, "    { \"%s\", %s, %u, %d, %d, %s", p->name, kind_name(p->kind), p->size,
            p->len_arg, p->aux_arg, p->elem_func ? p->elem_func : "0");
    if (cls)
        fprintf(f, ", 0x%08xu /* %s */, %s, %s", rgpu_handle_class(cls), cls,
                p->destroys && p->nullable ? "RGPU_HANDLE_DESTROYS | RGPU_HANDLE_NULLABLE"
                : p->destroys              ? "RGPU_HANDLE_DESTROYS"
                : p->nullable              ? "RGPU_HANDLE_NULLABLE"
                                           : "0",
                class_status(g->ann, cls));
    else
        fprintf(f, ", 0, 0, 0");
    fprintf(f, ", %s, %d },\n",
            p->stream ? "RGPU_PARAM_STREAM" : p->sink ? "RGPU_PARAM_SINK" : "0", p->used_arg);
}

/* The library's headers; ours (header-local, procedures: absolute paths
 * here) by file name, from codegen/ on the include path, so that the
 * generated files name no path of the build machine. */
static void emit_includes(FILE *f, const struct gen *g)
{
    for (int i = 0; i < g->ann->nheaders; i++) {
        const char *h = g->ann->headers[i], *base = strrchr(h, '/');
        if (h[0] == '/')
            fprintf(f, "#include \"%s\"\n", base + 1);
        else
            fprintf(f, "#include <%s>\n", h);
    }
}

static void emit_procs_h(const struct gen *g)
{
    char up[64];
    upper(up, g->lib, sizeof up);
    FILE *f = out_open(g, "_procs.h");
    fprintf(f, "#pragma once\n#include \"rgpu_marshal.h\"\n\n");
    fprintf(f, "extern const struct rgpu_lib rgpu_%s_lib;\n", g->lib);
    fprintf(f, "extern const struct rgpu_proc rgpu_%s_procs[%d];\n", g->lib, g->nprocs);
    fprintf(f, "extern const struct rgpu_server_proc rgpu_%s_server_procs[%d];\n\n", g->lib,
            g->nprocs);
    for (int i = 0; i < g->nprocs; i++)
        fprintf(f, "#define RGPU_%s_%s (&rgpu_%s_procs[%d])\n", up, g->procs[i]->name, g->lib, i);
    /* Element-size functions the table names (hand-written, in common/). */
    for (int i = 0; i < g->nprocs; i++)
        for (int k = 0; k < g->procs[i]->proto->nparams; k++)
            if (g->procs[i]->proto->params[k].elem_func)
                fprintf(f, "uint32_t %s(int type);\n", g->procs[i]->proto->params[k].elem_func);
    if (g->ann->errors_enum) {
        fprintf(f, "\nconst char *rgpu_%s_error_name(int code);\n", g->lib);
        fprintf(f, "const char *rgpu_%s_error_string(int code);\n", g->lib);
    }
    fclose(f);
}

static void emit_table_c(const struct gen *g)
{
    FILE *f = out_open(g, "_table.c");
    fprintf(f, "#include \"%s_procs.h\"\n", g->lib);
    emit_includes(f, g);     /* for the status enumerators */
    fprintf(f, "\n");
    for (int i = 0; i < g->nprocs; i++) {
        const struct gen_func *fn = g->procs[i]->proto;
        if (fn->nparams == 0)
            continue;
        fprintf(f, "static const struct rgpu_param p_%s[] = {\n", fn->name);
        for (int k = 0; k < fn->nparams; k++)
            emit_param_row(f, g, &fn->params[k]);
        fprintf(f, "};\n");
    }
    fprintf(f, "\nconst struct rgpu_proc rgpu_%s_procs[%d] = {\n", g->lib, g->nprocs);
    for (int i = 0; i < g->nprocs; i++) {
        const struct export_fn *e = g->procs[i];
        fprintf(f, "    { \"%s\", 0x%08xu, %s, %d, %s%s, %u },\n", e->name,
                rgpu_proc_id(g->lib, e->name),
                e->async && e->pure ? "RGPU_PROC_ASYNC | RGPU_PROC_PURE"
                : e->async          ? "RGPU_PROC_ASYNC"
                : e->pure           ? "RGPU_PROC_PURE"
                                    : "0",
                e->proto->nparams, e->proto->nparams ? "p_" : "NULL",
                e->proto->nparams ? e->name : "", e->since);
    }
    /* A stub of an older major built from this table (libcudart.so.12)
     * says its own headers' version instead (RGPU_STUB_VERSION). */
    fprintf(f, "};\n\n#ifndef RGPU_STUB_VERSION\n#define RGPU_STUB_VERSION %u\n#endif\n", g->version);
    fprintf(f, "\nconst struct rgpu_lib rgpu_%s_lib = {\n", g->lib);
    fprintf(f, "    \"%s\", \"%s\", %s, %s, %s, %d, %d, rgpu_%s_procs, %s, RGPU_STUB_VERSION,\n};\n",
            g->lib, g->soname, g->ann->not_supported, g->ann->unavailable, g->ann->invalid_value,
            g->ann->runtime, g->nprocs, g->lib,
            g->ann->invalid_handle ? g->ann->invalid_handle : "0");
    fclose(f);
}

static const struct annotations *emit_ann;

/* A type's spelling for generated C: C++-only types replaced by their
 * C twins (type-alias), whole words only. */
static void print_type_text(FILE *f, const char *t, size_t len)
{
    size_t i = 0;
    while (i < len) {
        int done = 0;
        for (int a = 0; emit_ann && a < emit_ann->naliases && !done; a++) {
            size_t n = strlen(emit_ann->alias_from[a]);
            int starts = i == 0 || !(isalnum((unsigned char)t[i - 1]) || t[i - 1] == '_');
            int ends = i + n >= len || !(isalnum((unsigned char)t[i + n]) || t[i + n] == '_');
            if (starts && i + n <= len && strncmp(t + i, emit_ann->alias_from[a], n) == 0 && ends) {
                fputs(emit_ann->alias_to[a], f);
                i += n;
                done = 1;
            }
        }
        if (!done)
            fputc(t[i++], f);
    }
}

/* An array parameter (float *const[]): the name goes before the brackets
 * in a declaration; everywhere else it is the pointer it decays to. */
static void print_param_decl(FILE *f, const struct gen_param *p)
{
    const char *br = strchr(p->type, '[');
    if (br) {
        print_type_text(f, p->type, (size_t)(br - p->type));
        fprintf(f, " %s%s", p->name, br);
    } else {
        print_type_text(f, p->type, strlen(p->type));
        fprintf(f, " %s", p->name);
    }
}

static void print_param_type(FILE *f, const struct gen_param *p)
{
    const char *br = strchr(p->type, '[');
    print_type_text(f, p->type, br ? (size_t)(br - p->type) : strlen(p->type));
    if (br)
        fputc('*', f);
}

/* "RET PREFIXNAME(PARAMS)" followed by end. */
static void emit_signature(FILE *f, const struct gen_func *fn, const char *prefix,
                           const char *end)
{
    fprintf(f, "%s %s%s(", fn->ret, prefix, fn->name);
    if (fn->nparams == 0)
        fprintf(f, "void");
    for (int k = 0; k < fn->nparams; k++) {
        fprintf(f, "%s", k ? ", " : "");
        print_param_decl(f, &fn->params[k]);
    }
    fprintf(f, ")%s", end);
}

static void emit_prototype(FILE *f, const struct gen_func *fn)
{
    fprintf(f, "RGPU_EXPORT ");
    emit_signature(f, fn, "", "\n");
}

/* The argument vector the marshaller walks: a pointer to each argument. */
static void emit_argv(FILE *f, const struct gen_func *fn)
{
    if (fn->nparams) {
        fprintf(f, "    const void *argv[] = {");
        for (int k = 0; k < fn->nparams; k++)
            fprintf(f, "%s&%s", k ? ", " : " ", fn->params[k].name);
        fprintf(f, " };\n");
    } else {
        fprintf(f, "    const void *const *argv = 0;\n");
    }
}

static void emit_client_c(const struct gen *g)
{
    char up[64];
    upper(up, g->lib, sizeof up);
    FILE *f = out_open(g, "_client.c");
    fprintf(f, "#include \"rgpu_client.h\"\n#include \"%s_procs.h\"\n", g->lib);
    emit_includes(f, g);
    for (int i = 0; i < g->nexp; i++) {
        const struct export_fn *e = &g->exp[i];
        if (e->disp != D_GENERATED)
            continue;
        const struct gen_func *fn = e->proto;
        /* The headers #define many names to their _v2/_ptsz forms. */
        fprintf(f, "\n#undef %s\n", fn->name);
        emit_prototype(f, fn);
        fprintf(f, "{\n");
        emit_argv(f, fn);
        fprintf(f, "    return (%s)rgpu_call(&rgpu_%s_lib, RGPU_%s_%s, argv);\n}\n", fn->ret,
                g->lib, up, fn->name);
    }
    /* rgpu's own procedures: called by the hand-written stubs, exported by
     * none (the version script lists the library's exports alone). */
    for (int i = 0; i < g->nown; i++) {
        const struct gen_func *fn = g->own[i].proto;
        fprintf(f, "\n");
        emit_signature(f, fn, "", "\n");
        fprintf(f, "{\n");
        emit_argv(f, fn);
        fprintf(f, "    return (%s)rgpu_call(&rgpu_%s_lib, RGPU_%s_%s, argv);\n}\n", fn->ret,
                g->lib, up, fn->name);
    }
    fclose(f);
}

static void emit_refused_c(const struct gen *g)
{
    FILE *f = out_open(g, "_refused.c");
    /* No CUDA header here: every refused stub has the same body, and the
     * callee ignoring its arguments is harmless in the x86-64 ABI. */
    fprintf(f, "#include \"rgpu_client.h\"\n#include \"%s_procs.h\"\n", g->lib);
    for (int i = 0; i < g->nexp; i++) {
        const struct export_fn *e = &g->exp[i];
        if (e->disp != D_REFUSED)
            continue;
        fprintf(f, "\nRGPU_EXPORT int %s(void)\n{\n", e->name);
        fprintf(f, "    static int logged;\n");
        fprintf(f, "    return rgpu_refused(&rgpu_%s_lib, \"%s\", \"%s\", &logged);\n}\n",
                g->lib, e->name, e->reason);
    }
    fclose(f);
}

static void emit_thunk(FILE *f, const struct gen_func *fn)
{
    fprintf(f, "\nstatic int t_%s(void *fn, void **a)\n{\n", fn->name);
    fprintf(f, "    (void)a;\n    return (int)((%s (*)(", fn->ret);
    if (fn->nparams == 0)
        fprintf(f, "void");
    for (int k = 0; k < fn->nparams; k++) {
        fprintf(f, "%s", k ? ", " : "");
        print_param_type(f, &fn->params[k]);
    }
    fprintf(f, "))fn)(");
    for (int k = 0; k < fn->nparams; k++) {
        fprintf(f, "%s*(", k ? ", " : "");
        print_param_type(f, &fn->params[k]);
        fprintf(f, " *)a[%d]", k);
    }
    fprintf(f, ");\n}\n");
}

/* NAME_serve.h: the server functions of rgpu's own procedures, which
 * daemon/ defines by hand; the generated table calls them. */
static void emit_serve_h(const struct gen *g)
{
    FILE *f = out_open(g, "_serve.h");
    fprintf(f, "#pragma once\n");
    emit_includes(f, g);
    fprintf(f, "\n");
    for (int i = 0; i < g->nown; i++)
        emit_signature(f, g->own[i].proto, "serve_", ";\n");
    fclose(f);
}

static void emit_server_c(const struct gen *g)
{
    FILE *f = out_open(g, "_server.c");
    fprintf(f, "#include \"%s_procs.h\"\n#include \"%s_serve.h\"\n", g->lib, g->lib);
    for (int i = 0; i < g->nprocs; i++)
        emit_thunk(f, g->procs[i]->proto);
    fprintf(f, "\nconst struct rgpu_server_proc rgpu_%s_server_procs[%d] = {\n", g->lib,
            g->nprocs);
    for (int i = 0; i < g->nprocs; i++) {
        const struct export_fn *e = g->procs[i];
        if (e->disp == D_OWN)
            fprintf(f, "    { &rgpu_%s_procs[%d], t_%s, (void *)serve_%s },\n", g->lib, i,
                    e->name, e->name);
        else
            fprintf(f, "    { &rgpu_%s_procs[%d], t_%s, 0 },\n", g->lib, i, e->name);
    }
    fprintf(f, "};\n");
    fclose(f);
}

static void emit_c_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void emit_errors_c(const struct gen *g, const char *cuda_root)
{
    int n;
    struct gen_enum_const *k = parse_error_enum(g->ann, cuda_root, &n);
    FILE *f = out_open(g, "_errors.c");
    fprintf(f, "#include \"%s_procs.h\"\n#include <stddef.h>\n\n", g->lib);
    fprintf(f, "static const struct { int code; const char *name, *doc; } errs[] = {\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "    { %lld, \"%s\", ", k[i].value, k[i].name);
        if (k[i].doc)
            emit_c_string(f, k[i].doc);
        else
            fprintf(f, "NULL");
        fprintf(f, " },\n");
    }
    fprintf(f, "};\n\n");
    for (int which = 0; which < 2; which++) {
        fprintf(f, "const char *rgpu_%s_error_%s(int code)\n{\n", g->lib,
                which ? "string" : "name");
        fprintf(f, "    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)\n");
        fprintf(f, "        if (errs[i].code == code)\n");
        fprintf(f, "            return errs[i].%s;\n    return NULL;\n}\n\n",
                which ? "doc ? errs[i].doc : errs[i].name" : "name");
    }
    fclose(f);
}

static void emit_map(const struct gen *g)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s.map", g->outdir, g->lib);
    FILE *f = fopen(path, "w");
    if (!f)
        die("%s: cannot write", path);
    fprintf(f, "/* Generated by rgpu-gen: the functions %s exports. */\n", g->soname);
    fprintf(f, "%s {\n  global:\n", g->ann->versioned ? g->soname : "");
    for (int i = 0; i < g->nexp; i++)
        fprintf(f, "    %s;\n", g->exp[i].name);
    fprintf(f, "  local:\n    *;\n};\n");
    fclose(f);
}

static const char *disp_name(enum disposition d)
{
    static const char *const names[] = { "generated", "client-hand", "hand", "local", "refused",
                                         "own" };
    return names[d];
}

/* ---- where hand-written functions live ---------------------------------------------- */

/* Names found in the hand-written files, so that the coverage report can
 * say where a function's code is and the generator can tell what the
 * client sends: in the client's folders (client-sources), the file
 * defining each hand-written export (RGPU_EXPORT ... NAME(); its server
 * side is named at the top of that file), the file calling each of rgpu's
 * own procedures (rgpu_NAME() and the file naming each procedure of this
 * library (RGPU_LIB_NAME, the handle a stub sends it by); in daemon/
 * beside codegen/, the file serving each own procedure (TYPE serve_NAME(
 * at the start of a line).  The first place seen is kept. */
struct defined_in {
    char *name, *file;
};
struct file_index {
    struct defined_in *v;
    int n;
};
static struct file_index defs, callers, serves, sends;
static char sends_prefix[64];       /* RGPU_CUDART_ */

static void note(struct file_index *ix, const char *name, size_t len, const char *sub,
                 const char *file)
{
    ix->v = realloc(ix->v, (size_t)(ix->n + 1) * sizeof *ix->v);
    if (!ix->v)
        die("out of memory");
    struct defined_in *d = &ix->v[ix->n++];
    d->name = strndup(name, len);
    d->file = malloc(strlen(sub) + strlen(file) + 2);
    if (!d->name || !d->file)
        die("out of memory");
    sprintf(d->file, "%s/%s", sub, file);
}

static const char *lookup(const struct file_index *ix, const char *name)
{
    for (int i = 0; i < ix->n; i++)
        if (strcmp(ix->v[i].name, name) == 0)
            return ix->v[i].file;
    return NULL;
}

static int is_ident(int c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* RGPU_EXPORT ... NAME(: a hand-written export. */
static void note_export(const char *line, const char *sub, const char *file)
{
    const char *paren = strchr(line, '('), *end, *start;
    if (strncmp(line, "RGPU_EXPORT ", 12) != 0 || !paren)
        return;
    for (end = paren; end > line && isspace((unsigned char)end[-1]);)
        end--;
    for (start = end; start > line && is_ident(start[-1]);)
        start--;
    if (start != end)
        note(&defs, start, (size_t)(end - start), sub, file);
}

/* rgpu_NAME( anywhere: a call of one of rgpu's own procedures, perhaps. */
static void note_own_calls(const char *line, const char *sub, const char *file)
{
    for (const char *at = strstr(line, "rgpu_"); at; at = strstr(at + 1, "rgpu_")) {
        size_t n = 0;
        while (is_ident(at[n]))
            n++;
        if (at[n] == '(' && (at == line || !is_ident(at[-1])))
            note(&callers, at, n, sub, file);
    }
}

/* RGPU_LIB_NAME anywhere: procedure NAME of this library, sent. */
static void note_sends(const char *line, const char *sub, const char *file)
{
    size_t plen = strlen(sends_prefix);
    for (const char *at = strstr(line, sends_prefix); at; at = strstr(at + 1, sends_prefix)) {
        size_t n = 0;
        while (is_ident(at[plen + n]))
            n++;
        if (n && (at == line || !is_ident(at[-1])))
            note(&sends, at + plen, n, sub, file);
    }
}

static void note_client_line(const char *line, const char *sub, const char *file)
{
    note_export(line, sub, file);
    note_own_calls(line, sub, file);
    note_sends(line, sub, file);
}

static void note_serve_line(const char *line, const char *sub, const char *file)
{
    const char *at = strstr(line, " serve_rgpu_"), *paren;
    if (at && !isspace((unsigned char)line[0]) && (paren = strchr(at, '(')))
        note(&serves, at + 7, (size_t)(paren - at - 7), sub, file);
}

/* Each line of each .c and .h file in folder dir, reported as sub/FILE. */
static void scan_folder(const char *dir, const char *sub,
                        void (*per_line)(const char *line, const char *sub, const char *file))
{
    char path[8192], line[1024];
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n <= 2 || (strcmp(e->d_name + n - 2, ".c") != 0 && strcmp(e->d_name + n - 2, ".h")) ||
            (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path)
            continue;
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        while (fgets(line, sizeof line, f))
            per_line(line, sub, e->d_name);
        fclose(f);
    }
    closedir(d);
}

static void index_hand_written(const struct annotations *ann)
{
    char dir[4096];
    const char *slash = strrchr(ann->path, '/');
    int len = slash ? (int)(slash - ann->path) : 1;
    char up[48];
    upper(up, ann->library, sizeof up);
    snprintf(sends_prefix, sizeof sends_prefix, "RGPU_%s_", up);
    for (int i = 0; i < ann->nclient_sources; i++)
        scan_folder(ann->client_sources[i], ann->client_names[i], note_client_line);
    if ((size_t)snprintf(dir, sizeof dir, "%.*s/../daemon", len, slash ? ann->path : ".") <
        sizeof dir)
        scan_folder(dir, "daemon", note_serve_line);
}

/* Who sends procedure e: the generated stub, or the first client file
 * naming it (RGPU_LIB_NAME, or rgpu_NAME( for rgpu's own); NULL: nobody. */
static const char *sender(const struct export_fn *e)
{
    if (e->disp == D_GENERATED)
        return "generated";
    const char *file = lookup(&sends, e->name);
    if (!file && e->disp == D_OWN)
        file = lookup(&callers, e->name);
    return file;
}

/* The server serves no procedure that no client sends: a function the
 * client serves by hand with other procedures, locally or not at all has
 * none.  Those are `hand`, `local` or `refuse`, not `client`. */
static void check_sent(const struct gen *g)
{
    for (int i = 0; i < g->nprocs; i++) {
        const struct export_fn *e = g->procs[i];
        if (sender(e))
            continue;
        if (!g->ann->nclient_sources)
            problem("%s: %s has a procedure whose sender cannot be found: give client-sources "
                    "DIR in %s", e->proto->where, e->name, g->ann->path);
        else if (e->disp == D_OWN)
            problem("%s: %s: no client file calls this procedure: the server would serve what "
                    "no client sends; remove it", e->proto->where, e->name);
        else
            problem("%s: %s is annotated client, but no client file sends its procedure "
                    "(%s%s): the server would serve what no client sends; annotate it hand, "
                    "local or refuse in %s", e->proto->where, e->name, sends_prefix, e->name,
                    g->ann->path);
    }
}

static const char *defining_file(const char *name)
{
    return lookup(&defs, name);
}

static void emit_coverage(const struct gen *g)
{
    int count[6] = { 0 };
    char path[2048];
    for (int i = 0; i < g->nexp; i++)
        count[g->exp[i].disp]++;
    snprintf(path, sizeof path, "%s/%s-coverage.txt", g->outdir, g->lib);
    FILE *f = fopen(path, "w");
    if (!f)
        die("%s: cannot write", path);
    fprintf(f, "%s: %d exported functions\n", g->soname, g->nexp);
    fprintf(f, "  served by generated code:    %d\n", count[D_GENERATED]);
    fprintf(f, "  served by hand-written code: %d (client-hand %d, hand %d, local %d)\n",
            count[D_CLIENT_HAND] + count[D_HAND] + count[D_LOCAL], count[D_CLIENT_HAND],
            count[D_HAND], count[D_LOCAL]);
    fprintf(f, "  refused (not supported):     %d\n\n", count[D_REFUSED]);
    for (int i = 0; i < g->nexp; i++) {
        const struct export_fn *e = &g->exp[i];
        /* No trailing blanks: the report is read and diffed. */
        fprintf(f, "%-50s %s", e->name, disp_name(e->disp));
        if (e->async)
            fprintf(f, " async");
        char since[160] = "";
        if (e->since && has_procedure(e))
            snprintf(since, sizeof since, "%scame with version %u: refused at the call by a "
                     "server whose library is older", e->reason ? "; " : "", e->since);
        if (e->reason || since[0])
            fprintf(f, "%*s%s%s", (int)(12 - strlen(disp_name(e->disp)) - (e->async ? 6 : 0)),
                    "", e->reason ? e->reason : "", since);
        const char *file = e->disp == D_GENERATED || e->disp == D_REFUSED ? NULL
                                                                           : defining_file(e->name);
        if (file && (!e->reason || !strstr(e->reason, file)))
            fprintf(f, " [%s]", file);
        fprintf(f, "\n");
    }
    if (g->nown)
        fprintf(f, "\nrgpu's own procedures (codegen/%s): %d\n",
                strrchr(g->ann->procedures, '/') + 1, g->nown);
    for (int i = 0; i < g->nown; i++) {
        const char *client = sender(&g->own[i]);
        const char *server = lookup(&serves, g->own[i].name);
        fprintf(f, "%-50s own [client: %s] [server: %s]\n", g->own[i].name,
                client ? client : "none", server ? server : "none");
    }
    fclose(f);
}

/* NAME-sent.txt: every procedure of the table and who sends it, one
 * "PROCEDURE SENDER" a line (SENDER: "generated" for a generated stub, the
 * client file naming it, or "none", which check_sent does not let by), in
 * the table's order (tests/procedures.sh
 * compares rgpud's table with it). */
static void emit_sent(const struct gen *g)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s-sent.txt", g->outdir, g->lib);
    FILE *f = fopen(path, "w");
    if (!f)
        die("%s: cannot write", path);
    for (int i = 0; i < g->nprocs; i++)
        fprintf(f, "%s %s\n", g->procs[i]->name,
                sender(g->procs[i]) ? sender(g->procs[i]) : "none");
    fclose(f);
}

/* ---- rgpu's own procedures ---------------------------------------------------- */

/* Whether fn was declared in the header at path (by its file name: the
 * parser may spell the directory otherwise). */
static int declared_in(const struct gen_func *fn, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *colon = strrchr(fn->where, ':');
    size_t n = strlen(base);
    if (!colon || (size_t)(colon - fn->where) < n || strncmp(colon - n, base, n) != 0)
        return 0;
    return colon - n == fn->where || colon[-(long)n - 1] == '/';
}

static void collect_own(struct gen *g, struct annotations *ann, struct gen_func *funcs,
                        int nfuncs)
{
    if (!ann->procedures)
        return;
    g->own = xcalloc((size_t)nfuncs, sizeof *g->own);
    for (int i = 0; i < nfuncs; i++) {
        if (!declared_in(&funcs[i], ann->procedures))
            continue;
        if (strncmp(funcs[i].name, "rgpu_", 5) != 0) {
            problem("%s: %s: rgpu's own procedures are named rgpu_*", funcs[i].where,
                    funcs[i].name);
            continue;
        }
        struct export_fn *e = &g->own[g->nown++];
        e->name = funcs[i].name;
        e->proto = &funcs[i];
        e->disp = D_OWN;
        apply_param_rules(e, ann);
        check_generated(e, ann);
        classify_handles(e, ann);
        g->procs[g->nprocs++] = e;
    }
    if (!g->nown)
        problem("%s declares no rgpu_* procedure", ann->procedures);
}

/* ---- main ------------------------------------------------------------------- */


static const char *sort_lib;

static int cmp_by_id(const void *a, const void *b)
{
    const struct export_fn *x = *(struct export_fn *const *)a, *y = *(struct export_fn *const *)b;
    uint32_t ix = rgpu_proc_id(sort_lib, x->name), iy = rgpu_proc_id(sort_lib, y->name);
    return ix < iy ? -1 : ix > iy;
}

/* Whether the headers declare a function the rule names. */
static int declared(const struct ann_rule *r, const struct gen_func *funcs, int nfuncs)
{
    for (int i = 0; i < nfuncs; i++)
        if (rule_matches(r, funcs[i].name))
            return 1;
    return 0;
}

/* A rule that matches nothing has rotted, unless it names what a newer
 * release brought (`since`) and these headers are older: they declare
 * nothing it names either. */
static void check_rules_used(const struct annotations *ann, const struct gen_func *funcs,
                             int nfuncs)
{
    for (int i = 0; i < ann->nunchecked; i++)
        if (!ann->unchecked_used[i])
            die("%s: unchecked-handle %s: no generated function takes or returns one", ann->path,
                ann->unchecked[i]);
    for (int i = 0; i < ann->nrules; i++) {
        const struct ann_rule *r = &ann->rules[i];
        if (r->used || (r->since && !declared(r, funcs, nfuncs)))
            continue;
        die("%s:%d: rule '%s' matches no exported function%s", ann->path, r->line, r->pattern,
            r->since ? " (the headers declare it: is it missing from the reference?)" : "");
    }
}

/* The generator runs once per build and exits: the tables it builds live
 * until then on purpose, so LeakSanitizer (in a -Db_sanitize=address build)
 * would fail the build on them.  Off here only; rgpud and the libraries keep
 * leak checking. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

int main(int argc, char **argv)
{
    struct annotations ann;
    struct gen g = { 0 };
    int nfuncs, nexports;

    if (argc > 1 && strcmp(argv[1], "--compat") == 0)
        return compat_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "--compare") == 0)
        return compare_main(argc - 1, argv + 1);
    if (argc != 6)
        die("usage: rgpu-gen ANNOTATIONS CUDA_ROOT REFERENCE_LIB SONAME OUTDIR");
    ann_load(argv[1], &ann);
    struct gen_func *funcs = parse_headers(&ann, argv[2], &nfuncs);
    /* "-": a library of rgpu's own procedures alone (the client core's). */
    char **exports = strcmp(argv[3], "-") == 0 ? NULL
                                               : elf_exported_functions(argv[3], &nexports);
    if (!exports)
        nexports = 0;

    for (int i = 0; i < nfuncs; i++) {
        const char *r = funcs[i].ret;
        funcs[i].ret_is_status = strcmp(r, ann.status_type) == 0;
    }
    g.ann = &ann;
    emit_ann = &ann;
    g.lib = ann.library;
    g.soname = argv[4];
    g.outdir = argv[5];
    g.version = parse_version(&ann, argv[2]);
    g.nexp = nexports;
    g.exp = xcalloc((size_t)nexports, sizeof *g.exp);
    g.procs = xcalloc((size_t)(nexports + nfuncs), sizeof *g.procs);
    for (int i = 0; i < nexports; i++) {
        struct export_fn *e = &g.exp[i];
        e->name = exports[i];
        e->proto = gen_find_func(funcs, nfuncs, e->name);
        decide(e, &ann, exports, nexports);
        e->since = since_of(e, &ann);
        if (has_procedure(e)) {
            if (!e->proto) {
                problem("%s: exported by the reference library but declared by no header: "
                        "annotate it in %s (hand, local or refuse)", e->name, ann.path);
                continue;
            }
            apply_param_rules(e, &ann);
            check_generated(e, &ann);
            classify_handles(e, &ann);
            g.procs[g.nprocs++] = e;
        } else if (e->disp == D_REFUSED && e->proto && !e->proto->ret_is_status &&
                   strcmp(e->proto->ret, "void") != 0) {
            problem("%s: %s returns %s: a refused stub cannot answer that; use local or hand",
                e->proto->where, e->name, e->proto->ret);
        }
    }
    collect_own(&g, &ann, funcs, nfuncs);
    check_rules_used(&ann, funcs, nfuncs);
    index_hand_written(&ann);
    check_sent(&g);
    if (nproblems)
        die("%d functions need annotations or fixes in %s", nproblems, ann.path);
    sort_lib = g.lib;
    qsort(g.procs, (size_t)g.nprocs, sizeof *g.procs, cmp_by_id);
    for (int i = 1; i < g.nprocs; i++)
        if (rgpu_proc_id(g.lib, g.procs[i]->name) == rgpu_proc_id(g.lib, g.procs[i - 1]->name))
            die("procedure id collision: %s and %s", g.procs[i]->name, g.procs[i - 1]->name);

    emit_procs_h(&g);
    emit_table_c(&g);
    emit_client_c(&g);
    emit_refused_c(&g);
    emit_serve_h(&g);
    emit_server_c(&g);
    if (ann.errors_enum)
        emit_errors_c(&g, argv[2]);
    if (ann.typedefs) {
        char in[2048], out[2048];
        snprintf(in, sizeof in, "%s/include/%s", argv[2], ann.typedefs);
        snprintf(out, sizeof out, "%s/%s_procaddr.c", g.outdir, g.lib);
        emit_procaddr(in, out, g.lib, exports, nexports, ann.path);
    }
    emit_map(&g);
    emit_coverage(&g);
    emit_sent(&g);
    return 0;
}
