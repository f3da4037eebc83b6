/* Pinned staging buffers for bulk copies.  A copy between the GPU and
 * pageable memory runs at a fraction of the bus's speed (measured on an
 * H200: 7 GB/s host to device, 11 back, against 55 pinned) and the
 * session's reader waits for it, so bulk copies went at ~3 GB/s.  Frames
 * the size of a copy chunk are read into pinned buffers instead, and
 * device-to-host chunks are copied into one before they are sent.
 *
 * The buffers are allocated by the first copy handler that asks
 * (staging_prepare), on a thread whose context is current, with the
 * runtime's cudaHostAlloc (portable: pinned for every context).  Until
 * then, and for frames too large, or when all are in use, memory comes
 * from malloc: staging is an optimization, never a requirement. */
#include "rgpud.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>

#define SLOTS 4
#define SLOT_SIZE (RGPU_COPY_CHUNK + (64u << 10))   /* a chunk and its header */

static struct {
    void *p;
    int busy;
} slots[SLOTS];
static int prepared;            /* staging_prepare ran (slots may be fewer) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void staging_prepare(void)
{
    pthread_mutex_lock(&lock);
    if (!prepared) {
        prepared = 1;
        __typeof__(&cudaHostAlloc) host_alloc = backend_sym("cudart", "cudaHostAlloc");
        int n = 0;
        while (host_alloc && n < SLOTS &&
               host_alloc(&slots[n].p, SLOT_SIZE, cudaHostAllocPortable) == cudaSuccess)
            n++;
        if (n < SLOTS)
            slots[n].p = NULL;
        rgpu_debug("%d pinned staging buffers of %u KiB", n, SLOT_SIZE >> 10);
        if (n == 0)
            rgpu_info("no pinned staging memory: bulk copies go through pageable memory");
    }
    pthread_mutex_unlock(&lock);
}

void *staging_alloc(size_t n)
{
    if (n <= SLOT_SIZE && n >= (1u << 20)) {
        pthread_mutex_lock(&lock);
        for (int i = 0; i < SLOTS; i++) {
            if (slots[i].p && !slots[i].busy) {
                slots[i].busy = 1;
                pthread_mutex_unlock(&lock);
                return slots[i].p;
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return malloc(n ? n : 1);
}

void staging_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SLOTS; i++) {
        if (slots[i].p == p) {
            slots[i].busy = 0;
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    pthread_mutex_unlock(&lock);
    free(p);
}
