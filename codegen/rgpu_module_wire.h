/* Records and bounds that rgpu's own procedures of kernels, launches and
 * module images share between the runtime's (codegen/cudart_own.h), the
 * driver's (codegen/cuda_own.h) and the client core's (codegen/rgpu_own.h).
 * They travel as the bytes of buffer parameters, which the codec bounds;
 * the server reads every field and checks it before the library sees it. */
#ifndef RGPU_MODULE_WIRE_H
#define RGPU_MODULE_WIRE_H

#include <stdint.h>

/* ---- kernel parameters ---------------------------------------------------------
 * Where each parameter of a kernel lies in the argument bytes of a launch:
 * the client packs a launch's arguments by it (common/rgpu_client.c,
 * rgpu_layout_pack) and the server finds each inside them again. */
struct rgpu_param_slot {
    uint32_t offset;
    uint32_t size;
};
/* The most parameters a layout holds (the server asks no further), and
 * the most argument bytes a launch carries (CUDA allows 32764). */
#define RGPU_KERNEL_PARAMS_MAX 4096
#define RGPU_KERNEL_PARAM_BYTES_MAX 32768

/* ---- launch attributes -----------------------------------------------------------
 * One attribute of cuLaunchKernelEx or cudaLaunchKernelExC: its id and the
 * members of its value in the header's order, one per field, each widened
 * to 64 bits (signed ones sign-extended, a float as its bits), the fields
 * past its members zero (common/rgpu_launch_attrs.c).  The union itself
 * never travels: it holds an event and a device address the server must
 * check, and padding that would carry whatever the client's stack held. */
struct rgpu_launch_attr {
    uint32_t id;
    uint32_t zero;
    uint64_t field[5];
};
/* More attributes than this in one launch is a malformed request (the
 * header defines 16; a program may repeat one, as CUDA allows). */
#define RGPU_LAUNCH_ATTRS_MAX 64

/* ---- module images ---------------------------------------------------------------
 * An image larger than RGPU_IMAGE_INLINE_MAX goes ahead of the request that
 * loads it in pieces of RGPU_IMAGE_PIECE bytes (rgpu_image_piece of
 * codegen/rgpu_own.h), which then names it by its size alone (its bytes
 * NULL). */
#define RGPU_IMAGE_INLINE_MAX (16u << 20)
#define RGPU_IMAGE_PIECE      (16u << 20)

/* ---- JIT options -------------------------------------------------------------------
 * cuModuleLoadDataEx, cuLibraryLoadData and cuLink* send the program's
 * options by value, one record each: value the option's number (a log
 * buffer's size included); for a name list (CU_JIT_REFERENCED_*_NAMES) how
 * many names, whose strings follow one another in the call's names bytes,
 * each with its NUL, list after list in the order of the options; 0 for
 * the log buffers and CU_JIT_WALL_TIME, which the library writes: the
 * server hands it buffers of its own. */
struct rgpu_jit_option {
    uint32_t id;
    uint32_t zero;
    uint64_t value;
};
/* What the library wrote into a call's options: the log sizes, threads per
 * block, the wall time (a float's bits), and the lengths of the two logs'
 * texts, which come back one after the other (info first, no NUL) in the
 * call's logs buffer, cut to the room the client gave. */
struct rgpu_jit_result {
    uint32_t info_log_size;
    uint32_t error_log_size;
    uint32_t threads_per_block;
    uint32_t wall_time;
    uint32_t info_log_len;
    uint32_t error_log_len;
};
/* Bounds the server holds a client to (a larger request is a protocol
 * error). */
#define RGPU_JIT_MAX_OPTIONS   64       /* options of one call (CUDA 13 has 35) */
#define RGPU_JIT_MAX_NAMES     4096     /* entries of a name list */
#define RGPU_JIT_NAME_MAX      4096     /* bytes of a name, NUL included; a link input's too */
#define RGPU_JIT_LOG_MAX       (1u << 20)   /* a log buffer's bytes */

#endif
