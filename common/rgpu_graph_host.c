/* Graph host nodes and graph copies to or from host memory, on the client
 * (server side daemon/graph_host.c), through rgpu's own graph procedures of
 * the runtime or the driver (codegen/cudart_own.h, codegen/cuda_own.h,
 * "graphs"), which each stub registers (rgpu_graph_procs_register): their
 * arguments are the same in both, so one implementation here sends
 * either.
 *
 * A host node runs the program's function, with the program's data, each
 * time its graph runs; a copy node reads or writes the program's memory
 * each time.  Neither the function nor the memory can leave the client, so
 * what the server's graph holds in their place is a host node of its own
 * whose data names a token: a number of ours for what the program gave
 * (a function and its data, or a host region of a copy and its shape).
 * When the server's node runs it sends [CALLBACK, run, 0, token] (with
 * the bytes a copy to the host brought); the core's callback thread does
 * what the token says (common/rgpu_callbacks.c) and answers
 * [CALLBACK_DONE, run] (with the bytes a copy to the device takes).
 *
 * A token lives as long as the process: a graph or executable graph may
 * hold a node naming it for as long as it likes (clones, instantiations,
 * child graphs and updates copy nodes where the client cannot follow),
 * so no callback can ever name a token that went away.  The same function
 * and data (or the same region) always get the same token, so a program
 * that sets a node's parameters in a loop adds nothing once it has used
 * each pair.  At most MAX_TOKENS distinct ones exist per process.
 *
 * A graph launch counts as a host function outstanding until the server
 * says its graph has passed (a marker host function enqueued after it,
 * common/rgpu_callbacks.c), so that every call waits meanwhile, as for
 * cudaLaunchHostFunc (rgpu_lazy.c): a synchronise must see what the
 * graph's host nodes did when it returns. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "client_ranges.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 65536

static struct {
    pthread_mutex_t lock;
    struct rgpu_token **v;      /* v[id - 1]; entries never move or go */
    size_t n, cap;
} T = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0 };

/* The id of a token like want, from the table; 0 when there is none.
 * Lock held. */
static uint64_t find_like(const struct rgpu_token *want)
{
    for (size_t i = 0; i < T.n; i++)
        if (memcmp(T.v[i], want, sizeof *want) == 0)
            return i + 1;
    return 0;
}

static uint64_t add(const struct rgpu_token *want)
{
    if (T.n == T.cap) {
        size_t cap = T.cap ? T.cap * 2 : 64;
        struct rgpu_token **v = cap <= MAX_TOKENS ? realloc(T.v, cap * sizeof *v) : NULL;
        if (!v)
            return 0;
        T.v = v;
        T.cap = cap;
    }
    struct rgpu_token *t = malloc(sizeof *t);
    if (!t)
        return 0;
    *t = *want;
    T.v[T.n++] = t;
    return T.n;
}

uint64_t rgpu_token_register(const struct rgpu_token *want)
{
    struct rgpu_token key;
    memset(&key, 0, sizeof key);        /* padding too: tokens compare as bytes */
    key.kind = want->kind;
    key.fn = want->fn;
    key.data = want->data;
    key.stream = want->stream;
    key.host = want->host;
    key.extent = want->extent;
    pthread_mutex_lock(&T.lock);
    uint64_t id = find_like(&key);
    if (!id)
        id = add(&key);
    pthread_mutex_unlock(&T.lock);
    if (!id)
        rgpu_warn("no room for another graph host node's function or region (%d per process)",
                  MAX_TOKENS);
    return id;
}

const struct rgpu_token *rgpu_token_find(uint64_t id)
{
    pthread_mutex_lock(&T.lock);
    const struct rgpu_token *t = id && id <= T.n ? T.v[id - 1] : NULL;
    pthread_mutex_unlock(&T.lock);
    return t;
}

int rgpu_tokens_in_use(void)
{
    return __atomic_load_n(&T.n, __ATOMIC_RELAXED) != 0;
}

/* ---- a copy's host region ----------------------------------------------------------- */

size_t rgpu_token_bytes(const struct rgpu_token *t)
{
    return t->extent.width * t->extent.height * t->extent.depth;
}

/* Row r of plane z of the host region. */
static unsigned char *host_row(const struct rgpu_token *t, size_t r, size_t z)
{
    const struct rgpu_copy_side *h = &t->host;
    size_t pitch = h->pitch ? h->pitch : t->extent.width;
    size_t height = h->height ? h->height : t->extent.height;
    return (unsigned char *)(uintptr_t)h->ptr + (h->z + z) * pitch * height +
           (h->y + r) * pitch + h->x;
}

void rgpu_token_gather(const struct rgpu_token *t, void *packed)
{
    unsigned char *out = packed;
    for (size_t z = 0; z < t->extent.depth; z++)
        for (size_t r = 0; r < t->extent.height; r++, out += t->extent.width)
            memcpy(out, host_row(t, r, z), t->extent.width);
}

void rgpu_token_scatter(const struct rgpu_token *t, const void *packed)
{
    const unsigned char *in = packed;
    for (size_t z = 0; z < t->extent.depth; z++)
        for (size_t r = 0; r < t->extent.height; r++, in += t->extent.width)
            memcpy(host_row(t, r, z), in, t->extent.width);
}

/* Whether the copy's extent fits in one callback frame, and the region's
 * offsets stay inside the address space. */
static int extent_carried(const struct rgpu_extent *e, const struct rgpu_copy_side *h)
{
    size_t n, pitch = h->pitch ? h->pitch : e->width;
    size_t height = h->height ? h->height : e->height, end;
    return e->width && e->height && e->depth &&
           !__builtin_mul_overflow(e->width, e->height, &n) &&
           !__builtin_mul_overflow(n, e->depth, &n) && n <= RGPU_GRAPH_COPY_MAX &&
           !__builtin_mul_overflow(pitch, height, &end) &&
           !__builtin_mul_overflow(end, h->z + e->depth, &end) &&
           !__builtin_add_overflow(end, h->ptr, &end);
}

/* ---- requests ----------------------------------------------------------------------- */

/* The procedures of the (at most two) libraries that registered theirs. */
static struct {
    const struct rgpu_lib *lib;
    const struct rgpu_graph_procs *procs;
} registered[4];

void rgpu_graph_procs_register(const struct rgpu_lib *lib, const struct rgpu_graph_procs *procs)
{
    for (size_t i = 0; i < sizeof registered / sizeof registered[0]; i++)
        if (!registered[i].lib || registered[i].lib == lib) {
            registered[i].procs = procs;
            registered[i].lib = lib;
            return;
        }
}

static const struct rgpu_graph_procs *procs_of(const struct rgpu_lib *lib)
{
    for (size_t i = 0; i < sizeof registered / sizeof registered[0]; i++)
        if (registered[i].lib == lib)
            return registered[i].procs;
    return NULL;
}

static int invalid_value(const struct rgpu_lib *lib)
{
    return lib->is_runtime ? rgpu_runtime_result(lib->invalid_value) : lib->invalid_value;
}

/* The library's out-of-memory status: cudaErrorMemoryAllocation and
 * CUDA_ERROR_OUT_OF_MEMORY are both 2. */
static int out_of_memory(const struct rgpu_lib *lib)
{
    return lib->is_runtime ? rgpu_runtime_result(2) : 2;
}

/* The library's procedures, else the transport's answer for a stub that
 * registered none (no server procedure to send). */
static const struct rgpu_graph_procs *procs_or_status(const struct rgpu_lib *lib,
                                                      const char *what, int *rc)
{
    const struct rgpu_graph_procs *p = procs_of(lib);
    if (!p)
        *rc = rgpu_transport_status(lib, what, RGPU_ENOPROC);
    return p;
}

int rgpu_graph_host_node_call(const struct rgpu_lib *lib, const char *what,
                              const struct rgpu_graph_node_req *r, void *fn, void *data,
                              uint64_t *made)
{
    int rc = 0;
    const struct rgpu_graph_procs *p = procs_or_status(lib, what, &rc);
    if (!p)
        return rc;
    if (!fn || (r->ndeps && !r->deps))
        return invalid_value(lib);
    struct rgpu_token t = { .kind = RGPU_TOKEN_HOST_FN, .fn = fn, .data = data };
    uint64_t token = rgpu_token_register(&t);
    if (!token)
        return out_of_memory(lib);
    rgpu_callbacks_start();
    void *node = NULL, **node_out = made ? &node : NULL;
    const void *argv[] = { &r->op, &r->graph, &r->exec, &r->node, &r->deps, &r->ndeps, &token,
                           &node_out };
    rc = rgpu_call(lib, p->host_node, argv);
    if (rc == 0 && made)
        *made = (uint64_t)(uintptr_t)node;
    return rc;
}

int rgpu_graph_host_params_call(const struct rgpu_lib *lib, const char *what, uint64_t node,
                                void **fn, void **data)
{
    int rc = 0;
    const struct rgpu_graph_procs *p = procs_or_status(lib, what, &rc);
    if (!p)
        return rc;
    void *handle = (void *)(uintptr_t)node;
    uint64_t token = 0, *token_out = &token;
    const void *argv[] = { &handle, &token_out };
    rc = rgpu_call(lib, p->host_params, argv);
    if (rc != 0)
        return rc;
    const struct rgpu_token *t = rgpu_token_find(token);
    if (!t || (t->kind != RGPU_TOKEN_HOST_FN && t->kind != RGPU_TOKEN_STREAM_CB))
        return rgpu_transport_status(lib, what, RGPU_EPROTO);
    *fn = t->fn;
    *data = t->data;
    return 0;
}

/* The token of a copy's host region; 0 with *rc set when it cannot be. */
static uint64_t copy_token(const struct rgpu_lib *lib, const char *what, int dir,
                           const struct rgpu_copy_side *h, const struct rgpu_extent *e, int *rc)
{
    static int logged;
    if (dir != RGPU_COPY_TO_DEVICE && dir != RGPU_COPY_TO_HOST) {
        *rc = invalid_value(lib);
        return 0;
    }
    if (!h->ptr || !extent_carried(e, h)) {
        *rc = e->width && e->height && e->depth && h->ptr
                  ? rgpu_refused(lib, what, "a graph copy to or from host memory larger than "
                                            "64 MiB: not remoted (the bytes travel in one "
                                            "frame each time the graph runs)", &logged)
                  : invalid_value(lib);
        return 0;
    }
    struct rgpu_token t = { .kind = dir == RGPU_COPY_TO_DEVICE ? RGPU_TOKEN_TO_DEVICE
                                                               : RGPU_TOKEN_TO_HOST,
                            .host = *h, .extent = *e };
    uint64_t token = rgpu_token_register(&t);
    if (!token)
        *rc = out_of_memory(lib);
    return token;
}

/* The copy as it travels: the token's region, the device side d. */
static struct rgpu_graph_copy copy_of(int dir, uint64_t token, const struct rgpu_copy_side *d,
                                      const struct rgpu_extent *e)
{
    struct rgpu_graph_copy c = { (uint32_t)dir, 0, token, e->width, e->height, e->depth,
                                 d->ptr, d->pitch, d->height, d->x, d->y, d->z };
    return c;
}

int rgpu_graph_host_copy_call(const struct rgpu_lib *lib, const char *what,
                              const struct rgpu_graph_node_req *r, void *ctx, int dir,
                              const struct rgpu_copy_side *h, const struct rgpu_copy_side *d,
                              const struct rgpu_extent *e, uint64_t *made)
{
    int rc = 0;
    const struct rgpu_graph_procs *p = procs_or_status(lib, what, &rc);
    if (!p)
        return rc;
    if (r->ndeps && !r->deps)
        return invalid_value(lib);
    uint64_t token = copy_token(lib, what, dir, h, e, &rc);
    if (!token)
        return rc;
    rgpu_callbacks_start();
    const struct rgpu_graph_copy c = copy_of(dir, token, d, e);
    const struct rgpu_graph_copy *copy = &c;
    void *node = NULL, **node_out = made ? &node : NULL;
    /* The driver's names the copy's context after the copy. */
    const void *rt_argv[] = { &r->op, &r->graph, &r->exec, &r->node, &r->deps, &r->ndeps,
                              &copy, &node_out };
    const void *drv_argv[] = { &r->op, &r->graph, &r->exec, &r->node, &r->deps, &r->ndeps,
                               &copy, &ctx, &node_out };
    rc = rgpu_call(lib, p->host_copy, lib->is_runtime ? rt_argv : drv_argv);
    if (rc == 0 && made)
        *made = (uint64_t)(uintptr_t)node;
    return rc;
}

int rgpu_capture_host_copy_call(const struct rgpu_lib *lib, const char *what, uint64_t stream,
                                int ptsz, int dir, const struct rgpu_copy_side *h,
                                const struct rgpu_copy_side *d, const struct rgpu_extent *e,
                                int *captured)
{
    int rc = 0, got = 0, *got_out = &got, per_thread = ptsz ? 1 : 0;
    *captured = 0;
    const struct rgpu_graph_procs *p = procs_or_status(lib, what, &rc);
    if (!p)
        return rc;
    uint64_t token = copy_token(lib, what, dir, h, e, &rc);
    if (!token)
        return rc;
    rgpu_callbacks_start();
    const struct rgpu_graph_copy c = copy_of(dir, token, d, e);
    const struct rgpu_graph_copy *copy = &c;
    void *s = (void *)(uintptr_t)stream;
    const void *argv[] = { &s, &per_thread, &copy, &got_out };
    rc = rgpu_call(lib, p->capture_copy, argv);
    *captured = rc == 0 && got;
    return rc;
}

/* ---- launches ------------------------------------------------------------------------- */

/* An executable graph the server said holds no host node of ours: its
 * launches go without waiting, as before any token existed.  The bit
 * lives with the handle, which a destroy forgets. */
#define EXEC_PLAIN 1u

int rgpu_graph_launch_call(const struct rgpu_lib *lib, const char *what,
                           const struct rgpu_proc *proc, uint64_t exec, uint64_t stream, int ptsz)
{
    static uint32_t exec_cls;
    uint32_t info = 0;
    int rc = 0;
    if (!exec_cls)
        exec_cls = rgpu_handle_class("CUgraphExec_st");
    rgpu_printing_graph_launched(ptsz && !stream ? RGPU_PER_THREAD_STREAM : stream);
    if (!rgpu_tokens_in_use() ||
        (rgpu_handle_info(exec_cls, exec, &info) && (info & EXEC_PLAIN))) {
        const void *argv[] = { &exec, &stream };
        return rgpu_call(lib, proc, argv);
    }
    const struct rgpu_graph_procs *p = procs_or_status(lib, what, &rc);
    if (!p)
        return rc;
    uint64_t marker = rgpu_callback_marker();
    if (!marker)
        return out_of_memory(lib);
    void *x = (void *)(uintptr_t)exec, *s = (void *)(uintptr_t)stream;
    int per_thread = ptsz ? 1 : 0, marked = 0, plain = 0, *marked_out = &marked,
        *plain_out = &plain;
    const void *argv[] = { &x, &s, &per_thread, &marker, &marked_out, &plain_out };
    rc = rgpu_call(lib, p->launch, argv);
    /* Nothing comes for a marker the server did not place. */
    if (rc != 0 || !marked)
        rgpu_callback_cancel(marker);
    if (rc == 0 && plain)
        rgpu_handle_note(exec_cls, exec, EXEC_PLAIN);
    return rc;
}

/* ---- which side is which ---------------------------------------------------------- */

int rgpu_copy_side_on_device(uint64_t p, uint64_t *dev)
{
    uint64_t host, gpu;
    if (rgpu_mapped_active() && rgpu_mapped_find(p, 0, &host, &gpu, NULL, NULL)) {
        *dev = gpu + (p - host);
        return 1;
    }
    *dev = p;
    return rgpu_ranges_find(p, NULL, NULL) == RGPU_RANGE_DEVICE;
}

int rgpu_capture_copy_1d(const struct rgpu_lib *lib, const char *what, uint64_t stream, int dir,
                         uint64_t host, uint64_t dev, size_t count, int *captured)
{
    uint64_t gpu;
    *captured = 0;
    /* A "host" side that is mapped memory is its GPU copy: no host copy. */
    if (!rgpu_capture_active() || !count || count > RGPU_GRAPH_COPY_MAX ||
        rgpu_copy_side_on_device(host, &gpu))
        return 0;
    (void)rgpu_copy_side_on_device(dev, &dev);
    struct rgpu_copy_side h = { .ptr = host }, d = { .ptr = dev };
    struct rgpu_extent e = { count, 1, 1 };
    return rgpu_capture_host_copy_call(lib, what, stream, 0, dir, &h, &d, &e, captured);
}
