/* Room for the dependency arrays a capture query hands back
 * (cudaStreamGetCaptureInfo, cuStreamGetCaptureInfo_v2/_v3).  The library
 * returns pointers to arrays it owns, "valid until the next API call which
 * operates on the stream or until the capture is terminated": through rgpu
 * the nodes and edges come back in the reply, and the client keeps them in
 * memory of its own per stream, which the next query of that stream
 * reuses.  Holding them longer than CUDA promises costs a few bytes per
 * stream queried; a stream handle the driver hands out again finds its
 * predecessor's room. */
#include "rgpu_client.h"

#include <pthread.h>
#include <stdlib.h>

struct capture_room {
    uint64_t stream;
    pthread_t thread;           /* a per-thread default stream's thread */
    int per_thread;
    void *nodes, *edges;
    size_t cap;                 /* nodes and edges each have room for cap */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct capture_room *rooms;
static size_t nrooms, cap_rooms;

/* Each thread's default stream is its own: its room is the thread's. */
static int same_stream(const struct capture_room *r, uint64_t stream, int per_thread)
{
    return r->stream == stream && r->per_thread == per_thread &&
           (!per_thread || pthread_equal(r->thread, pthread_self()));
}

static struct capture_room *room_of_locked(uint64_t stream, int per_thread)
{
    for (size_t i = 0; i < nrooms; i++)
        if (same_stream(&rooms[i], stream, per_thread))
            return &rooms[i];
    if (nrooms == cap_rooms) {
        size_t ncap = cap_rooms ? cap_rooms * 2 : 8;
        struct capture_room *n = realloc(rooms, ncap * sizeof *n);
        if (!n)
            return NULL;
        rooms = n;
        cap_rooms = ncap;
    }
    rooms[nrooms] = (struct capture_room){ .stream = stream, .per_thread = per_thread,
                                           .thread = pthread_self() };
    return &rooms[nrooms++];
}

/* Grow r to room for n of each (never shrinks: a stream's queries keep
 * their size). */
static int grow_locked(struct capture_room *r, size_t n, size_t node_size, size_t edge_size)
{
    if (n <= r->cap)
        return 0;
    void *nodes = calloc(n, node_size), *edges = calloc(n, edge_size);
    if (!nodes || !edges) {
        free(nodes);
        free(edges);
        return -1;
    }
    /* The old arrays are invalid now, as CUDA's are after the next query. */
    free(r->nodes);
    free(r->edges);
    r->nodes = nodes;
    r->edges = edges;
    r->cap = n;
    return 0;
}

/* The legacy stream is one for all threads; the per-thread default stream
 * (CU_STREAM_PER_THREAD, or 0 in a _ptsz call) is each thread's. */
static int per_thread_stream(uint64_t stream, int ptsz)
{
    return stream == 2 || (ptsz && stream == 0);
}

int rgpu_capture_arrays(uint64_t stream, int ptsz, size_t n, size_t node_size,
                        size_t edge_size, void **nodes, void **edges)
{
    int rc = -1;
    pthread_mutex_lock(&lock);
    struct capture_room *r = room_of_locked(stream, per_thread_stream(stream, ptsz));
    if (r && grow_locked(r, n ? n : 1, node_size, edge_size) == 0) {
        *nodes = r->nodes;
        *edges = r->edges;
        rc = 0;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int rgpu_capture_query_arrays(uint64_t stream, int ptsz, size_t node_size, size_t edge_size,
                              int want_nodes, int want_edges, rgpu_capture_query query,
                              void *ctx, void **nodes, void **edges, size_t *count)
{
    size_t room = 8;
    int rc = 0;
    *count = 0;
    *nodes = *edges = NULL;
    if (!want_nodes && !want_edges)
        return query(ctx, NULL, NULL, 0, count);
    /* A dependency added by another thread between two questions makes the
     * second too small as well: ask until the answer fits, a few times. */
    for (int tries = 0; tries < 8; tries++) {
        void *n, *e;
        if (rgpu_capture_arrays(stream, ptsz, room, node_size, edge_size, &n, &e) < 0)
            return -1;
        rc = query(ctx, want_nodes ? n : NULL, want_edges ? e : NULL, room, count);
        *nodes = n;
        *edges = e;
        if (rc != 0 || *count <= room)
            return rc;
        room = *count;
    }
    return rc;
}
