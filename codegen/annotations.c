/* The annotation file: what the headers cannot say.
 *
 *   library NAME            cudart, cuda, ...
 *   header FILE             a header to parse (several allowed)
 *   header-local FILE       a header of ours, beside the annotation file: what
 *                           the library exports but no NVIDIA header declares
 *   procedures FILE         a header of ours, beside the annotation file,
 *                           declaring rgpu's own procedures of this library:
 *                           calls of the wire that no library exports
 *                           (array copies, module loads...).  Each is a
 *                           function named rgpu_*, marshalled by the codec
 *                           as any other (arg rules apply); the client
 *                           function is generated, for the hand-written
 *                           stubs to call; the server calls serve_NAME,
 *                           written by hand in daemon/ (NAME_serve.h
 *                           declares them)
 *   client-sources DIR...   folders, beside the annotation file, of the
 *                           client's hand-written code (the stubs, the
 *                           client core): what it sends is found there.
 *                           A `client` function that no file there sends
 *                           and an own procedure that none calls stop the
 *                           generator: the server must serve nothing that
 *                           no client sends (NAME-sent.txt lists who
 *                           sends each procedure)
 *   variant -DMACRO ...     parse the headers again with these defines, to
 *                           see the _ptds/_ptsz names they produce
 *   status TYPE NOTSUP UNAVAIL INVALID  the status type, its not-supported
 *                           value, its value when no server can be reached
 *                           and its invalid-argument value (what a call
 *                           whose device pointer the server refuses
 *                           returns)
 *   proc-address HEADER     emit the cuGetProcAddress table from the PFN_
 *                           typedefs of HEADER (cudaTypedefs.h)
 *   errors ENUM             emit name and description tables of this enum
 *   version EXPR            the headers' version of the library, a C
 *                           expression of their macros in the numbering the
 *                           library's version query answers (CUDART_VERSION):
 *                           in the stub's table, for its messages
 *   type-alias CXX C        spell the C++-only type CXX as C in generated code
 *                           (the layout must be the same: __half, __half_raw)
 *   handle-types TYPE...    typedefs of pointers to complete structs that are
 *                           nonetheless opaque handles (cuBLASLt descriptors)
 *   device-pointers TYPE... pointers to these types (and arrays of such
 *                           pointers) are device memory: kind devptr
 *   device-values TYPE...   integer types that hold a device address
 *                           (CUdeviceptr): kind devptr
 *   invalid-handle STATUS [CLASS...]
 *                           the status for a handle the session never handed
 *                           out (without CLASS: any class; with: those)
 *   unchecked-handle CLASS "why"
 *                           pass handles of CLASS through unchecked
 *   destroys FUNC PARAM     FUNC destroys handle PARAM: forgotten on success
 *                           (default: the only handle of a function named
 *                           *Destroy*, *Free* or *Unload*)
 *   keeps FUNC "why"        FUNC matches the default but destroys nothing
 *   nullable FUNC PARAM...  NULL is a valid value of these handle parameters
 *                           (an optional descriptor): a call passing NULL
 *                           there may still go without waiting.  Elsewhere
 *                           NULL for a handle other than a stream makes
 *                           the call wait, so that the library's error
 *                           comes back at once.  FUNC may be a glob.
 *   runtime                 the library keeps a per-thread last error
 *   versioned               symbols carry a version node named after the soname
 *
 *   local PATTERN "why"     answered on the client, no procedure
 *   hand PATTERN "why"      client and server code are hand-written
 *   client PATTERN "why"    hand-written client sending the function's own
 *                           generated procedure (RGPU_LIB_NAME in a file of
 *                           client-sources); a hand-written client that
 *                           sends other procedures, or none, is `hand`
 *   refuse PATTERN "why"    returns the not-supported status
 *   serve PATTERN           generated, even where a later glob refuses
 *   refuse-superseded "why" an export without prototype whose NAME_vN exists
 *   refuse-narrow-addresses "why"
 *                           an export whose prototype holds a device address
 *                           narrower than 64 bits (CUdeviceptr_v1, listed in
 *                           device-values): the session's memory table
 *                           could neither check nor record it
 *   async PATTERN           may go without waiting for the reply, whenever
 *                           the call fills no host memory
 *   pure PATTERN            the outputs are a function of the arguments:
 *                           the client keeps the answers, used only while
 *                           every handle but the first (the library's
 *                           context) is NULL or a client object kept by
 *                           content (rgpu_register_translator), and
 *                           forgotten when a handle is destroyed (a size
 *                           query of cuDNN tensor descriptors)
 *   since VERSION RULE      RULE (any rule above or below) names what
 *                           VERSION of the library brought, in the
 *                           library's own numbering (what its version query
 *                           answers: cudaRuntimeGetVersion's 13010 for
 *                           CUDA 13.1).  Headers older than that declare
 *                           none of it, so the rule may match nothing then;
 *                           a client refuses such a function at the call
 *                           when the server's library is older (docs/cuda12.md)
 *   arg FUNC PARAM KIND [len=PARAM] [size=N]
 *                           KIND: val in out inout str in-buf out-buf inout-buf, or
 *                           devptr [len=PARAM] [size=N]: a device pointer by
 *                           value, checked on the server against the memory
 *                           the session owns (daemon/owned.c): the range
 *                           [ptr, ptr + PARAM * N) (N defaults to 1), or ptr
 *                           alone without len=; NULL passes; a refused one
 *                           makes the call return INVALID of `status`, or
 *                           in-buf/out-buf [elem=P:FUNC]: element size is
 *                           FUNC(value of P) (FUNC in common/); without
 *                           len=, one element (of size=N bytes), or
 *                           in-buf ... stream: the last parameter, whose
 *                           bytes the client writes from the caller's
 *                           memory after the frame's head, and which the
 *                           server may leave in the socket for the serve_
 *                           function to read (serve_stream_read: copies
 *                           pipelined with the network), or
 *                           out-buf ... sink: bytes the server may send
 *                           ahead of the reply (serve_data_begin) that the
 *                           client reads straight into the caller's
 *                           memory; stream and sink: rgpu's own
 *                           procedures only (their serve_ function takes
 *                           part), or
 *                           out-buf ... used=P: only the first *P elements
 *                           travel back (P an output of the call), or
 *                           scalar scalar-out scalar-inout [type=P] [ctype=P]
 *                           [size=N] (with type=: N elements of that type):
 *                           host value or device pointer by the handle's
 *                           pointer mode (cuBLAS); FUNC may be a glob, then
 *                           functions without PARAM are passed over
 *
 * PATTERN is a name or an fnmatch glob.  A rule that matches nothing is an
 * error (a `since` rule: unless the headers declare nothing it matches
 * either): annotations must not rot silently. */
#include "rgpu-gen.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *next_token(char **p, const char *path, int line)
{
    char *s = *p;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s || *s == '#')
        return NULL;
    if (*s == '"') {
        char *end = strchr(s + 1, '"');
        if (!end)
            die("%s:%d: unterminated string", path, line);
        *end = '\0';
        *p = end + 1;
        return s + 1;
    }
    char *start = s;
    while (*s && !isspace((unsigned char)*s))
        s++;
    if (*s)
        *s++ = '\0';
    *p = s;
    return start;
}

static enum gen_kind parse_kind(const char *s, const char *path, int line)
{
    static const struct { const char *name; enum gen_kind kind; } kinds[] = {
        { "val", K_VAL }, { "in", K_IN }, { "out", K_OUT }, { "inout", K_INOUT },
        { "str", K_STR }, { "in-buf", K_IN_BUF }, { "out-buf", K_OUT_BUF },
        { "scalar", K_SCALAR_IN }, { "scalar-out", K_SCALAR_OUT },
        { "scalar-inout", K_SCALAR_INOUT }, { "inout-buf", K_INOUT_BUF },
        { "devptr", K_DEVPTR },
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(s, kinds[i].name) == 0)
            return kinds[i].kind;
    die("%s:%d: unknown parameter kind '%s'", path, line, s);
}

static struct ann_rule *add_rule(struct annotations *ann, enum ann_verb verb, int line)
{
    ann->rules = realloc(ann->rules, (size_t)(ann->nrules + 1) * sizeof *ann->rules);
    if (!ann->rules)
        die("out of memory");
    struct ann_rule *r = &ann->rules[ann->nrules++];
    memset(r, 0, sizeof *r);
    r->verb = verb;
    r->line = line;
    return r;
}

static void parse_arg_rule(struct annotations *ann, char **p, int line)
{
    struct ann_rule *r = add_rule(ann, A_ARG, line);
    char *fn = next_token(p, ann->path, line);
    char *param = next_token(p, ann->path, line);
    char *kind = next_token(p, ann->path, line);
    if (!fn || !param || !kind)
        die("%s:%d: arg needs FUNC PARAM KIND", ann->path, line);
    r->pattern = xstrdup(fn);
    r->param = xstrdup(param);
    r->kind = parse_kind(kind, ann->path, line);
    for (char *opt; (opt = next_token(p, ann->path, line));) {
        if (strncmp(opt, "len=", 4) == 0 || strncmp(opt, "type=", 5) == 0)
            r->len_param = xstrdup(strchr(opt, '=') + 1);
        else if (strncmp(opt, "ctype=", 6) == 0)
            r->aux_param = xstrdup(opt + 6);
        else if (strncmp(opt, "elem=", 5) == 0 && strchr(opt, ':')) {
            r->elem_param = xstrdup(opt + 5);
            *strchr(r->elem_param, ':') = '\0';
            r->elem_func = xstrdup(strchr(opt, ':') + 1);
        }
        else if (strncmp(opt, "size=", 5) == 0)
            r->size = (unsigned)strtoul(opt + 5, NULL, 0);
        else if (strncmp(opt, "used=", 5) == 0)
            r->used_param = xstrdup(opt + 5);
        else if (strcmp(opt, "stream") == 0)
            r->stream = 1;
        else if (strcmp(opt, "sink") == 0)
            r->sink = 1;
        else
            die("%s:%d: unknown arg option '%s'", ann->path, line, opt);
    }
    /* Without len=, a buffer is one element: of size=N bytes, or elem='s. */
    if ((r->kind == K_IN_BUF || r->kind == K_OUT_BUF || r->kind == K_INOUT_BUF) && !r->len_param &&
        !r->elem_param && !r->size)
        die("%s:%d: %s needs len=PARAM, elem= or size=", ann->path, line, kind);
    if ((r->stream && r->kind != K_IN_BUF) || (r->sink && r->kind != K_OUT_BUF) ||
        (r->used_param && r->kind != K_OUT_BUF))
        die("%s:%d: stream goes with in-buf, sink and used= with out-buf", ann->path, line);
}

static void parse_invalid_handle(struct annotations *ann, char **p, int line)
{
    char *status = next_token(p, ann->path, line);
    if (!status)
        die("%s:%d: invalid-handle needs a STATUS", ann->path, line);
    char *cls = next_token(p, ann->path, line);
    if (!cls) {
        ann->invalid_handle = xstrdup(status);
        return;
    }
    for (; cls; cls = next_token(p, ann->path, line)) {
        if (ann->nclass_status == 8)
            die("%s:%d: too many per-class statuses", ann->path, line);
        ann->class_status_class[ann->nclass_status] = xstrdup(cls);
        ann->class_status[ann->nclass_status++] = xstrdup(status);
    }
}


/* FILE beside the annotation file, as an absolute path (the parser takes
 * such a path as it is, and others under CUDA_ROOT/include). */
static char *local_path(const char *ann_path, const char *file)
{
    char dir[4096], *slash;
    if (!file || !*file)
        return xstrdup("");
    snprintf(dir, sizeof dir, "%s", ann_path);
    slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    /* Absolute, as the parser takes only such a path for one of ours. */
    char *abs = realpath(dir, NULL);
    if (!abs)
        die("%s: cannot resolve its directory", ann_path);
    snprintf(dir, sizeof dir, "%s", abs);
    free(abs);
    char *out = malloc(strlen(dir) + strlen(file) + 2);
    if (!out)
        die("out of memory");
    sprintf(out, "%s/%s", dir, file);
    return out;
}

static void parse_line(struct annotations *ann, char *p, int line)
{
    static const struct { const char *word; enum ann_verb verb; } verbs[] = {
        { "local", A_LOCAL }, { "hand", A_HAND }, { "client", A_CLIENT },
        { "refuse", A_REFUSE }, { "async", A_ASYNC }, { "serve", A_SERVE },
        { "pure", A_PURE },
    };
    char *word = next_token(&p, ann->path, line);
    if (!word)
        return;
    if (strcmp(word, "since") == 0) {
        char *v = next_token(&p, ann->path, line), *end = NULL;
        unsigned long version = v ? strtoul(v, &end, 10) : 0;
        int first = ann->nrules;
        if (!v || *end || version == 0 || version > 0xffffffffu)
            die("%s:%d: since needs a version number (the library's own: 13010)", ann->path,
                line);
        parse_line(ann, p, line);
        if (ann->nrules == first)
            die("%s:%d: since needs a rule after its version", ann->path, line);
        for (int i = first; i < ann->nrules; i++)
            ann->rules[i].since = (unsigned)version;
        return;
    }
    if (strcmp(word, "library") == 0) {
        ann->library = xstrdup(next_token(&p, ann->path, line));
    } else if (strcmp(word, "header") == 0) {
        if (ann->nheaders == 8)
            die("%s:%d: too many headers", ann->path, line);
        ann->headers[ann->nheaders++] = xstrdup(next_token(&p, ann->path, line));
    } else if (strcmp(word, "header-local") == 0) {
        if (ann->nheaders == 8)
            die("%s:%d: too many headers", ann->path, line);
        ann->headers[ann->nheaders++] = local_path(ann->path, next_token(&p, ann->path, line));
    } else if (strcmp(word, "procedures") == 0) {
        if (ann->nheaders == 8 || ann->procedures)
            die("%s:%d: too many headers, or a second procedures file", ann->path, line);
        ann->procedures = local_path(ann->path, next_token(&p, ann->path, line));
        ann->headers[ann->nheaders++] = ann->procedures;
    } else if (strcmp(word, "client-sources") == 0) {
        for (char *d; (d = next_token(&p, ann->path, line));) {
            if (ann->nclient_sources == 8)
                die("%s:%d: too many client-sources", ann->path, line);
            ann->client_sources[ann->nclient_sources] = local_path(ann->path, d);
            while (strncmp(d, "../", 3) == 0)
                d += 3;
            ann->client_names[ann->nclient_sources++] = xstrdup(d);
        }
    } else if (strcmp(word, "variant") == 0) {
        if (ann->nvariants == 8)
            die("%s:%d: too many variants", ann->path, line);
        while (isspace((unsigned char)*p))
            p++;
        ann->variants[ann->nvariants++] = xstrdup(p);
    } else if (strcmp(word, "status") == 0) {
        ann->status_type = xstrdup(next_token(&p, ann->path, line));
        ann->not_supported = xstrdup(next_token(&p, ann->path, line));
        ann->unavailable = xstrdup(next_token(&p, ann->path, line));
        char *inval = next_token(&p, ann->path, line);
        if (!inval)
            die("%s:%d: status needs TYPE NOTSUP UNAVAIL INVALID", ann->path, line);
        ann->invalid_value = xstrdup(inval);
    } else if (strcmp(word, "proc-address") == 0) {
        ann->typedefs = xstrdup(next_token(&p, ann->path, line));
    } else if (strcmp(word, "errors") == 0) {
        ann->errors_enum = xstrdup(next_token(&p, ann->path, line));
    } else if (strcmp(word, "version") == 0) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            die("%s:%d: version needs an expression", ann->path, line);
        ann->version_expr = xstrdup(p);
    } else if (strcmp(word, "type-alias") == 0) {
        if (ann->naliases == 8)
            die("%s:%d: too many type aliases", ann->path, line);
        ann->alias_from[ann->naliases] = xstrdup(next_token(&p, ann->path, line));
        ann->alias_to[ann->naliases++] = xstrdup(next_token(&p, ann->path, line));
    } else if (strcmp(word, "handle-types") == 0) {
        for (char *t; (t = next_token(&p, ann->path, line)) && ann->nhandle_types < 16;)
            ann->handle_types[ann->nhandle_types++] = xstrdup(t);
    } else if (strcmp(word, "device-pointers") == 0) {
        for (char *t; (t = next_token(&p, ann->path, line)) && ann->ndevice_pointees < 16;)
            ann->device_pointees[ann->ndevice_pointees++] = xstrdup(t);
    } else if (strcmp(word, "device-values") == 0) {
        for (char *t; (t = next_token(&p, ann->path, line)) && ann->ndevice_values < 8;)
            ann->device_values[ann->ndevice_values++] = xstrdup(t);
    } else if (strcmp(word, "invalid-handle") == 0) {
        parse_invalid_handle(ann, &p, line);
    } else if (strcmp(word, "unchecked-handle") == 0) {
        char *cls = next_token(&p, ann->path, line), *why = next_token(&p, ann->path, line);
        if (!cls || !why || ann->nunchecked == 16)
            die("%s:%d: unchecked-handle needs CLASS \"why\" (at most 16)", ann->path, line);
        ann->unchecked[ann->nunchecked] = xstrdup(cls);
        ann->unchecked_why[ann->nunchecked++] = xstrdup(why);
    } else if (strcmp(word, "destroys") == 0) {
        struct ann_rule *r = add_rule(ann, A_DESTROYS, line);
        char *fn = next_token(&p, ann->path, line), *param = next_token(&p, ann->path, line);
        if (!fn || !param)
            die("%s:%d: destroys needs FUNC PARAM", ann->path, line);
        r->pattern = xstrdup(fn);
        r->param = xstrdup(param);
    } else if (strcmp(word, "nullable") == 0) {
        char *fn = next_token(&p, ann->path, line), *param;
        if (!fn)
            die("%s:%d: nullable needs FUNC PARAM...", ann->path, line);
        int n = 0;
        while ((param = next_token(&p, ann->path, line)) != NULL) {
            struct ann_rule *r = add_rule(ann, A_NULLABLE, line);
            r->pattern = xstrdup(fn);
            r->param = xstrdup(param);
            n++;
        }
        if (!n)
            die("%s:%d: nullable needs FUNC PARAM...", ann->path, line);
    } else if (strcmp(word, "keeps") == 0) {
        struct ann_rule *r = add_rule(ann, A_KEEPS, line);
        char *fn = next_token(&p, ann->path, line), *why = next_token(&p, ann->path, line);
        if (!fn || !why)
            die("%s:%d: keeps needs FUNC \"why\"", ann->path, line);
        r->pattern = xstrdup(fn);
        r->reason = xstrdup(why);
    } else if (strcmp(word, "runtime") == 0) {
        ann->runtime = 1;
    } else if (strcmp(word, "versioned") == 0) {
        ann->versioned = 1;
    } else if (strcmp(word, "arg") == 0) {
        parse_arg_rule(ann, &p, line);
    } else if (strcmp(word, "refuse-superseded") == 0 ||
               strcmp(word, "refuse-narrow-addresses") == 0) {
        int superseded = strcmp(word, "refuse-superseded") == 0;
        struct ann_rule *r = add_rule(ann, superseded ? A_REFUSE_SUPERSEDED : A_REFUSE_NARROW, line);
        char *why = next_token(&p, ann->path, line);
        if (!why)
            die("%s:%d: %s needs a reason in quotes", ann->path, line, word);
        r->pattern = xstrdup("*");
        r->reason = xstrdup(why);
    } else {
        size_t i;
        for (i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
            if (strcmp(word, verbs[i].word) == 0)
                break;
        if (i == sizeof verbs / sizeof verbs[0])
            die("%s:%d: unknown directive '%s'", ann->path, line, word);
        struct ann_rule *r = add_rule(ann, verbs[i].verb, line);
        char *pat = next_token(&p, ann->path, line);
        if (!pat)
            die("%s:%d: %s needs a function name or pattern", ann->path, line, word);
        r->pattern = xstrdup(pat);
        char *why = next_token(&p, ann->path, line);
        if (!why && verbs[i].verb != A_ASYNC && verbs[i].verb != A_SERVE &&
            verbs[i].verb != A_PURE)
            die("%s:%d: %s needs a reason in quotes", ann->path, line, word);
        r->reason = why ? xstrdup(why) : NULL;
    }
}

int ann_load(const char *path, struct annotations *ann)
{
    FILE *f = fopen(path, "r");
    char buf[4096];
    int line = 0;

    if (!f)
        die("%s: cannot open annotations", path);
    memset(ann, 0, sizeof *ann);
    ann->path = path;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        buf[strcspn(buf, "\n")] = '\0';
        parse_line(ann, buf, line);
    }
    fclose(f);
    if (!ann->library || !ann->status_type || ann->nheaders == 0)
        die("%s: needs library, status and header lines", path);
    return 0;
}
