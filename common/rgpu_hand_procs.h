/* Hand-written procedures: calls that still pack their arguments by hand
 * (launches, modules and JIT linking, the library digest), until they move
 * to the codec as rgpu's own procedures (codegen/<lib>_own.h), as the
 * copies, host functions, NVML lists, log settings, cuBLASLt's
 * descriptors, graphs and the shared-memory copies did.  Client side in
 * stubs/ and common/, server side in the daemon files named.  Their ids
 * come from rgpu_proc_id() over these names, like the generated ones, so
 * they are as stable; the "rgpu." prefix keeps them apart from CUDA's own
 * names.
 *
 * Arguments (one msgpack array each; "bin" last where present):
 */
#ifndef RGPU_HAND_PROCS_H
#define RGPU_HAND_PROCS_H

#include <stdint.h>

/* [image]  -> [library handle]   load a fatbin/cubin/PTX (runtime; image: below) */
#define RGPU_H_LIB_LOAD      "rgpu.lib_load"
/* [library, name] -> [kernel, [[offset, size]...]]  kernel and its layout */
#define RGPU_H_KERNEL_GET    "rgpu.kernel_get"
/* [kernel, gx, gy, gz, bx, by, bz, shmem, stream, bin params] -> []  (no reply) */
#define RGPU_H_LAUNCH        "rgpu.launch"
/* [kernel, gx, gy, gz, bx, by, bz, shmem, stream, [[id, field...]...], bin params] -> []
 * cudaLaunchKernelExC with launch attributes, and the cooperative launches
 * (no reply unless the attributes need the runtime's checks; the attribute
 * list: common/rgpu_launch_attrs.h) */
#define RGPU_H_LAUNCH_EX     "rgpu.launch_ex"

/* [lib name, bin digest] -> []  a library the client loaded after its hello:
 * RGPU_EVERSION when the server's table differs (lib "rgpu"; rgpu_hello.h) */
#define RGPU_H_LIB_DIGEST    "rgpu.lib_digest"

/* Module images.  An image argument ("image" below) is a bin, or, for an
 * image larger than RGPU_IMAGE_INLINE_MAX, the image's size: its bytes
 * went ahead in pieces to a staging buffer of the client thread
 * (common/rgpu_image.c, daemon/image_stage.c), pieces of at most
 * RGPU_IMAGE_PIECE bytes, in order, the first at offset 0 (which drops an
 * unfinished image of that thread):
 * [total, offset, bin piece] -> []   (library "cuda" or "cudart") */
#define RGPU_H_IMAGE_PIECE     "rgpu.image_piece"
#define RGPU_IMAGE_INLINE_MAX  (16u << 20)
#define RGPU_IMAGE_PIECE       (16u << 20)

/* JIT options (cuModuleLoadDataEx, cuLibraryLoadData, cuLink*): "jit
 * options" is an array of [id, value]: value an unsigned for options that
 * take a number (a log buffer's size included), nil for the log buffers
 * and CU_JIT_WALL_TIME (outputs only: the server uses buffers of its
 * own), an array of str for the name lists.  "jit outputs" is an array of
 * [id, value] for the options the library writes: an unsigned (the log
 * sizes, CU_JIT_THREADS_PER_BLOCK, CU_JIT_WALL_TIME as the bits of its
 * float), a bin for each log's text (stubs/cuda_modules.c,
 * daemon/hand_cuda_modules.c).  Bounds the server holds a client to (a
 * larger request is a protocol error): */
#define RGPU_JIT_MAX_OPTIONS   64       /* options of one call (CUDA 13 has 35) */
#define RGPU_JIT_MAX_NAMES     4096     /* entries of a name list */
#define RGPU_JIT_NAME_MAX      4096     /* bytes of a name, NUL included */

/* Driver API (library "cuda"): */
/* [image] or [[jit options], image] -> [module, [jit outputs]] */
#define RGPU_H_CU_MODULE_LOAD  "rgpu.cu_module_load"
/* [image] or [[jit options], image] -> [library, [jit outputs]] */
#define RGPU_H_CU_LIBRARY_LOAD "rgpu.cu_library_load"
/* JIT linking.  Every reply after the create carries the create's jit
 * outputs as they stand (the logs grow while the link state lives).
 * [[jit options]] -> [link, [jit outputs]] */
#define RGPU_H_CU_LINK_CREATE  "rgpu.cu_link_create"
/* [link, input type, name, [jit options], image] -> [[create's], [own jit outputs]] */
#define RGPU_H_CU_LINK_ADD     "rgpu.cu_link_add"
/* [link] -> [size, [create's jit outputs], bin first bytes of the image] */
#define RGPU_H_CU_LINK_COMPLETE "rgpu.cu_link_complete"
/* [link, offset, length] -> [bin]   more of the completed image */
#define RGPU_H_CU_LINK_READ    "rgpu.cu_link_read"
/* [link] -> [] */
#define RGPU_H_CU_LINK_DESTROY "rgpu.cu_link_destroy"
/* [function] -> [[[offset, size]...]] */
#define RGPU_H_CU_PARAM_LAYOUT "rgpu.cu_param_layout"
/* [function, gx, gy, gz, bx, by, bz, shmem, stream, packed, bin params] -> []
 * (no reply; packed: the caller's own `extra` buffer) */
#define RGPU_H_CU_LAUNCH       "rgpu.cu_launch"
/* [function, gx, gy, gz, bx, by, bz, shmem, stream, packed, [[id, field...]...],
 *  bin params] -> []  cuLaunchKernelEx with launch attributes and the
 * cooperative launches (no reply unless the attributes need the driver's
 * checks; the attribute list: common/rgpu_launch_attrs.h) */
#define RGPU_H_CU_LAUNCH_EX    "rgpu.cu_launch_ex"

#endif
