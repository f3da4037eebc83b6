/* Reading the CUDA headers with libclang, and the default classification of
 * every parameter.  What the types settle is settled here; what they cannot
 * settle (void pointers, arrays, callbacks) is left K_NONE with a reason, for
 * an annotation to decide. */
#include "rgpu-gen.h"

#include <clang-c/Index.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parse_state {
    struct gen_func *funcs;
    int n, cap;
    const struct annotations *ann;
};

static const struct annotations *current_ann;
const char *parse_extra_flag;

static char *cx_dup(CXString s)
{
    char *r = xstrdup(clang_getCString(s));
    clang_disposeString(s);
    return r;
}

static int is_scalar(CXType t)
{
    t = clang_getCanonicalType(t);
    return (t.kind >= CXType_Bool && t.kind <= CXType_LongDouble) || t.kind == CXType_Enum;
}

/* A record is "opaque" when only declared: CUstream_st behind cudaStream_t. */
static int is_incomplete_record(CXType t)
{
    t = clang_getCanonicalType(t);
    return t.kind == CXType_Record && clang_Type_getSizeOf(t) < 0;
}

static int type_has_pointer(CXType t);

static enum CXVisitorResult field_visitor(CXCursor c, CXClientData data)
{
    if (type_has_pointer(clang_getCursorType(c))) {
        *(int *)data = 1;
        return CXVisit_Break;
    }
    return CXVisit_Continue;
}

/* Whether bytes of this type can be copied between processes as they are. */
static int type_has_pointer(CXType t)
{
    t = clang_getCanonicalType(t);
    if (t.kind == CXType_Pointer)
        return 1;
    if (t.kind == CXType_ConstantArray)
        return type_has_pointer(clang_getArrayElementType(t));
    if (t.kind == CXType_Record) {
        int found = 0;
        clang_Type_visitFields(t, field_visitor, &found);
        return found;
    }
    return 0;
}

static void set_none(struct gen_param *p, const char *why)
{
    p->kind = K_NONE;
    p->why = xstrdup(why);
}

/* Whether t names one of the library's device-memory element types
 * (device-pointers in the annotations), by its spelling without const or
 * by its canonical spelling. */
static int is_device_pointee(CXType t)
{
    if (!current_ann)
        return 0;
    CXString s1 = clang_getTypeSpelling(t);
    CXString s2 = clang_getTypeSpelling(clang_getCanonicalType(t));
    const char *a = clang_getCString(s1), *b = clang_getCString(s2);
    if (strncmp(a, "const ", 6) == 0)
        a += 6;
    if (strncmp(b, "const ", 6) == 0)
        b += 6;
    int found = 0;
    for (int i = 0; i < current_ann->ndevice_pointees && !found; i++)
        found = !strcmp(a, current_ann->device_pointees[i]) ||
                !strcmp(b, current_ann->device_pointees[i]);
    clang_disposeString(s1);
    clang_disposeString(s2);
    return found;
}

/* canon is a pointer type, or an array parameter (which C passes as a
 * pointer to its element). */
static CXType element_of(CXType t)
{
    return t.kind == CXType_Pointer ? clang_getPointeeType(t) : clang_getArrayElementType(t);
}

/* The class of a handle: the name of the record it points at (cudaStream_t
 * and CUstream are both CUstream_st *, one class). */
static char *record_name(CXType record)
{
    CXString s = clang_getTypeSpelling(clang_getCanonicalType(record));
    const char *n = clang_getCString(s);
    if (strncmp(n, "const ", 6) == 0)
        n += 6;
    if (strncmp(n, "struct ", 7) == 0)
        n += 7;
    char *r = xstrdup(n);
    clang_disposeString(s);
    return r;
}

static int is_handle_type(CXType t);
static int is_device_value(CXType t);

/* CUdeviceptr_v1: the 32-bit device address of the CUDA 2.x ABI.  The
 * session's memory table holds 64-bit addresses, so such a value could be
 * neither checked nor recorded. */
#define NARROW_DEVICE_ADDRESS "device address narrower than 64 bits (the CUDA 2.x ABI)"

/* The handle class of type t (a handle value), or NULL. */
static char *handle_class_of(CXType t)
{
    CXType c = clang_getCanonicalType(t);
    if (c.kind == CXType_Pointer && is_incomplete_record(clang_getPointeeType(c)))
        return record_name(clang_getPointeeType(c));
    if (is_handle_type(t)) {
        if (c.kind == CXType_Pointer &&
            clang_getCanonicalType(clang_getPointeeType(c)).kind == CXType_Record)
            return record_name(clang_getPointeeType(c));
        /* An integer or void * handle: its typedef names the class. */
        CXString s = clang_getTypeSpelling(t);
        const char *n = clang_getCString(s);
        char *r = xstrdup(strncmp(n, "const ", 6) == 0 ? n + 6 : n);
        clang_disposeString(s);
        return r;
    }
    return NULL;
}

static void classify_pointer(struct gen_param *p, CXType canon, CXType orig)
{
    CXType pointee = element_of(canon);
    /* Typedef names (cuComplex) survive only in the declared type. */
    CXType declared = orig.kind == CXType_Typedef || orig.kind == CXType_Elaborated
                          ? element_of(clang_getCanonicalType(orig)) : element_of(orig);
    if (orig.kind == CXType_Pointer || orig.kind == CXType_IncompleteArray ||
        orig.kind == CXType_ConstantArray)
        declared = element_of(orig);
    CXType pc = clang_getCanonicalType(pointee);
    /* An array parameter's element keeps its const only as declared. */
    int is_const = clang_isConstQualifiedType(pointee) || clang_isConstQualifiedType(declared);
    int open_array = orig.kind == CXType_IncompleteArray;
    long long psize = clang_Type_getSizeOf(pc);

    p->pointee_size = psize > 0 ? (unsigned)psize : 0;
    if (pc.kind == CXType_FunctionProto || pc.kind == CXType_FunctionNoProto)
        return set_none(p, "function pointer (a callback runs on the client)");
    if (is_incomplete_record(pc)) {
        p->kind = K_VAL;                /* an opaque handle: checked (rgpu-gen) */
        p->size = 8;
        p->handle_class = record_name(pc);
        return;
    }
    /* A pointer to handles: where a function returns one, or an array. */
    p->pointee_class = handle_class_of(declared);
    /* Device memory, or an array of device pointers (itself in device
     * memory, as cuBLAS's batched calls take it: T *const[] or T *const *).
     * A plain T ** is where a function returns a pointer: an output. */
    int pointer_array = clang_getCanonicalType(declared).kind == CXType_Pointer &&
                        (open_array || orig.kind == CXType_ConstantArray ||
                         clang_isConstQualifiedType(declared));
    if (is_device_pointee(declared) ||
        (pointer_array && is_device_pointee(clang_getPointeeType(declared)))) {
        p->kind = K_DEVPTR;             /* checked on the server */
        p->size = 1;
        return;
    }
    if (is_device_value(declared) && psize != 8) {
        p->narrow_address = 1;
        return set_none(p, NARROW_DEVICE_ADDRESS);
    }
    if (pc.kind == CXType_Void)
        return set_none(p, "untyped pointer: host or device, and how large?");
    if (open_array)
        return set_none(p, "array of unstated length");
    if ((pc.kind == CXType_Char_S || pc.kind == CXType_Char_U) && is_const) {
        p->kind = K_STR;
        return;
    }
    if (pc.kind == CXType_Pointer) {
        CXType inner = clang_getCanonicalType(clang_getPointeeType(pc));
        if (inner.kind == CXType_Char_S || inner.kind == CXType_Char_U)
            return set_none(p, "returns a pointer to a string");
        if (is_const)
            return set_none(p, "array of pointers");
        p->kind = K_OUT;                /* T **: a pointer value comes back */
        p->size = 8;
        return;
    }
    if (is_const) {
        if (pc.kind == CXType_Record && !type_has_pointer(pc)) {
            p->kind = K_IN;
            p->size = (unsigned)psize;
            return;
        }
        return set_none(p, pc.kind == CXType_Record ? "structure holding pointers"
                                                    : "const pointer: one value or an array?");
    }
    if (is_scalar(pc) || (pc.kind == CXType_Record && !type_has_pointer(pc))) {
        p->kind = K_OUT;
        p->size = (unsigned)psize;
        return;
    }
    set_none(p, pc.kind == CXType_Record ? "structure holding pointers" : "pointer of unknown use");
}

/* Whether t's declared spelling (without const) is one of names. */
static int spelled_as_one_of(CXType t, char *const *names, int n)
{
    CXString s = clang_getTypeSpelling(t);
    const char *sp = clang_getCString(s);
    if (strncmp(sp, "const ", 6) == 0)
        sp += 6;
    int found = 0;
    for (int i = 0; i < n && !found; i++)
        found = !strcmp(sp, names[i]);
    clang_disposeString(s);
    return found;
}

/* A typedef the annotations call a handle, however complete its pointee. */
static int is_handle_type(CXType t)
{
    return current_ann &&
           spelled_as_one_of(t, current_ann->handle_types, current_ann->nhandle_types);
}

/* An integer typedef the annotations call a device address (CUdeviceptr). */
static int is_device_value(CXType t)
{
    return current_ann &&
           spelled_as_one_of(t, current_ann->device_values, current_ann->ndevice_values);
}

static void classify(struct gen_param *p, CXType t)
{
    CXType canon = clang_getCanonicalType(t);
    long long size = clang_Type_getSizeOf(canon);

    p->len_arg = -1;
    p->aux_arg = -1;
    p->used_arg = -1;
    if (is_handle_type(t)) {
        p->kind = K_VAL;
        p->size = 8;
        p->handle_class = handle_class_of(t);
        return;
    }
    if (is_scalar(canon) && size == 8 && is_device_value(t)) {
        p->kind = K_DEVPTR;             /* checked on the server */
        p->size = 1;
    } else if (is_device_value(t)) {
        p->narrow_address = 1;
        set_none(p, NARROW_DEVICE_ADDRESS);
    } else if (is_scalar(canon) && size > 0 && size <= 8) {
        p->kind = K_VAL;
        p->size = (unsigned)size;
    } else if (canon.kind == CXType_Pointer || canon.kind == CXType_IncompleteArray ||
               canon.kind == CXType_ConstantArray) {
        classify_pointer(p, canon, t);
    } else if (canon.kind == CXType_Record && size > 0 && !type_has_pointer(canon)) {
        p->kind = K_BYVAL;
        p->size = (unsigned)size;
    } else {
        set_none(p, "type not understood");
    }
}

static char *location_of(CXCursor c)
{
    CXFile file;
    unsigned line, col, off;
    char buf[1024];
    clang_getExpansionLocation(clang_getCursorLocation(c), &file, &line, &col, &off);
    CXString fname = clang_getFileName(file);
    snprintf(buf, sizeof buf, "%s:%u", clang_getCString(fname) ? clang_getCString(fname) : "?", line);
    clang_disposeString(fname);
    return xstrdup(buf);
}

struct gen_func *gen_find_func(struct gen_func *funcs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(funcs[i].name, name) == 0)
            return &funcs[i];
    return NULL;
}

/* ---- ABI signatures: what two header releases must agree on ------------------
 *
 * A function's signature spells, through typedefs, every type its caller
 * and callee share: scalars by kind and size, enums by size (new
 * enumerators do not break callers), arrays by length, records by size and
 * by each field's name, offset and type, followed through pointers.  Two
 * releases whose signatures of a function are equal pass the same bytes. */

struct sig {
    char *buf;
    size_t len, cap;
    int depth;
};

static void sig_add(struct sig *s, const char *text)
{
    size_t n = strlen(text);
    if (s->len + n + 1 > s->cap) {
        s->cap = (s->len + n + 1) * 2;
        s->buf = realloc(s->buf, s->cap);
        if (!s->buf)
            die("out of memory");
    }
    memcpy(s->buf + s->len, text, n + 1);
    s->len += n;
}

static void sig_type(struct sig *s, CXType t);

static enum CXVisitorResult sig_field(CXCursor c, CXClientData data)
{
    struct sig *s = data;
    char buf[256];
    CXString name = clang_getCursorSpelling(c);
    snprintf(buf, sizeof buf, "%s@%lld:", clang_getCString(name), clang_Cursor_getOffsetOfField(c));
    clang_disposeString(name);
    sig_add(s, buf);
    sig_type(s, clang_getCursorType(c));
    sig_add(s, ";");
    return CXVisit_Continue;
}

static int is_handle_type(CXType t);

static void sig_type(struct sig *s, CXType t)
{
    char buf[64];
    /* A handle is opaque whatever its pointee holds (cuBLASLt's descriptors
     * point at storage whose size changes between releases). */
    if (is_handle_type(t)) {
        sig_add(s, "handle");
        return;
    }
    CXType spelled = t;
    t = clang_getCanonicalType(t);
    if (clang_isConstQualifiedType(t))
        sig_add(s, "const ");
    snprintf(buf, sizeof buf, "%lld", clang_Type_getSizeOf(t));
    switch (t.kind) {
    case CXType_Pointer:
        sig_add(s, "*");
        /* Deep enough for the descriptors CUDA passes (a launch config's
         * attributes); a record that points at its own kind ends here. */
        if (s->depth < 4) {
            s->depth++;
            /* The pointee as spelled, so that a pointer to a handle is one. */
            sig_type(s, clang_getPointeeType(spelled.kind == CXType_Pointer ? spelled : t));
            s->depth--;
        }
        return;
    case CXType_ConstantArray:
        snprintf(buf, sizeof buf, "[%lld]", clang_getArraySize(t));
        sig_add(s, buf);
        sig_type(s, clang_getArrayElementType(t));
        return;
    case CXType_Record:
        sig_add(s, "{");
        sig_add(s, buf);
        sig_add(s, ":");
        clang_Type_visitFields(t, sig_field, s);
        sig_add(s, "}");
        return;
    case CXType_Enum:
        sig_add(s, "enum");
        sig_add(s, buf);
        return;
    case CXType_FunctionProto:
        sig_add(s, "fn(");
        for (int i = 0; i < clang_getNumArgTypes(t); i++) {
            sig_type(s, clang_getArgType(t, (unsigned)i));
            sig_add(s, ",");
        }
        sig_add(s, ")");
        sig_type(s, clang_getResultType(t));
        return;
    default: {
        CXString k = clang_getTypeKindSpelling(t.kind);
        sig_add(s, clang_getCString(k));
        clang_disposeString(k);
        sig_add(s, buf);
        return;
    }
    }
}

static char *type_signature(CXType t)
{
    struct sig s = { 0 };
    sig_type(&s, t);
    return s.buf;
}

static char *abi_signature(CXCursor c)
{
    struct sig s = { 0 };
    sig_add(&s, "(");
    for (int i = 0; i < clang_Cursor_getNumArguments(c); i++) {
        sig_type(&s, clang_getCursorType(clang_Cursor_getArgument(c, (unsigned)i)));
        sig_add(&s, ",");
    }
    sig_add(&s, ")");
    sig_type(&s, clang_getCursorResultType(c));
    return s.buf;
}

static void record_function(struct parse_state *st, CXCursor c)
{
    char *name = cx_dup(clang_getCursorSpelling(c));
    if (gen_find_func(st->funcs, st->n, name)) {
        free(name);
        return;
    }
    if (st->n == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 512;
        st->funcs = realloc(st->funcs, (size_t)st->cap * sizeof *st->funcs);
        if (!st->funcs)
            die("out of memory");
    }
    struct gen_func *f = &st->funcs[st->n++];
    memset(f, 0, sizeof *f);
    f->name = name;
    f->ret = cx_dup(clang_getTypeSpelling(clang_getCursorResultType(c)));
    f->where = location_of(c);
    f->abi = abi_signature(c);
    int n = clang_Cursor_getNumArguments(c);
    if (n > MAX_PARAMS)
        die("%s: %s has %d parameters, more than %d", f->where, name, n, MAX_PARAMS);
    f->nparams = n < 0 ? 0 : n;
    for (int i = 0; i < f->nparams; i++) {
        CXCursor a = clang_Cursor_getArgument(c, (unsigned)i);
        struct gen_param *p = &f->params[i];
        char *pname = cx_dup(clang_getCursorSpelling(a));
        if (!*pname) {
            free(pname);
            pname = xcalloc(1, 16);
            snprintf(pname, 16, "a%d", i);
        }
        p->name = pname;
        p->type = cx_dup(clang_getTypeSpelling(clang_getCursorType(a)));
        p->abi = type_signature(clang_getCursorType(a));
        classify(p, clang_getCursorType(a));
    }
}

static enum CXChildVisitResult visit_top(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    if (clang_getCursorKind(c) == CXCursor_FunctionDecl)
        record_function(data, c);
    /* Parsed as C++, the declarations sit inside extern "C" { }, which
     * libclang 14 shows as an unexposed declaration. */
    if (clang_getCursorKind(c) == CXCursor_LinkageSpec ||
        clang_getCursorKind(c) == CXCursor_UnexposedDecl)
        return CXChildVisit_Recurse;
    return CXChildVisit_Continue;
}

static void parse_one(CXIndex index, struct parse_state *st, const char *header,
                      const char *cuda_root, const char *variant)
{
    char incflag[1024], path[1024], vbuf[1024];
    const char *args[40];
    int nargs = 0;
    snprintf(incflag, sizeof incflag, "-I%s/include", cuda_root);
    if (header[0] == '/')       /* header-local: one of ours */
        snprintf(path, sizeof path, "%s", header);
    else
        snprintf(path, sizeof path, "%s/include/%s", cuda_root, header);
    /* A variant may name its own language (-x c++): then it replaces C. */
    if (!variant || !strstr(variant, "-x ")) {
        args[nargs++] = "-x";
        args[nargs++] = "c";
        args[nargs++] = "-std=gnu11";
    }
    args[nargs++] = incflag;
    if (parse_extra_flag)
        args[nargs++] = parse_extra_flag;
    if (variant) {
        snprintf(vbuf, sizeof vbuf, "%s", variant);
        for (char *tok = strtok(vbuf, " \t"); tok && nargs < 38; tok = strtok(NULL, " \t"))
            args[nargs++] = tok;
    }
    CXTranslationUnit tu = clang_parseTranslationUnit(index, path, args, nargs, NULL, 0,
                                                      CXTranslationUnit_SkipFunctionBodies);
    if (!tu)
        die("%s: libclang could not parse it", path);
    for (unsigned i = 0; i < clang_getNumDiagnostics(tu); i++) {
        CXDiagnostic d = clang_getDiagnostic(tu, i);
        if (clang_getDiagnosticSeverity(d) >= CXDiagnostic_Error) {
            CXString s = clang_formatDiagnostic(d, clang_defaultDiagnosticDisplayOptions());
            die("%s", clang_getCString(s));
        }
        clang_disposeDiagnostic(d);
    }
    clang_visitChildren(clang_getTranslationUnitCursor(tu), visit_top, st);
    clang_disposeTranslationUnit(tu);
}

struct gen_func *parse_headers(const struct annotations *ann, const char *cuda_root, int *n)
{
    struct parse_state st = { 0 };
    CXIndex index = clang_createIndex(0, 0);
    current_ann = ann;
    for (int h = 0; h < ann->nheaders; h++) {
        parse_one(index, &st, ann->headers[h], cuda_root, NULL);
        for (int v = 0; v < ann->nvariants; v++)
            parse_one(index, &st, ann->headers[h], cuda_root, ann->variants[v]);
    }
    clang_disposeIndex(index);
    *n = st.n;
    return st.funcs;
}

/* ---- the error enum: names and descriptions answered on the client ------- */

struct enum_state {
    const char *want;
    struct gen_enum_const *consts;
    int n, cap;
};

static char *collapse_space(char *s)
{
    char *w = s;
    int space = 0;
    for (char *r = s; *r; r++) {
        if (*r == ' ' || *r == '\n' || *r == '\t') {
            space = w != s;
            continue;
        }
        if (space)
            *w++ = ' ';
        space = 0;
        *w++ = *r;
    }
    *w = '\0';
    return s;
}

static enum CXChildVisitResult visit_enum_consts(CXCursor c, CXCursor parent, CXClientData data)
{
    struct enum_state *st = data;
    (void)parent;
    if (clang_getCursorKind(c) != CXCursor_EnumConstantDecl)
        return CXChildVisit_Continue;
    if (st->n == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 256;
        st->consts = realloc(st->consts, (size_t)st->cap * sizeof *st->consts);
        if (!st->consts)
            die("out of memory");
    }
    struct gen_enum_const *k = &st->consts[st->n++];
    k->name = cx_dup(clang_getCursorSpelling(c));
    k->value = clang_getEnumConstantDeclValue(c);
    char *doc = cx_dup(clang_Cursor_getBriefCommentText(c));
    k->doc = *doc ? collapse_space(doc) : NULL;
    return CXChildVisit_Continue;
}

static enum CXChildVisitResult visit_enums(CXCursor c, CXCursor parent, CXClientData data)
{
    struct enum_state *st = data;
    (void)parent;
    if (clang_getCursorKind(c) == CXCursor_EnumDecl && st->n == 0) {
        CXString s = clang_getCursorSpelling(c);
        int match = strcmp(clang_getCString(s), st->want) == 0;
        clang_disposeString(s);
        if (match)
            clang_visitChildren(c, visit_enum_consts, st);
    }
    /* typedef enum { ... } cublasStatus_t: found by the typedef's name. */
    if (clang_getCursorKind(c) == CXCursor_TypedefDecl && st->n == 0) {
        CXString s = clang_getCursorSpelling(c);
        int match = strcmp(clang_getCString(s), st->want) == 0;
        clang_disposeString(s);
        CXCursor decl = clang_getTypeDeclaration(
            clang_getCanonicalType(clang_getTypedefDeclUnderlyingType(c)));
        if (match && clang_getCursorKind(decl) == CXCursor_EnumDecl)
            clang_visitChildren(decl, visit_enum_consts, st);
    }
    return CXChildVisit_Continue;
}

struct gen_enum_const *parse_error_enum(const struct annotations *ann, const char *cuda_root,
                                        int *n)
{
    struct enum_state st = { .want = ann->errors_enum };
    char incflag[1024], path[1024];
    const char *args[] = { "-x", "c", "-std=gnu11", incflag };
    snprintf(incflag, sizeof incflag, "-I%s/include", cuda_root);
    snprintf(path, sizeof path, "%s/include/%s", cuda_root, ann->headers[0]);
    CXIndex index = clang_createIndex(0, 0);
    CXTranslationUnit tu = clang_parseTranslationUnit(index, path, args, 4, NULL, 0,
                                                      CXTranslationUnit_SkipFunctionBodies);
    if (!tu)
        die("%s: libclang could not parse it", path);
    clang_visitChildren(clang_getTranslationUnitCursor(tu), visit_enums, &st);
    clang_disposeTranslationUnit(tu);
    clang_disposeIndex(index);
    if (st.n == 0)
        die("%s: no enum %s in %s", ann->path, ann->errors_enum, path);
    *n = st.n;
    return st.consts;
}

/* ---- the headers' own version of the library ----------------------------- */

/* The value of the annotations' `version` expression (CUDART_VERSION) with
 * the first header included: an enumerator's value, which libclang
 * computes; 0 without an expression. */
unsigned parse_version(const struct annotations *ann, const char *cuda_root)
{
    static const char probe_name[] = "/rgpu-version-probe.c";
    struct enum_state st = { .want = "rgpu_version_probe" };
    char incflag[1024], text[2048];
    const char *args[] = { "-x", "c", "-std=gnu11", incflag, parse_extra_flag };
    if (!ann->version_expr)
        return 0;
    snprintf(incflag, sizeof incflag, "-I%s/include", cuda_root);
    snprintf(text, sizeof text, "#include %c%s%c\nenum rgpu_version_probe { v = (%s) };\n",
             ann->headers[0][0] == '/' ? '"' : '<', ann->headers[0],
             ann->headers[0][0] == '/' ? '"' : '>', ann->version_expr);
    struct CXUnsavedFile probe = { probe_name, text, (unsigned long)strlen(text) };
    CXIndex index = clang_createIndex(0, 0);
    CXTranslationUnit tu = clang_parseTranslationUnit(index, probe_name, args,
                                                      parse_extra_flag ? 5 : 4, &probe, 1,
                                                      CXTranslationUnit_SkipFunctionBodies);
    if (!tu)
        die("%s: version %s: libclang could not parse the headers", ann->path,
            ann->version_expr);
    clang_visitChildren(clang_getTranslationUnitCursor(tu), visit_enums, &st);
    clang_disposeTranslationUnit(tu);
    clang_disposeIndex(index);
    if (st.n != 1 || st.consts[0].value <= 0 || st.consts[0].value > 0x7fffffff)
        die("%s: version %s: not a positive number with %s's headers", ann->path,
            ann->version_expr, cuda_root);
    return (unsigned)st.consts[0].value;
}
