/* Client objects and kept answers (rgpu_client.h, "client objects").
 *
 * A stub may keep some of a library's handles as objects of its own (cuDNN
 * tensor descriptors: stubs/cudnn_tensor.c) and give the core a translator
 * for their class: every generated call then swaps each such object for
 * the server's handle it stands for, so the generated procedures serve
 * them unchanged.
 *
 * A procedure annotated `pure` answers from its arguments alone (a
 * workspace-size query of descriptors kept by content).  Its answers are
 * kept by the bytes of its encoded arguments, handles included, and
 * forgotten whenever a handle is destroyed or a context changes, after
 * which a handle value might stand for something else. */
#include "rgpu_client.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- translators ------------------------------------------------------------------ */

#define MAX_TRANSLATORS 8

struct translator {
    const struct rgpu_lib *lib;
    uint32_t cls;
    rgpu_translate_fn fn;
};
static struct translator translators[MAX_TRANSLATORS];
static int ntranslators;

void rgpu_register_translator(const struct rgpu_lib *lib, uint32_t cls, rgpu_translate_fn fn)
{
    if (ntranslators < MAX_TRANSLATORS)
        translators[ntranslators++] = (struct translator){ lib, cls, fn };
}

static rgpu_translate_fn translator_of(const struct rgpu_lib *lib, uint32_t cls)
{
    for (int i = 0; i < ntranslators; i++)
        if (translators[i].lib == lib && translators[i].cls == cls)
            return translators[i].fn;
    return NULL;
}

/* One handle argument: translated through fn (1), left alone (0), or a
 * failure (minus the library status). */
static int translate_one(rgpu_translate_fn fn, const struct rgpu_proc *proc, unsigned i,
                         uint64_t h, uint64_t *server)
{
    return fn ? fn(proc, i, h, server) : 0;
}

int rgpu_translate_args(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                        const void *const *argv, const void **out, uint64_t *values,
                        int *must_wait, int *by_content)
{
    *must_wait = 0;
    *by_content = 1;
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        out[i] = argv[i];
        if (prm->kind != RGPU_HANDLE)
            continue;
        uint64_t h = 0, server = 0;
        memcpy(&h, argv[i], prm->size < 8 ? prm->size : 8);
        int r = translate_one(prm->size == 8 ? translator_of(lib, prm->handle_class) : NULL,
                              proc, i, h, &server);
        if (r < 0)
            return -r;
        /* Kept answers hold while every handle but the library's context
         * (the first) stands for its content or is NULL. */
        if (i > 0 && r != 1 && h != 0)
            *by_content = 0;
        if (r == 1) {
            values[i] = server;
            out[i] = &values[i];
            *must_wait |= server == 0;      /* never set: the library's answer */
        }
    }
    return 0;
}

int rgpu_lib_translates(const struct rgpu_lib *lib)
{
    for (int i = 0; i < ntranslators; i++)
        if (translators[i].lib == lib)
            return 1;
    return 0;
}

/* ---- answers of pure procedures --------------------------------------------------- */

#define ANSWER_SLOTS 512

struct answer {
    unsigned epoch;
    uint32_t proc;
    size_t key_len, outs_len;
    unsigned char *key, *outs;
};

static struct {
    pthread_mutex_t lock;
    unsigned epoch;
    struct answer slot[ANSWER_SLOTS];
} A = { .lock = PTHREAD_MUTEX_INITIALIZER, .epoch = 1 };

void rgpu_answers_forget(void)
{
    __atomic_add_fetch(&A.epoch, 1, __ATOMIC_SEQ_CST);
}

static unsigned current_epoch(void)
{
    return __atomic_load_n(&A.epoch, __ATOMIC_SEQ_CST) + 0x10000u * rgpu_contexts_epoch();
}

/* The call's arguments as they would travel: the key of its answer. */
static int encode_key(const struct rgpu_proc *proc, const void *const *argv,
                      const struct rgpu_scalar_policy *pol, msgpack_sbuffer *sb)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    if (rgpu_encode_args(&pk, proc, argv, pol) != RGPU_OK) {
        msgpack_sbuffer_destroy(sb);
        return -1;
    }
    return 0;
}

static size_t slot_of_key(uint32_t proc, const void *key, size_t len)
{
    const unsigned char *b = key;
    uint64_t h = 1469598103934665603ull ^ proc;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return (size_t)(h % ANSWER_SLOTS);
}

int rgpu_answer_known(const struct rgpu_proc *proc, const void *const *argv,
                      const struct rgpu_scalar_policy *pol)
{
    msgpack_sbuffer key;
    int found = 0;
    if (encode_key(proc, argv, pol, &key) < 0)
        return 0;
    size_t i = slot_of_key(proc->id, key.data, key.size);
    pthread_mutex_lock(&A.lock);
    struct answer *a = &A.slot[i];
    if (a->key && a->epoch == current_epoch() && a->proc == proc->id &&
        a->key_len == key.size && memcmp(a->key, key.data, key.size) == 0) {
        msgpack_zone zone;
        msgpack_object outs;
        msgpack_zone_init(&zone, 256);
        size_t off = 0;
        found = msgpack_unpack((const char *)a->outs, a->outs_len, &off, &zone, &outs) ==
                    MSGPACK_UNPACK_SUCCESS &&
                rgpu_decode_outs(&outs, proc, argv, pol) == RGPU_OK;
        msgpack_zone_destroy(&zone);
    }
    pthread_mutex_unlock(&A.lock);
    msgpack_sbuffer_destroy(&key);
    return found;
}

void rgpu_answer_keep(const struct rgpu_proc *proc, const void *const *argv,
                      const struct rgpu_scalar_policy *pol, const msgpack_object *outs,
                      unsigned epoch)
{
    msgpack_sbuffer key, val;
    msgpack_packer pk;
    if (encode_key(proc, argv, pol, &key) < 0)
        return;
    msgpack_sbuffer_init(&val);
    msgpack_packer_init(&pk, &val, msgpack_sbuffer_write);
    msgpack_pack_object(&pk, *outs);
    size_t i = slot_of_key(proc->id, key.data, key.size);
    pthread_mutex_lock(&A.lock);
    struct answer *a = &A.slot[i];
    free(a->key);
    free(a->outs);
    /* The sbuffers' memory is handed over to the slot. */
    *a = (struct answer){ epoch, proc->id, key.size, val.size, (unsigned char *)key.data,
                          (unsigned char *)val.data };
    pthread_mutex_unlock(&A.lock);
}

unsigned rgpu_answers_epoch(void)
{
    return current_epoch();
}
