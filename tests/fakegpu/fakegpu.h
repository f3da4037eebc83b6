// Internal interface of the fake GPU core.  The core lives in the fake
// libcuda.so.1; the fake libcudart.so.13 is built on top of libcuda's public
// cu* functions only, so both libraries share one set of allocations,
// contexts, streams and modules, as they do with NVIDIA's libraries.
//
// Locking: every public cu* entry point takes the one global lock (fg_lock)
// around its work.  Functions declared here expect the lock to be held.
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE     // mmap flags, strdup, clock_gettime under -std=c11
#endif

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

// Internal to libcuda.so.1 (the version script hides them too): hidden
// visibility lets calls bind directly and inline, which the CPU kernels'
// per-access helpers need to run at a useful speed.
#pragma GCC visibility push(hidden)

// ---- Device facts ---------------------------------------------------------------
// RGPU_FAKEGPU_DEVICES=N (1 to FG_MAX_DEVICES, default 1) devices, all alike
// but for their UUID and PCI bus number; their memory is one arena, so a
// device address is valid on every device (as with peer access enabled).

#define FG_MAX_DEVICES      8
#define FG_DEVICE_NAME      "rgpu fake GPU"
#define FG_TOTAL_MEM        (16ull << 30)
#define FG_CC_MAJOR         9
#define FG_CC_MINOR         0
#define FG_SM_ARCH          (FG_CC_MAJOR * 10 + FG_CC_MINOR)
#define FG_GRANULARITY      (2ull << 20)        // VMM granularity, 2 MiB
#define FG_DRIVER_VERSION   13000
#define FG_MAX_THREADS      1024
#define FG_MAX_BLOCK_X      1024
#define FG_MAX_BLOCK_Y      1024
#define FG_MAX_BLOCK_Z      64
#define FG_MAX_GRID_X       2147483647u
#define FG_MAX_GRID_YZ      65535u
#define FG_SHMEM_PER_BLOCK  (48 * 1024)

// ---- Lock --------------------------------------------------------------------

void fg_lock(void);
void fg_unlock(void);

// ---- The modelled copy engine (FAKEGPU_COPY_GBS, core.c) ----------------------

// A copy of n bytes between host and device occupies the engine; returns
// when it will be idle (0: no model).  Lock held.
uint64_t fg_engine_copy(size_t n);
// When the engine will be idle (CLOCK_MONOTONIC ns).  Lock held.
uint64_t fg_engine_idle_at(void);
// Sleep until then.  Lock not held.
void fg_engine_wait(uint64_t t);

// ---- Contexts ----------------------------------------------------------------

struct fg_ctx {
    CUcontext handle;
    int primary;
    CUdevice device;
    unsigned flags;
    // A fault in a kernel is first "pending": work enqueued after it is
    // dropped but still returns success, as the launch itself does.  The next
    // call that waits turns it "sticky": from then on every call in this
    // context returns it until the context is destroyed or reset.
    CUresult pending;
    CUresult sticky;
    // What kernels printed and asserts said, until a call flushes it
    // (printf.c); NULL until a kernel prints.
    struct fg_output *output;
};

// Checks the calling thread's state before an API call does its work; the
// lock must be held.  Fails with CUDA_ERROR_NOT_INITIALIZED before cuInit,
// CUDA_ERROR_INVALID_CONTEXT without a current context (unless the call does
// not need one: FG_CTX_OPTIONAL, *ctx is then NULL), or the context's sticky
// error.  An FG_ENQUEUE call (launch, async copy, record) after a fault gets
// *skip = 1: it must validate its arguments, then do nothing and succeed; any
// other call turns the pending fault sticky and returns it.
// How many devices CUDA sees (RGPU_FAKEGPU_DEVICES, narrowed by
// CUDA_VISIBLE_DEVICES: core.c), whether dev is one, and the physical
// device a visible one is (-1: none).  Physical devices are told apart by
// their UUID and PCI bus.
int fg_device_count(void);
int fg_device_valid(CUdevice dev);
int fg_device_physical(CUdevice dev);
int fg_physical_count(void);
#define FG_UUID_TEXT 41             // "GPU-" and 8-4-4-4-12 hex digits, NUL
void fg_physical_uuid_text(int physical, char out[FG_UUID_TEXT]);
int fg_physical_attribute(int physical, CUdevice_attribute attrib);

#define FG_CTX_OPTIONAL 1
#define FG_ENQUEUE      2
CUresult fg_enter(int flags, struct fg_ctx **ctx, int *skip);

// The calling thread's current context, NULL when it has none (or it is
// destroyed); lock held.
struct fg_ctx *fg_ctx_current(void);

// CUDA_SUCCESS for the NULL/legacy/per-thread streams and live streams;
// first waits for host functions in flight that work on s must follow
// (host_functions.c).  Lock held (released while it waits).
CUresult fg_check_stream(CUstream s);
// The device whose work stream s (or event e) takes: a created one's
// context's, else the current context's; -1 without one.  Lock held.
CUdevice fg_stream_device(CUstream s);
CUdevice fg_event_device(CUevent e);

// Stream capture (capture.c).  Whether s captures (lock not held); work on
// a capturing stream that capture does not model: the capture is
// invalidated and 1 returned (lock held, from fg_check_stream).  A kernel
// launch, an asynchronous copy and a host function on a capturing stream
// become nodes of its graph instead (lock not held).
int fg_capturing(CUstream s);
int fg_capture_refused(CUstream s);
// An event recorded on a capturing stream keeps the capture's dependencies
// and a stream waiting for it joins the capture (capture.c): 1 when the
// capture handled the call (its status in *r), 0 when it is ordinary work.
int fg_capture_event_record(CUevent ev, CUstream s, CUresult *r);
int fg_capture_event_wait(CUstream s, CUevent ev, CUresult *r);
CUresult fg_capture_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                           void **extra);
CUresult fg_capture_copy(uintptr_t dst, uintptr_t src, size_t n, CUstream s);
CUresult fg_capture_host(CUstream s, CUhostFn fn, void *data);
CUresult fg_capture_alloc(CUstream s, CUdevice dev, size_t size, CUdeviceptr *dptr);
CUresult fg_capture_free(CUstream s, CUdeviceptr p);

// Host functions in flight (host_functions.c), lock held: whether work on s
// would wait for one; wait for those, or for all (a context synchronise).
int fg_host_functions_busy(CUstream s);
void fg_host_functions_wait(CUstream s);
void fg_host_functions_wait_all(void);
// Wait on cv with the lock held (released meanwhile).
void fg_wait(pthread_cond_t *cv);

// ---- Handles -------------------------------------------------------------------
//
// Handles handed out are tagged indices into one table, never pointers, so a
// stale or forged handle is detected instead of dereferenced.

enum fg_kind { FG_CTX = 1, FG_STREAM, FG_EVENT, FG_MOD, FG_FUNC, FG_PHYS, FG_LINK,
              FG_GRAPH, FG_GRAPH_EXEC, FG_GRAPH_NODE,     // graphs: graph.c
              FG_ARRAY, FG_TEXTURE, FG_SURFACE };         // arrays.c

uint64_t fg_handle_new(enum fg_kind kind, void *obj, struct fg_ctx *owner);
void *fg_handle_get(uint64_t h, enum fg_kind kind);
void fg_handle_drop(uint64_t h);
// The context a live handle was made in (NULL: none, or not live).
struct fg_ctx *fg_handle_owner(uint64_t h);
// Calls fn for every live handle owned by ctx (fn may drop handles).
void fg_handle_each_owned(struct fg_ctx *owner,
                          void (*fn)(enum fg_kind, void *obj, uint64_t h));

// ---- Memory (mem.c) --------------------------------------------------------------

CUresult fg_mem_init(void);
CUresult fg_mem_alloc(struct fg_ctx *owner, size_t size, CUdeviceptr *out);
CUresult fg_mem_free(CUdeviceptr p);
// A module variable: not freeable with cuMemFree, not owned by a context.
CUresult fg_mem_alloc_global(size_t size, const void *init, size_t init_size,
                             CUdeviceptr *out);
void fg_mem_free_global(CUdeviceptr p);
// Forget what managed.c keeps about a managed allocation at p (a free).
void fg_managed_forget(CUdeviceptr p);
// Whether p lies in a managed allocation; lock held.
int fg_managed_holds(CUdeviceptr p);
void fg_mem_release_owned(struct fg_ctx *owner);
// Forget the host ranges a context registered (driver_mem.c); lock held.
void fg_host_release_owned(struct fg_ctx *owner);
void fg_mem_info(size_t *free_bytes, size_t *total);
// Device memory in use on dev; the context that allocated p, or NULL.
size_t fg_mem_used_on(CUdevice dev);
struct fg_ctx *fg_mem_owner(CUdeviceptr p);

// Whether p lies in the device address range (accessible or not).
int fg_mem_in_arena(uintptr_t p);
// Longest accessible stretch starting at p: returns its length (0: p is not
// accessible device memory) and the host address backing p.
size_t fg_mem_span(CUdeviceptr p, unsigned char **host);
// Whether all of [p, p+n) is accessible device memory.
int fg_mem_valid(CUdeviceptr p, size_t n);

// IPC (ipc.c): the allocation starting at p moved into a POSIX shared-memory
// object, named in name; another process maps it as an R_IMPORT region owned
// by its context, forgotten by fg_mem_close_import.  Lock held.
#define FG_IPC_NAME 40
CUresult fg_mem_export(CUdeviceptr p, char name[FG_IPC_NAME], uint64_t *size);
CUresult fg_mem_import(struct fg_ctx *owner, const char *name, uint64_t size,
                       CUdeviceptr *out);
CUresult fg_mem_close_import(CUdeviceptr p);
// The allocation holding p (not a VMM reservation): 0, or -1 when none.
int fg_mem_range(CUdeviceptr p, CUdeviceptr *base, size_t *size);
// An event's creation flags (driver_exec.c): 0, or -1 for no such event.  Lock held.
int fg_event_flags(CUevent h, unsigned *flags);

// Copies n bytes; *_dev says whether each side is a device address (which
// must then be valid) or a host address of this process.  With run == 0 it
// only validates (work dropped after a fault still reports bad arguments).
CUresult fg_copy(uintptr_t dst, int dst_dev, uintptr_t src, int src_dev,
                 size_t n, int run);
// Fills count elements of elem_size bytes (1, 2 or 4) at device p.
CUresult fg_fill(CUdeviceptr p, uint32_t value, size_t elem_size, size_t count,
                 int run);

// Virtual memory management (cuMemCreate / cuMemMap family).
CUresult fg_vmm_create(size_t size, CUmemGenericAllocationHandle *out);
CUresult fg_vmm_release(CUmemGenericAllocationHandle h);
CUresult fg_vmm_reserve(size_t size, size_t align, CUdeviceptr hint,
                        CUdeviceptr *out);
CUresult fg_vmm_addr_free(CUdeviceptr p, size_t size);
CUresult fg_vmm_map(CUdeviceptr p, size_t size, size_t offset,
                    CUmemGenericAllocationHandle h);
CUresult fg_vmm_unmap(CUdeviceptr p, size_t size);
CUresult fg_vmm_set_access(CUdeviceptr p, size_t size, int access);

// ---- Modules (module.c) ----------------------------------------------------------

struct fg_param { uint32_t offset, size; };

struct fg_twin;

struct fg_func {
    CUfunction handle;          // also the CUkernel value
    struct fg_module *mod;
    char *name;                 // mangled
    unsigned nparams;
    struct fg_param *params;    // by ordinal
    uint32_t param_size;        // size of the packed parameter buffer
    const struct fg_twin *twin; // CPU implementation, NULL when none
    int num_regs, local_size, shared_size, max_threads, arch;
    // cuFuncSetAttribute: the dynamic shared memory a launch may use and
    // the preferred carveout, once set (else the defaults).
    int dyn_shared, carveout;
    int dyn_shared_set, carveout_set;
};

struct fg_global {
    char *name;
    CUdeviceptr dptr;
    size_t size;
};

struct fg_module {
    CUmodule handle;            // also the CUlibrary value
    int is_library;
    struct fg_ctx *owner;       // NULL for libraries (context independent)
    int arch;
    unsigned nfuncs, nglobals;
    struct fg_func *funcs;
    struct fg_global *globals;
    size_t const_size;
};

CUresult fg_module_load(const void *image, int is_library, struct fg_ctx *owner,
                        struct fg_module **out);
void fg_module_free(struct fg_module *m);
struct fg_func *fg_module_func(struct fg_module *m, const char *name);
struct fg_global *fg_module_global(struct fg_module *m, const char *name);
// A link input of size bytes, a cubin or a fatbin container, as the ELF the
// fake would load from it (a fatbin's entry for this GPU, decompressed): a
// malloc'd copy in *elf, its size, and how many kernels it defines.
// CUDA_ERROR_NOT_SUPPORTED when only PTX fits (no JIT compiler),
// CUDA_ERROR_NO_BINARY_FOR_GPU for another GPU's code, CUDA_ERROR_INVALID_IMAGE
// for anything unreadable or reaching past size.
CUresult fg_image_elf(const void *data, size_t size, unsigned char **elf,
                      size_t *elf_size, unsigned *nkernels);

// ---- JIT options and logs (link.c) ---------------------------------------------
//
// What the fake does with CUjit_option arrays: it compiles nothing, but it
// keeps the caller's log buffers and writes real lines into them, truncated
// to the sizes given, and writes back the sizes used (the NUL included) and
// the wall time, as a driver does.
struct fg_jit {
    unsigned n;
    CUjit_option *opt;          // the caller's arrays
    void **val;
    char *log[2];               // info, error: the text so far (ours)
    size_t len[2];
    char *buf[2];               // the caller's buffers and their sizes
    unsigned cap[2];
    double ms;                  // time spent, for CU_JIT_WALL_TIME
};
// Takes the options of a load or a link (input: options of one link input,
// which must not ask for logs or a target).  CUDA_ERROR_INVALID_VALUE for
// unknown or misplaced options.
CUresult fg_jit_open(struct fg_jit *j, unsigned n, CUjit_option *opt, void **val,
                     int input);
// Append one line to the info or error log.
void fg_jit_info(struct fg_jit *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void fg_jit_error(struct fg_jit *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// Write the logs, their sizes and the wall time into the caller's options.
void fg_jit_flush(struct fg_jit *j);
void fg_jit_close(struct fg_jit *j);

// ---- CPU kernels (kernels.c) -----------------------------------------------------

struct fg_dim { unsigned x, y, z; };

// What a CPU kernel sees of one GPU thread.
struct fg_thread {
    struct fg_dim gridDim, blockDim, blockIdx, threadIdx;
    // The launch's cluster shape ({1, 1, 1} without one) and whether it was
    // cooperative: what a kernel learns from cooperative_groups.
    struct fg_dim clusterDim;
    int cooperative;
    // A kernel that calls grid.sync() runs as phases, the code between two
    // syncs: every thread of the grid runs phase 0, then phase 1...
    unsigned phase;
    const unsigned char *params;    // packed parameter buffer
    const struct fg_func *func;     // layout of params
    CUresult fault;                 // first fault; stops the launch
    // Last device extent touched: most accesses hit it again.
    CUdeviceptr c_base;
    size_t c_len;
    unsigned char *c_host;
};

struct fg_twin {
    const char *name;               // mangled kernel name
    unsigned nparams;
    uint32_t sizes[16];             // expected parameter sizes, by ordinal
    void (*fn)(struct fg_thread *t);
    // Grid-wide barriers (grid.sync()) the kernel passes: it runs as
    // grid_syncs + 1 phases, and only in a cooperative launch.
    unsigned grid_syncs;
};

// How a launch runs beyond its grid and block (cuLaunchKernelEx's
// attributes that a kernel can observe).
struct fg_launch_shape {
    struct fg_dim cluster;          // {1, 1, 1} without a cluster
    int cooperative;
};

// The twin for f, or NULL when there is none or its sizes disagree with f.
const struct fg_twin *fg_twin_find(const struct fg_func *f);
// Runs f over the whole grid; returns CUDA_SUCCESS or the fault it hit.
CUresult fg_exec(const struct fg_func *f, struct fg_dim grid,
                 struct fg_dim block, const struct fg_launch_shape *shape,
                 const unsigned char *params);

// Accessors for CPU kernels (FG_LD/FG_ST: values of at most 4 KiB).  A bad
// address records a fault and yields a scratch location, so the kernel body
// never touches host memory it should not; the launch stops after the
// thread that faulted.
const void *fg_arg(struct fg_thread *t, unsigned i, size_t size);
const void *fg_ld(struct fg_thread *t, CUdeviceptr a, size_t n);
void *fg_st(struct fg_thread *t, CUdeviceptr a, size_t n);

// A CUDA array side of a copy (arrays.c), lock held: the element block
// [x_bytes, +width_bytes) x [y, +height) x [z, +depth) must lie inside the
// array; gives its host storage and row and slice pitches.
CUresult fg_array_side(CUarray h, size_t x_bytes, size_t y, size_t z,
                       size_t width_bytes, size_t height, size_t depth,
                       uintptr_t *base, size_t *pitch, size_t *slice);
// tex2D<float> of a texture object (arrays.c): point sampling; a stale
// object records a fault.
float fg_tex2d_float(struct fg_thread *t, CUtexObject h, float x, float y);
// surf2Dwrite<float> (arrays.c): x in bytes; outside the array (the trap
// boundary mode) or a stale object records a fault.
void fg_surf2d_write_float(struct fg_thread *t, CUsurfObject h, float v, int x_bytes, int y);

#define FG_ARG(t, i, T)  (*(const T *)fg_arg((t), (i), sizeof(T)))
#define FG_LD(t, a, T)   (*(const T *)fg_ld((t), (a), sizeof(T)))
#define FG_ST(t, a, T)   (*(T *)fg_st((t), (a), sizeof(T)))

// ---- Device printf and assert (printf.c) --------------------------------------------
//
// For CPU twins: printf as the kernel prints, into the current context's
// buffer; a failed assert, whose message goes to stderr and which stops the
// launch with CUDA_ERROR_ASSERT.  The calls where the driver prints the
// buffer flush it (lock held): a launch's start, the synchronises, blocking
// copies, module loads and unloads, a context's end.
// A conditional handle's value, as cudaGraphSetConditional sets it in a
// kernel (graph.c): 0, or -1 for a handle no graph has.
int fg_cond_set(unsigned long long handle, unsigned value);
void fg_device_printf(struct fg_thread *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void fg_device_assert(struct fg_thread *t, const char *cond, const char *file,
                      unsigned line, const char *function);
void fg_output_flush(struct fg_ctx *c);
void fg_output_flush_current(void);
void fg_output_release(struct fg_ctx *c);

#pragma GCC visibility pop
