/* ptrcheck: every pointer a client sends is checked on the server.
 *
 *   ptrcheck RGPUD LIB_DIR
 *
 * Speaks the raw protocol to rgpud on the fake GPU backend (helpers from
 * tests/badinput.c).  It finds the session process of its connection, picks
 * real addresses inside it from /proc/PID/maps (the start of rgpud's own
 * ELF image, readable: "\177ELF"; the last bytes of its heap, writable), and
 * uses them as "device" pointers in every copy direction and kind, in
 * memsets, as cuBLAS scalars whose pointer mode does not match the
 * server-side handle's, as cuDNN scaling factors, and as cuBLASLt pointer
 * attributes (a bias pointer in a descriptor's content, and one sent with a
 * matmul).  Without the checks of daemon/owned.c these calls read and
 * write the session's memory (run it against an unpatched rgpud: the dtoh
 * case reads back the ELF magic).
 * Each must return the library's invalid-value status, and the session
 * must keep serving.  Interior pointers of an allocation, of a pool
 * allocation and of a VMM mapping are accepted.  "ok CASE" / "FAIL CASE". */
#define BADINPUT_HELPERS_ONLY
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "badinput.c"
#pragma GCC diagnostic pop

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudnn_graph.h>
#include "cudnn_own.h"

/* The native invalid-value statuses the checks answer with. */
enum {
    CUDART_INVALID = cudaErrorInvalidValue,
    CU_INVALID = CUDA_ERROR_INVALID_VALUE,
    CUBLAS_INVALID = CUBLAS_STATUS_INVALID_VALUE,
    CUDNN_BAD_PARAM = CUDNN_STATUS_BAD_PARAM,
};

static int sess;                    /* the connection under test */
static uint64_t serial_no;
static uint64_t elf_addr, heap_addr;    /* inside the session process */
static int failures;

/* One argument of a raw call. */
struct a {
    char t;         /* 'u' unsigned, 'b' bin, 'n' nil, 'o' [size]: host output,
                       'r' msgpack bytes as they are */
    uint64_t u;
    const void *p;
};
#define U(v) ((struct a){ 'u', (uint64_t)(v), NULL })
#define B(p, n) ((struct a){ 'b', (uint64_t)(n), (p) })
#define NIL ((struct a){ 'n', 0, NULL })
#define OUTSZ(n) ((struct a){ 'o', (uint64_t)(n), NULL })
#define RAW(sb) ((struct a){ 'r', (uint64_t)(sb)->size, (sb)->data })

/* Call lib/name; returns the API status (or -1, why set, on a transport
 * failure); the first bin output goes to out (up to cap bytes). */
static int64_t raw_call(const char *lib, const char *name, const struct a *args, unsigned n,
                        void *out, size_t cap)
{
    struct msg m;
    msgpack_sbuffer buf;
    struct answer ans;
    uint64_t serial = ++serial_no;

    msgpack_sbuffer_init(&buf);
    msg_begin(&m);
    pack_call_head(&m, serial, rgpu_proc_id(lib, name));
    msgpack_pack_array(&m.pk, n);
    for (unsigned i = 0; i < n; i++) {
        switch (args[i].t) {
        case 'u': msgpack_pack_uint64(&m.pk, args[i].u); break;
        case 'b':
            msgpack_pack_bin(&m.pk, (size_t)args[i].u);
            msgpack_pack_bin_body(&m.pk, args[i].p, (size_t)args[i].u);
            break;
        case 'o': msgpack_pack_array(&m.pk, 1); msgpack_pack_uint64(&m.pk, args[i].u); break;
        case 'r': m.pk.callback(m.pk.data, args[i].p, (size_t)args[i].u); break;
        default: msgpack_pack_nil(&m.pk); break;
        }
    }
    msg_end(&m, &buf);
    int rc = send_buf(sess, &buf);
    msgpack_sbuffer_destroy(&buf);
    if (rc < 0 || expect_reply(sess, (int64_t)serial, RGPU_OK, &ans) < 0)
        return -1;
    int64_t api = (int64_t)field(&ans, 3);
    const msgpack_object *outs = &ans.f[5];
    if (out && outs->type == MSGPACK_OBJECT_ARRAY) {
        for (uint32_t i = 0; i < outs->via.array.size; i++) {
            const msgpack_object *o = &outs->via.array.ptr[i];
            if (o->type == MSGPACK_OBJECT_BIN) {
                memcpy(out, o->via.bin.ptr, o->via.bin.size < cap ? o->via.bin.size : cap);
                break;
            }
            if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && cap >= 8) {
                memcpy(out, &o->via.u64, 8);
                break;
            }
        }
    }
    answer_free(&ans);
    return api;
}

/* A case: the call's API status must be want, and the session must then
 * still answer cudaGetDeviceCount. */
static void expect(const char *what, int64_t got, int64_t want)
{
    if (got < 0)
        printf("FAIL %s: %s\n", what, why), failures++;
    else if (got != want)
        printf("FAIL %s: status %lld, wanted %lld\n", what, (long long)got, (long long)want),
            failures++;
    else if (good_call(sess, ++serial_no) < 0)
        printf("FAIL %s: session stopped serving: %s\n", what, why), failures++;
    else
        printf("ok %s\n", what);
}

#define CALL(lib, name, out, cap, ...)                                                    \
    raw_call(lib, name, (const struct a[]){ __VA_ARGS__ },                                \
             sizeof((const struct a[]){ __VA_ARGS__ }) / sizeof(struct a), out, cap)

/* ---- finding addresses in the session process --------------------------------- */

/* The listener's children: our session, and perhaps the session of
 * start_daemon's probe connection, still ending.  *n of them into pids. */
static int session_pids(pid_t *pids, int max)
{
    char path[64], buf[512] = "";
    int n = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)daemon_pid, (int)daemon_pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = '\0';
    fclose(f);
    for (char *s = buf, *end; n < max; s = end) {
        long v = strtol(s, &end, 10);
        if (end == s)
            break;
        pids[n++] = (pid_t)v;
    }
    return n;
}

static int find_addresses(pid_t pid)
{
    char path[64], line[512], exe[256] = "";
    unsigned long exe_data = 0;
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n > 0)
        exe[n] = '\0';
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return fail("cannot read %s", path);
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &off) != 4)
            continue;
        if (!elf_addr && off == 0 && *exe && strstr(line, exe))
            elf_addr = lo;
        if (strstr(line, "[heap]") && perms[1] == 'w')
            heap_addr = hi - 64;    /* the top chunk's unused end */
        if (*exe && strstr(line, exe) && perms[1] == 'w')
            exe_data = hi - 64;     /* the page padding after .bss */
    }
    fclose(f);
    /* AddressSanitizer's allocator uses no brk heap: rgpud's own data. */
    if (!heap_addr)
        heap_addr = exe_data;
    return elf_addr && heap_addr ? 0 : fail("no ELF image or heap in %s", path);
}

/* ---- the cases ------------------------------------------------------------------ */

static void copies(uint64_t dev)
{
    char got[16] = "", bytes[16] = "0123456789abcde";
    expect("dtoh from session memory",
           CALL("cudart", "rgpu_dtoh", got, 4, U(4), U(4), U(elf_addr), U(0)), CUDART_INVALID);
    if (memcmp(got, "\177ELF", 4) == 0)
        printf("FAIL dtoh: read the session's ELF header\n"), failures++;
    expect("htod into session memory",
           CALL("cudart", "rgpu_htod", NULL, 0, U(heap_addr), U(0), U(8), B(bytes, 8)),
           CUDART_INVALID);
    expect("htod past an allocation",
           CALL("cudart", "rgpu_htod", NULL, 0, U(dev + 4096 - 4), U(0), U(8), B(bytes, 8)),
           CUDART_INVALID);
    for (unsigned kind = 0; kind <= 4; kind++) {
        char what[64];
        snprintf(what, sizeof what, "dtod kind %u into session memory", kind);
        expect(what, CALL("cudart", "rgpu_copy_dtod", NULL, 0, U(heap_addr), U(dev), U(8), U(kind),
                          U(0), U(0)), CUDART_INVALID);
        snprintf(what, sizeof what, "dtod kind %u from session memory", kind);
        expect(what, CALL("cudart", "rgpu_copy_dtod", NULL, 0, U(dev), U(elf_addr), U(8), U(kind),
                          U(0), U(1)), CUDART_INVALID);
    }
    expect("dtod kind host-to-host between allocations",
           CALL("cudart", "rgpu_copy_dtod", NULL, 0, U(dev), U(dev + 64), U(8),
                U(cudaMemcpyHostToHost), U(0), U(0)), CUDART_INVALID);
    expect("htod2d into session memory",
           CALL("cudart", "rgpu_htod_2d", NULL, 0, U(heap_addr), U(16), U(8), U(2), U(0), U(16),
                B(bytes, 16)), CUDART_INVALID);
    expect("dtoh2d from session memory",
           CALL("cudart", "rgpu_dtoh_2d", got, 4, U(4), U(4), U(elf_addr), U(16), U(4), U(1), U(0)),
           CUDART_INVALID);
    expect("dtod2d into session memory",
           CALL("cudart", "rgpu_copy_dtod_2d", NULL, 0, U(heap_addr), U(16), U(dev), U(16), U(8), U(2),
                U(0)), CUDART_INVALID);
    expect("dtod2d from session memory",
           CALL("cudart", "rgpu_copy_dtod_2d", NULL, 0, U(dev), U(16), U(elf_addr), U(16), U(8), U(2),
                U(0)), CUDART_INVALID);
    expect("dtoh2d extent past the allocation",
           CALL("cudart", "rgpu_dtoh_2d", got, 4, U(8), U(8), U(dev), U(4096), U(4), U(2), U(0)),
           CUDART_INVALID);
    expect("dtoh2d pitch wrapping",
           CALL("cudart", "rgpu_dtoh_2d", got, 4, U(12), U(12), U(dev), U(UINT64_MAX / 2), U(4),
                U(3), U(0)),
           CUDART_INVALID);
    expect("cuMemcpyHtoD into session memory",
           CALL("cuda", "rgpu_cu_htod", NULL, 0, U(heap_addr), U(0), U(8), B(bytes, 8)),
           CU_INVALID);
    expect("cuMemcpyDtoH from session memory",
           CALL("cuda", "rgpu_cu_dtoh", got, 4, U(4), U(4), U(elf_addr), U(0)), CU_INVALID);
    expect("cuMemcpyDtoD from session memory",
           CALL("cuda", "cuMemcpyDtoD_v2", NULL, 0, U(dev), U(elf_addr), U(8)), CU_INVALID);
}

static void memsets(uint64_t dev)
{
    expect("cudaMemset session memory",
           CALL("cudart", "cudaMemset", NULL, 0, U(heap_addr), U(0), U(8)), CUDART_INVALID);
    expect("cudaMemset past an allocation",
           CALL("cudart", "cudaMemset", NULL, 0, U(dev), U(0), U(4097)), CUDART_INVALID);
    expect("cudaMemset2D extent past an allocation",
           CALL("cudart", "cudaMemset2D", NULL, 0, U(dev), U(2048), U(0), U(8), U(3)),
           CUDART_INVALID);
    expect("cuMemsetD32 past an allocation",
           CALL("cuda", "cuMemsetD32_v2", NULL, 0, U(dev), U(0), U(1025)), CU_INVALID);
    expect("cuMemsetD8 session memory",
           CALL("cuda", "cuMemsetD8_v2", NULL, 0, U(heap_addr), U(0), U(8)), CU_INVALID);
    expect("cudaMemset inside an allocation",
           CALL("cudart", "cudaMemset", NULL, 0, U(dev + 128), U(0), U(128)), 0);
}

static void cublas_scalars(uint64_t dev)
{
    uint64_t h = 0;
    float one = 1.0f;
    if (CALL("cublas", "cublasCreate_v2", &h, 8, U(8)) != 0 || !h) {
        printf("FAIL cublasCreate: %s\n", why);
        failures++;
        return;
    }
    /* Host mode on the server: a pointer for result or alpha is refused. */
    expect("cublasSdot result to a session address (host mode)",
           CALL("cublas", "cublasSdot_v2", NULL, 0, U(h), U(4), U(dev), U(1), U(dev), U(1),
                U(heap_addr)), CUBLAS_INVALID);
    expect("cublasSaxpy alpha from a session address (host mode)",
           CALL("cublas", "cublasSaxpy_v2", NULL, 0, U(h), U(4), U(elf_addr), U(dev), U(1),
                U(dev + 64), U(1)), CUBLAS_INVALID);
    expect("cublasSaxpy alpha by value (host mode)",
           CALL("cublas", "cublasSaxpy_v2", NULL, 0, U(h), U(4), B(&one, 4), U(dev), U(1),
                U(dev + 64), U(1)), 0);
    expect("cublasSaxpy x in session memory",
           CALL("cublas", "cublasSaxpy_v2", NULL, 0, U(h), U(4), B(&one, 4), U(elf_addr), U(1),
                U(dev + 64), U(1)), CUBLAS_INVALID);
    /* Device mode on the server: bytes are refused, so are foreign pointers. */
    if (CALL("cublas", "cublasSetPointerMode_v2", NULL, 0, U(h), U(1)) != 0) {
        printf("FAIL cublasSetPointerMode: %s\n", why);
        failures++;
        return;
    }
    expect("cublasSdot host result in device mode",
           CALL("cublas", "cublasSdot_v2", NULL, 0, U(h), U(4), U(dev), U(1), U(dev), U(1),
                OUTSZ(4)), CUBLAS_INVALID);
    expect("cublasSaxpy alpha bytes in device mode",
           CALL("cublas", "cublasSaxpy_v2", NULL, 0, U(h), U(4), B(&one, 4), U(dev), U(1),
                U(dev + 64), U(1)), CUBLAS_INVALID);
    expect("cublasSdot result to a session address (device mode)",
           CALL("cublas", "cublasSdot_v2", NULL, 0, U(h), U(4), U(dev), U(1), U(dev), U(1),
                U(heap_addr)), CUBLAS_INVALID);
    expect("cublasSdot result in owned memory (device mode)",
           CALL("cublas", "cublasSdot_v2", NULL, 0, U(h), U(4), U(dev), U(1), U(dev), U(1),
                U(dev + 256)), 0);
}

static void cudnn_scalars(uint64_t dev)
{
    uint64_t h = 0;
    if (CALL("cudnn", "cudnnCreate", &h, 8, U(8)) != 0 || !h) {
        printf("FAIL cudnnCreate: %s\n", why);
        failures++;
        return;
    }
    expect("cudnnScaleTensor alpha as a session address",
           CALL("cudnn", "cudnnScaleTensor", NULL, 0, U(h), U(0), U(dev), U(elf_addr)),
           CUDNN_BAD_PARAM);
    expect("cudnnAddTensor beta as a session address",
           CALL("cudnn", "cudnnAddTensor", NULL, 0, U(h), U(0), U(0), U(dev), U(heap_addr),
                U(0), U(dev)), CUDNN_BAD_PARAM);
    expect("cudnnSetTensor value as a session address",
           CALL("cudnn", "cudnnSetTensor", NULL, 0, U(h), U(0), U(dev), U(elf_addr)),
           CUDNN_BAD_PARAM);
    /* A kept variant pack's data pointer (rgpu_cudnn_execute) naming the
     * session's heap, and a workspace doing so beside a by-value value
     * (which stands for its own data pointer only). */
    uint64_t plan = 0x7000;
    if (CALL("cudnn", "rgpu_cudnn_backend_create", NULL, 0, U(plan),
             U(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR), U(0)) != 0) {
        printf("FAIL rgpu_cudnn_backend_create: %s\n", why);
        failures++;
        return;
    }
    struct rgpu_cudnn_pack_attr attr = { CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                         CUDNN_TYPE_VOID_PTR, 1, 0 };
    expect("variant pack data pointer as a session address",
           CALL("cudnn", "rgpu_cudnn_execute", NULL, 0, U(h), U(plan), B(&attr, sizeof attr),
                U(1), B(&heap_addr, 8), U(8), NIL, U(0)), CUDNN_BAD_PARAM);
    struct rgpu_cudnn_pack_attr two[2] = {
        { CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 1, 0 },
        { CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, 8 },
    };
    uint64_t ptrs[2] = { heap_addr, heap_addr };
    struct rgpu_cudnn_value value = { .index = 0, .size = 4 };
    expect("variant pack workspace as a session address beside a by-value value",
           CALL("cudnn", "rgpu_cudnn_execute", NULL, 0, U(h), U(plan), B(two, sizeof two),
                U(2), B(ptrs, sizeof ptrs), U(sizeof ptrs), B(&value, sizeof value), U(1)),
           CUDNN_BAD_PARAM);
    /* A pointer inside a backend attribute (not a variant pack's). */
    expect("backend attribute pointer as a session address",
           CALL("cudnn", "rgpu_cudnn_backend_set", NULL, 0, U(plan),
                U(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE), U(CUDNN_TYPE_VOID_PTR), U(1),
                B(&heap_addr, 8), U(8), U(0)), CUDNN_BAD_PARAM);
}

/* cuBLASLt: one descriptor made by rgpu_lt_materialize from kind, create
 * parameters and attributes (id, 4- or 8-byte value), in the content form
 * of codegen/cublasLt_own.h; its handle, or 0. */
static uint64_t lt_make(unsigned kind, const int64_t *params, unsigned nparams,
                        const uint32_t *ids, const uint64_t *vals, const uint32_t *sizes,
                        unsigned nattrs)
{
    unsigned char content[256] = { (unsigned char)kind, (unsigned char)nparams };
    size_t len = 2;
    uint64_t handle = 0;
    memcpy(content + len, params, 8 * nparams);
    len += 8 * nparams;
    for (unsigned i = 0; i < nattrs; i++) {
        const uint32_t record[2] = { ids[i], sizes[i] };
        memcpy(content + len, record, sizeof record);
        memcpy(content + len + sizeof record, &vals[i], sizes[i]);
        len += sizeof record + sizes[i];
    }
    uint32_t length = (uint32_t)len;
    struct msg m;
    msgpack_sbuffer buf;
    struct answer ans;
    uint64_t serial = ++serial_no;
    msgpack_sbuffer_init(&buf);
    msg_begin(&m);
    pack_call_head(&m, serial, rgpu_proc_id("cublasLt", "rgpu_lt_materialize"));
    msgpack_pack_array(&m.pk, 9);
    msgpack_pack_nil(&m.pk);
    msgpack_pack_uint64(&m.pk, 0);
    msgpack_pack_bin_with_body(&m.pk, &length, sizeof length);
    msgpack_pack_uint64(&m.pk, 1);
    msgpack_pack_bin_with_body(&m.pk, content, len);
    msgpack_pack_uint64(&m.pk, len);
    msgpack_pack_uint32(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, sizeof(int32_t));
    msgpack_pack_uint64(&m.pk, sizeof handle);
    msg_end(&m, &buf);
    int rc = send_buf(sess, &buf);
    msgpack_sbuffer_destroy(&buf);
    if (rc < 0 || expect_reply(sess, (int64_t)serial, RGPU_OK, &ans) < 0)
        return 0;
    /* [status, handle]: the handle of a content made with success. */
    const msgpack_object *outs = &ans.f[5];
    int32_t status = -1;
    if (field(&ans, 3) == 0 && outs->type == MSGPACK_OBJECT_ARRAY && outs->via.array.size == 2 &&
        outs->via.array.ptr[0].type == MSGPACK_OBJECT_BIN &&
        outs->via.array.ptr[0].via.bin.size == sizeof status &&
        outs->via.array.ptr[1].type == MSGPACK_OBJECT_BIN &&
        outs->via.array.ptr[1].via.bin.size == sizeof handle) {
        memcpy(&status, outs->via.array.ptr[0].via.bin.ptr, sizeof status);
        if (status == 0)
            memcpy(&handle, outs->via.array.ptr[1].via.bin.ptr, sizeof handle);
    }
    answer_free(&ans);
    return handle;
}

/* A 4x4x4 fp32 matmul with a bias epilogue, in dev: the bias pointer of
 * the descriptor's content is never set on the server (the server's
 * descriptor holds NULL there), and the one sent with the matmul is
 * checked like any other device pointer. */
static void lt_pointers(uint64_t dev)
{
    uint64_t lt = 0;
    if (CALL("cublasLt", "cublasLtCreate", &lt, 8, U(8)) != 0 || !lt) {
        printf("FAIL cublasLtCreate: %s\n", why);
        failures++;
        return;
    }
    const int64_t op_params[] = { CUBLAS_COMPUTE_32F, CUDA_R_32F },
                  layout_params[] = { CUDA_R_32F, 4, 4, 4 };
    const uint32_t ids[] = { CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_MATMUL_DESC_BIAS_POINTER },
                   sizes[] = { 4, 8 };
    const uint64_t vals[] = { CUBLASLT_EPILOGUE_BIAS, elf_addr };
    uint64_t op = lt_make(0, op_params, 2, ids, vals, sizes, 2);
    uint64_t layout = lt_make(1, layout_params, 4, NULL, NULL, NULL, 0);
    if (!op || !layout) {
        printf("FAIL rgpu_lt_materialize: %s\n", why);
        failures++;
        return;
    }
    float one = 1.0f, zero = 0.0f;
    /* The generated call, then with pointers; A, B, D in dev, bias after. */
    struct a args[] = { U(lt), U(op), B(&one, 4), U(dev), U(layout), U(dev + 64), U(layout),
                        B(&zero, 4), U(dev + 128), U(layout), U(dev + 128), U(layout), NIL,
                        U(0), U(0), U(0) };
    const unsigned nargs = sizeof args / sizeof args[0];
    expect("cublasLtMatmul: a bias pointer in the descriptor's content is not set",
           raw_call("cublasLt", "cublasLtMatmul", args, nargs, NULL, 0), CUBLAS_INVALID);

    /* The same with the bias pointer sent along (rgpu_lt_matmul: the
     * generated call's arguments, then one pointer per slot, the bias
     * first). */
    const uint64_t bias[] = { elf_addr, heap_addr, dev + 256 };
    const char *what[] = { "rgpu_lt_matmul with the bias pointer in rgpud's image",
                           "rgpu_lt_matmul with the bias pointer in rgpud's heap",
                           "rgpu_lt_matmul with the bias pointer in owned memory" };
    struct a with[sizeof args / sizeof args[0] + 10];
    memcpy(with, args, sizeof args);
    for (unsigned k = 0; k < 10; k++)
        with[nargs + k] = U(0);
    for (int i = 0; i < 3; i++) {
        with[nargs] = U(bias[i]);
        expect(what[i], raw_call("cublasLt", "rgpu_lt_matmul", with, nargs + 10, NULL, 0),
               i < 2 ? CUBLAS_INVALID : 0);
    }
}

/* Host pointers of the client have no meaning on the server: a structure
 * holding them is not sent, and a pointer to one from the wire is refused.
 * cuCtxCreate_v4's parameters hold two such pointers; given the session's
 * heap, a driver following them would read the session's memory. */
static void host_pointers(void)
{
    uint64_t ctx = 0;
    expect("cuCtxCreate_v4 parameters at a session address",
           CALL("cuda", "cuCtxCreate_v4", &ctx, 8, U(8), U(heap_addr), U(0), U(0)), CU_INVALID);
    if (CALL("cuda", "cuCtxCreate_v4", &ctx, 8, U(8), U(0), U(0), U(0)) != 0 || !ctx)
        printf("FAIL cuCtxCreate_v4 without parameters: %s\n", why), failures++;
    else
        expect("cuCtxCreate_v4 without parameters, destroyed",
               CALL("cuda", "cuCtxDestroy_v2", NULL, 0, U(ctx)), 0);
}

/* Interior pointers of each kind of owned memory are accepted. */
static void accepted(uint64_t dev)
{
    char got[16];
    uint64_t pool = 0, va = 0, mem = 0;
    expect("interior pointer of an allocation",
           CALL("cudart", "rgpu_dtoh", got, 16, U(16), U(16), U(dev + 100), U(0)), 0);
    if (CALL("cudart", "cudaMallocAsync", &pool, 8, U(8), U(1024), U(0)) != 0 || !pool)
        printf("FAIL cudaMallocAsync: %s\n", why), failures++;
    else
        expect("interior pointer of a pool allocation",
               CALL("cudart", "rgpu_dtoh", got, 16, U(16), U(16), U(pool + 512), U(0)), 0);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t gran = 0;
    CALL("cuda", "cuMemGetAllocationGranularity", &gran, 8, U(8), B(&prop, sizeof prop), U(0));
    if (!gran)
        gran = 2u << 20;
    CUmemAccessDesc acc = { prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    if (CALL("cuda", "cuMemAddressReserve", &va, 8, U(8), U(2 * gran), U(0), U(0), U(0)) != 0 ||
        CALL("cuda", "cuMemCreate", &mem, 8, U(8), U(gran), B(&prop, sizeof prop), U(0)) != 0 ||
        CALL("cuda", "cuMemMap", NULL, 0, U(va + gran), U(gran), U(0), U(mem), U(0)) != 0 ||
        CALL("cuda", "cuMemSetAccess", NULL, 0, U(va + gran), U(gran), B(&acc, sizeof acc),
             U(1)) != 0) {
        printf("FAIL VMM setup: %s\n", why);
        failures++;
        return;
    }
    expect("interior pointer of a VMM mapping",
           CALL("cuda", "rgpu_cu_dtoh", got, 16, U(16), U(16), U(va + gran + 64), U(0)), 0);
    expect("cuMemMap outside the reservation",
           CALL("cuda", "cuMemMap", NULL, 0, U(va + gran), U(2 * gran), U(0), U(mem), U(0)),
           CU_INVALID);
}

int main(int argc, char **argv)
{
    uint64_t dev = 0;
    if (argc != 3) {
        fprintf(stderr, "usage: %s RGPUD LIB_DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    count_proc = rgpu_proc_id("cudart", "cudaGetDeviceCount");
    int started = -1;
    for (int attempt = 0; attempt < 3 && started < 0 && !daemon_pid; attempt++)
        started = start_daemon(argv[1], argv[2]);
    if (started < 0 || (sess = open_session()) < 0 || good_call(sess, ++serial_no) < 0) {
        printf("FAIL start: %s\n", why);
        if (daemon_pid)
            stop_daemon();
        return 1;
    }
    /* The probe's session ends soon after its connection: wait until only
     * ours is left, then read its map. */
    pid_t pids[8], pid = 0;
    for (int waited = 0; waited < IO_TIMEOUT_S * 1000; waited += 20) {
        if (session_pids(pids, 8) == 1) {
            pid = pids[0];
            break;
        }
        pause_ms(20);
    }
    if (!pid || find_addresses(pid) < 0) {
        printf("FAIL session addresses (pid %d): %s\n", (int)pid, why);
        stop_daemon();
        return 1;
    }
    printf("ok session %d: ELF image at %#llx, heap end at %#llx\n", (int)pid,
           (unsigned long long)elf_addr, (unsigned long long)heap_addr);
    if (CALL("cudart", "cudaMalloc", &dev, 8, U(8), U(4096)) != 0 || !dev) {
        printf("FAIL cudaMalloc: %s\n", why);
        stop_daemon();
        return 1;
    }
    copies(dev);
    memsets(dev);
    cublas_scalars(dev);
    cudnn_scalars(dev);
    lt_pointers(dev);
    accepted(dev);
    host_pointers();
    close(sess);
    if (stop_daemon() < 0)
        printf("FAIL stop: %s\n", why), failures++;
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
