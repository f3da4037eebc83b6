/* rgpu-gen: the stub and dispatch generator (see rgpu-gen.c). */
#ifndef RGPU_GEN_H
#define RGPU_GEN_H

#include <stddef.h>

#define MAX_PARAMS 40

/* How a parameter travels: mirrors enum rgpu_kind in common/rgpu_marshal.h. */
enum gen_kind {
    K_VAL, K_BYVAL, K_IN, K_OUT, K_INOUT, K_STR, K_IN_BUF, K_OUT_BUF,
    K_SCALAR_IN, K_SCALAR_OUT, K_SCALAR_INOUT, K_INOUT_BUF, K_DEVPTR, K_NONE,
    K_HANDLE,       /* an opaque library handle by value, checked on the server */
};

struct gen_param {
    char *name;             /* from the header, or a0, a1... */
    char *type;             /* type spelling, for the generated prototype */
    char *abi;              /* the type spelled out (parse.c): compared between releases */
    enum gen_kind kind;
    unsigned size;
    int len_arg;            /* *_BUF: index of the count parameter; SCALAR: of the type */
    int aux_arg;            /* SCALAR: index of a second type parameter, or -1;
                               *_BUF with elem_func: of the element type */
    char *elem_func;        /* *_BUF: function giving an element's size from its type */
    char *why;              /* when kind == K_NONE: why it cannot be classified */
    unsigned pointee_size;  /* for pointers: sizeof the pointee (0 if void/incomplete) */
    /* Handles: the class (the record a handle type points at, or the
     * handle-types name) of a handle passed by value, and of the handles
     * a pointer parameter points at (outputs, arrays); NULL when none. */
    char *handle_class;
    char *pointee_class;
    int destroys;           /* a destroy function removes this handle */
    int nullable;           /* NULL is a valid value of this handle */
    int narrow_address;     /* a device address of fewer than 64 bits
                               (CUdeviceptr_v1), or a pointer to one: no
                               annotation can make it a checked devptr */
    int stream;             /* in-buf `stream`: travels outside the frame buffer */
    int sink;               /* out-buf `sink`: may land in the caller's memory */
    int used_arg;           /* out-buf used=PARAM: the output saying how many
                               elements travel back, or -1 */
};

struct gen_func {
    char *name;
    char *ret;              /* return type spelling */
    int ret_is_status;      /* returns the library's status type */
    char *where;            /* file:line of the prototype */
    char *abi;              /* every type it passes, spelled out (parse.c) */
    int nparams;
    struct gen_param params[MAX_PARAMS];
};

/* What the annotations decide for one exported function. */
enum disposition { D_GENERATED, D_CLIENT_HAND, D_HAND, D_LOCAL, D_REFUSED,
                   D_OWN };    /* rgpu's own procedure (procedures FILE) */

struct export_fn {
    char *name;
    struct gen_func *proto;     /* NULL when no header declares it */
    enum disposition disp;
    const char *reason;         /* refused/hand/local: why */
    int async;
    int pure;                   /* its answer is a function of its arguments */
    unsigned since;             /* the library version that brought it (`since`), or 0 */
};

/* Annotations: one file per library (codegen/<lib>.ann). */
enum ann_verb { A_LOCAL, A_HAND, A_CLIENT, A_REFUSE, A_ASYNC, A_ARG, A_REFUSE_SUPERSEDED, A_SERVE,
                A_DESTROYS, A_KEEPS, A_NULLABLE, A_PURE, A_REFUSE_NARROW };

struct ann_rule {
    enum ann_verb verb;
    char *pattern;              /* function name or glob */
    char *param;                /* A_ARG */
    enum gen_kind kind;         /* A_ARG */
    char *len_param;            /* A_ARG len=... or type=... */
    char *aux_param;            /* A_ARG ctype=... */
    char *elem_param;           /* A_ARG elem=PARAM:FUNC */
    char *elem_func;
    unsigned size;              /* A_ARG size=N (0: from the type) */
    int stream, sink;           /* A_ARG stream, sink */
    char *used_param;           /* A_ARG used=PARAM */
    char *reason;
    int line;
    int used;
    unsigned since;             /* `since VERSION`: what the rule names came with,
                                   in the library's own version numbering (0: none) */
};

struct annotations {
    const char *path;
    char *library;              /* cudart */
    char *status_type;          /* cudaError_t */
    char *not_supported;        /* cudaErrorNotSupported */
    char *unavailable;          /* cudaErrorNoDevice: no server reachable */
    char *invalid_value;        /* cudaErrorInvalidValue: a refused pointer */
    char *headers[8];
    int nheaders;
    char *procedures;           /* procedures FILE: rgpu's own, as an absolute path */
    char *client_sources[8];    /* client-sources DIR...: absolute paths */
    char *client_names[8];      /* ... and as written, "../" dropped, for reports */
    int nclient_sources;
    char *variants[8];          /* extra -D sets to parse with */
    int nvariants;
    char *typedefs;             /* cudaTypedefs.h: emit the proc-address table */
    char *errors_enum;          /* enum whose constants get local name/string tables */
    char *version_expr;         /* `version EXPR`: the headers' version of the library */
    int runtime;
    int versioned;
    char *alias_from[8], *alias_to[8];  /* type-alias: C spelling of C++-only types */
    int naliases;
    char *handle_types[16];     /* handle-types: pointer typedefs that are handles */
    int nhandle_types;
    char *device_pointees[16];  /* device-pointers: pointee types that are device memory */
    int ndevice_pointees;
    char *device_values[8];     /* device-values: integer types holding device addresses */
    int ndevice_values;
    struct ann_rule *rules;
    int nrules;
    char *invalid_handle;       /* the status for an unknown handle */
    char *class_status_class[8], *class_status[8];  /* per handle class */
    int nclass_status;
    char *unchecked[16];        /* handle classes passed through unchecked */
    char *unchecked_why[16];
    int nunchecked;
    int unchecked_used[16];
};

void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);

int ann_load(const char *path, struct annotations *ann);

/* One more compiler flag for parsing (-DCUBLASAPI= for headers that
 * insist on being included through another), or NULL. */
extern const char *parse_extra_flag;

/* The headers' version of the library (the annotations' `version`
 * expression, in the library's own numbering), or 0 without one. */
unsigned parse_version(const struct annotations *ann, const char *cuda_root);

/* Parse the headers; returns the prototypes found (*n of them). */
struct gen_func *parse_headers(const struct annotations *ann, const char *cuda_root,
                               int *n);

struct gen_enum_const {
    char *name;
    long long value;
    char *doc;                  /* brief doc comment, or NULL */
};

/* Constants of the enum named ann->errors_enum (*n of them). */
struct gen_enum_const *parse_error_enum(const struct annotations *ann, const char *cuda_root,
                                        int *n);

/* cuGetProcAddress's table from cudaTypedefs.h (procaddr.c). */
void emit_procaddr(const char *typedefs, const char *outpath, const char *lib, char **exports,
                   int nexp, const char *annpath);

/* The prototype named name among funcs, or NULL. */
struct gen_func *gen_find_func(struct gen_func *funcs, int n, const char *name);

/* Exported function names of an ELF shared library, of a .txt name list,
 * or of an export list ("TYPE name@@node" per line, as
 * codegen/cuda-wheels.sh writes them). */
char **elf_exported_functions(const char *path, int *n);

/* rgpu-gen --compat (compat.c). */
int compat_main(int argc, char **argv);
int compare_main(int argc, char **argv);

#endif
