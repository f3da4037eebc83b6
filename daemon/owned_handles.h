/* The library handles a session has seen handed out (owned_handles.c).
 *
 * A library handle (a stream, an event, a cuBLAS or cuDNN handle, a
 * descriptor, a module...) is a pointer into this process that the real
 * library follows.  A client may name only handles the session's libraries
 * returned to it: every handle argument is looked up here before the real
 * function runs, every handle a call returns is added, and a destroy
 * removes it.  One table per handle class (rgpu_handles.h); a class id is
 * the hash of the class name, so the generated tables need no shared list. */
#ifndef OWNED_HANDLES_H
#define OWNED_HANDLES_H

#include <stdint.h>

#include "rgpu_marshal.h"

/* Classes named by hand-written procedures (set before main runs). */
extern uint32_t H_CONTEXT, H_STREAM, H_EVENT, H_MODULE, H_FUNCTION, H_LIBRARY, H_KERNEL,
    H_GRAPH, H_GRAPH_EXEC, H_MEMPOOL, H_CUBLASLT, H_CUBLASLT_MATMUL_DESC,
    H_CUBLASLT_MATRIX_LAYOUT, H_CUBLASLT_PREFERENCE, H_CUBLASLT_TRANSFORM_DESC, H_CUDNN, H_CUBLAS;

/* Record h (not NULL) as a handle of class cls.  Thread-safe. */
void handles_add(uint32_t cls, uint64_t h);
/* Forget h. */
void handles_remove(uint32_t cls, uint64_t h);
/* Whether h of class cls was handed out and not destroyed. */
int handles_contains(uint32_t cls, uint64_t h);
/* Whether a client may pass h as a cls: NULL, a documented special value
 * of the class (the legacy and per-thread default streams), or one the
 * session holds. */
int handles_valid(uint32_t cls, uint64_t h);
/* handles_valid for an optional handle argument of a hand-written
 * procedure: status when refused, else 0. */
int handles_check(uint32_t cls, uint64_t h, int status);

/* Generated procedures: every handle argument (and every handle inside a
 * host buffer argument) valid?  0, or the status to answer instead. */
int handles_check_call(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                       const struct rgpu_call_frame *frame);
/* Before the real call: forget the handles it destroys.  Not after: once
 * the library has freed one, another client thread's create may get the
 * same value at once, and a removal after the call would forget that new
 * handle.  Returns which parameters were forgotten (bit i: parameter i),
 * for handles_after_call to put back should the call fail. */
uint64_t handles_before_call(const struct rgpu_proc *proc, const struct rgpu_call_frame *frame);
/* After the real call: record the handles it returned; the destroyed ones
 * (forgotten) come back if it failed. */
void handles_after_call(const struct rgpu_proc *proc, const struct rgpu_call_frame *frame,
                        int status, uint64_t forgotten);

/* How many handles the session holds (tests, debug logs). */
unsigned long handles_count(void);

/* Named handles: handles whose value on the wire the client chose (cuDNN's
 * backend descriptors: daemon/cudnn_backend.c), so that making one needs no
 * reply.  The session keeps each name with the real handle it stands for
 * and one word of facts, in a table of its own: a name is only ever looked
 * up, never followed, and no real handle is accepted as a name.  At most
 * NAMED_MAX names per session.
 * named_add: 0, 1 when the name is taken (nothing changed), -1 when the
 * table is full or out of memory.  named_find and named_take (which forgets
 * the name): 1 with *real and *info set (either may be NULL), 0 for a name
 * the session does not hold.  named_set_info: 1 when the name is held. */
#define NAMED_MAX (1u << 20)
int named_add(uint32_t cls, uint64_t name, uint64_t real, uint32_t info);
int named_find(uint32_t cls, uint64_t name, uint64_t *real, uint32_t *info);
int named_set_info(uint32_t cls, uint64_t name, uint32_t info);
int named_take(uint32_t cls, uint64_t name, uint64_t *real, uint32_t *info);

#endif
