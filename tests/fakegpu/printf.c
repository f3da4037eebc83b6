// The device's printf buffer and assert messages, per context.
//
// On a GPU, printf in a kernel appends a record to a buffer in device
// memory (cudaLimitPrintfFifoSize, 1 MiB by default); the driver formats
// the records and writes them to the process's stdout only where the host
// synchronises with the device: at the start of a launch, a stream, event
// or context synchronise, a blocking copy, a module load or unload, and
// when the context goes.  A failed assert in a kernel writes
//
//   file:line: function: block: [x,y,z], thread: [x,y,z] Assertion `cond` failed.
//
// to stderr at that point, and the context fails with CUDA_ERROR_ASSERT,
// sticky, like any fault.  Here the CPU twins format at once
// (fg_device_printf, fg_device_assert) and the text waits in the
// context's buffer until one of those calls flushes it (fg_output_flush)
// through the C library's streams, as the driver writes.  When the buffer
// is full the oldest records go, as a GPU's circular buffer overwrites
// them.
#include "fakegpu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIFO_SIZE ((size_t)1 << 20)     // cudaLimitPrintfFifoSize's default
#define RECORD_HEAD 5                   // u8 fd, u32 length

struct fg_output {
    unsigned char *buf;     // FIFO_SIZE bytes of records [fd, length, text]
    size_t head, len;       // the records: buf[head, head + len)
};

static size_t record_length(const unsigned char *r)
{
    uint32_t n;
    memcpy(&n, r + 1, sizeof n);
    return RECORD_HEAD + n;
}

// Append a record of text for fd (1 or 2) to c's buffer.
static void append(struct fg_ctx *c, int fd, const char *text, size_t n)
{
    struct fg_output *o = c->output;
    uint32_t n32 = (uint32_t)n;

    if (n > FIFO_SIZE - RECORD_HEAD)
        return;                 // larger than the whole buffer: nothing fits
    if (!o) {
        o = calloc(1, sizeof *o);
        if (!o || !(o->buf = malloc(FIFO_SIZE))) {
            free(o);
            return;             // out of memory: the output is lost
        }
        c->output = o;
    }
    while (o->len + RECORD_HEAD + n > FIFO_SIZE) {     // the oldest go
        size_t drop = record_length(o->buf + o->head);
        o->head += drop;
        o->len -= drop;
    }
    if (o->head + o->len + RECORD_HEAD + n > FIFO_SIZE) {
        memmove(o->buf, o->buf + o->head, o->len);
        o->head = 0;
    }
    unsigned char *r = o->buf + o->head + o->len;
    r[0] = (unsigned char)fd;
    memcpy(r + 1, &n32, sizeof n32);
    memcpy(r + RECORD_HEAD, text, n);
    o->len += RECORD_HEAD + n;
}

void fg_device_printf(struct fg_thread *t, const char *fmt, ...)
{
    struct fg_ctx *c = fg_ctx_current();     // the launching thread's
    char line[4096];
    va_list ap;
    int n;

    (void)t;
    if (!c)
        return;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0)
        append(c, 1, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

void fg_device_assert(struct fg_thread *t, const char *cond, const char *file,
                      unsigned line, const char *function)
{
    struct fg_ctx *c = fg_ctx_current();
    char msg[1024];
    int n = snprintf(msg, sizeof msg,
                     "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] "
                     "Assertion `%s` failed.\n", file, line, function,
                     t->blockIdx.x, t->blockIdx.y, t->blockIdx.z,
                     t->threadIdx.x, t->threadIdx.y, t->threadIdx.z, cond);

    if (c && n > 0)
        append(c, 2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    if (!t->fault)
        t->fault = CUDA_ERROR_ASSERT;   // the kernel stops here
}

void fg_output_flush(struct fg_ctx *c)
{
    struct fg_output *o = c ? c->output : NULL;

    if (!o)
        return;
    while (o->len) {
        const unsigned char *r = o->buf + o->head;
        size_t n = record_length(r);
        // Through the C library, as the driver prints: stdout keeps its
        // buffering, stderr has none.
        fwrite(r + RECORD_HEAD, 1, n - RECORD_HEAD, r[0] == 2 ? stderr : stdout);
        o->head += n;
        o->len -= n;
    }
    o->head = 0;
}

void fg_output_flush_current(void)
{
    fg_output_flush(fg_ctx_current());
}

void fg_output_release(struct fg_ctx *c)
{
    if (c->output) {
        free(c->output->buf);
        free(c->output);
        c->output = NULL;
    }
}
