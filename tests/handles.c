/* bad-handles: rgpud refuses library handles the session never handed out.
 *
 *   badhandles RGPUD LIB_DIR
 *
 * A library handle (stream, event, cuBLAS or cuDNN handle, descriptor,
 * module, function) is a pointer the real library follows, so a client
 * naming one it was never given could steer the session.  Through the raw
 * protocol, this sends forged, destroyed and other sessions' handles to
 * generated and hand-written procedures and checks, for each, that the
 * call answers the library's own bad-handle status, that rgpud itself
 * refused it (its log says so: the fake backend would often have refused
 * too, or, worse, accepted), and that the session keeps serving.
 *
 * The raw calls and the daemon's log are rawcall.c's. */
#include "rawcall.c"
#include "rgpu_module_wire.h"

#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#define FORGED 0x7f00deadbe00ull    /* no library handed this out */

/* ---- the cases ------------------------------------------------------------- */

/* Handles the well-behaved part of session A made. */
static struct {
    uint64_t blas, dnn, tensor, stream, dead_stream, dev, other_stream;
} H;

struct handle_case {
    const char *name;
    const char *lib, *proc, *fmt;
    uint64_t a0, a1;
    uint64_t *a0_from;      /* a handle made earlier, instead of a0 */
    uint64_t *a1_from;
    uint64_t want;          /* the library's status */
};

static const struct handle_case hcases[] = {
    /* Generated procedures, one handle class each. */
    { "forged-stream", "cudart", "cudaStreamSynchronize", "u", FORGED, 0, NULL, NULL,
      cudaErrorInvalidResourceHandle },
    { "forged-event", "cudart", "cudaEventSynchronize", "u", FORGED, 0, NULL, NULL,
      cudaErrorInvalidResourceHandle },
    { "forged-event-record", "cudart", "cudaEventRecord", "uu", FORGED, 0, NULL, NULL,
      cudaErrorInvalidResourceHandle },
    { "forged-cublas-handle", "cublas", "cublasSetStream_v2", "uu", FORGED, 0, NULL, NULL,
      CUBLAS_STATUS_NOT_INITIALIZED },
    { "forged-stream-to-cublas", "cublas", "cublasSetStream_v2", "uu", 0, FORGED, &H.blas, NULL,
      CUBLAS_STATUS_NOT_INITIALIZED },
    { "forged-cudnn-handle", "cudnn", "cudnnSetStream", "uu", FORGED, 0, NULL, NULL,
      CUDNN_STATUS_BAD_PARAM },
    { "forged-cudnn-descriptor", "cudnn", "cudnnDestroyTensorDescriptor", "u", FORGED, 0, NULL,
      NULL, CUDNN_STATUS_BAD_PARAM },
    { "descriptor-as-handle", "cudnn", "cudnnSetStream", "uu", 0, 0, &H.tensor, NULL,
      CUDNN_STATUS_BAD_PARAM },
    { "destroyed-stream", "cudnn", "cudnnSetStream", "uu", 0, 0, &H.dnn, &H.dead_stream,
      CUDNN_STATUS_BAD_PARAM },
    { "other-sessions-stream", "cublas", "cublasSetStream_v2", "uu", 0, 0, &H.blas,
      &H.other_stream, CUBLAS_STATUS_NOT_INITIALIZED },
    { "forged-context", "cuda", "cuCtxSetCurrent", "u", FORGED, 0, NULL, NULL,
      CUDA_ERROR_INVALID_CONTEXT },
    { "forged-module", "cuda", "cuModuleGetFunction", "ous", 0, FORGED, NULL, NULL,
      CUDA_ERROR_INVALID_HANDLE },
    { "forged-function", "cuda", "cuFuncGetAttribute", "iuu", 0, 0, NULL, NULL,
      CUDA_ERROR_INVALID_HANDLE },
};

static int run_handle_case(int fd, const struct handle_case *c)
{
    uint64_t api, a0 = c->a0_from ? *c->a0_from : c->a0, a1 = c->a1_from ? *c->a1_from : c->a1;
    int before = refusals(), rc;

    if (strcmp(c->fmt, "ous") == 0)         /* cuModuleGetFunction(&f, module, name) */
        rc = callf(fd, c->lib, c->proc, &api, NULL, c->fmt, a1, "kernel");
    else if (strcmp(c->fmt, "iuu") == 0)    /* cuFuncGetAttribute(&v, attr, function) */
        rc = callf(fd, c->lib, c->proc, &api, NULL, c->fmt, (uint64_t)0, FORGED);
    else if (strlen(c->fmt) == 1)
        rc = callf(fd, c->lib, c->proc, &api, NULL, c->fmt, a0);
    else
        rc = callf(fd, c->lib, c->proc, &api, NULL, c->fmt, a0, a1);
    if (rc < 0)
        return -1;
    if (api != c->want)
        return fail("status %llu, wanted %llu", (unsigned long long)api,
                    (unsigned long long)c->want);
    if (refusals() <= before)
        return fail("rgpud did not refuse it: the library saw the handle");
    return 0;
}

/* Hand-written procedures: a copy and two launches with a forged stream or
 * function. */
static int run_hand_cases(int fd, int *failures)
{
    static const char bytes[16];
    uint64_t api;
    struct {
        const char *name;
        int rc;
        uint64_t want;
    } r[3];
    int before = refusals();

    r[0].name = "hand-htod-forged-stream";
    r[0].want = cudaErrorInvalidResourceHandle;
    r[0].rc = callf(fd, "cudart", "rgpu_htod", &api, NULL, "uuub", H.dev, FORGED,
                    (uint64_t)sizeof bytes, bytes, sizeof bytes);
    r[0].rc = r[0].rc < 0 ? -1 : api == r[0].want ? 0 : fail("status %llu", (unsigned long long)api);
    r[1].name = "hand-cu-launch-forged-function";
    r[1].want = CUDA_ERROR_INVALID_HANDLE;
    r[1].rc = callf(fd, "cuda", "rgpu_cu_launch", &api, NULL, "uuuuuuuuuuub", FORGED,
                    (uint64_t)1, (uint64_t)1, (uint64_t)1, (uint64_t)1, (uint64_t)1, (uint64_t)1,
                    (uint64_t)0, (uint64_t)0, (uint64_t)1, (uint64_t)sizeof bytes, bytes,
                    sizeof bytes);
    r[1].rc = r[1].rc < 0 ? -1 : api == r[1].want ? 0 : fail("status %llu", (unsigned long long)api);
    r[2].name = "hand-cu-launch-forged-stream";
    r[2].want = CUDA_ERROR_INVALID_HANDLE;
    r[2].rc = callf(fd, "cuda", "rgpu_cu_launch", &api, NULL, "uuuuuuuuuuub", (uint64_t)0,
                    (uint64_t)1, (uint64_t)1, (uint64_t)1, (uint64_t)1, (uint64_t)1, (uint64_t)1,
                    (uint64_t)0, FORGED, (uint64_t)1, (uint64_t)sizeof bytes, bytes,
                    sizeof bytes);
    r[2].rc = r[2].rc < 0 ? -1 : api == r[2].want ? 0 : fail("status %llu", (unsigned long long)api);
    if (refusals() < before + 3)
        for (int i = 0; i < 3; i++)
            if (r[i].rc == 0)
                r[i].rc = fail("rgpud logged %d refusals for 3 forged handles",
                               refusals() - before);
    for (int i = 0; i < 3; i++) {
        if (r[i].rc == 0 && good_call(fd, ++serial_no) < 0)
            r[i].rc = fail_prefix("session after it");
        printf("%s %s%s%s\n", r[i].rc ? "FAIL" : "ok", r[i].name, r[i].rc ? ": " : "",
               r[i].rc ? why : "");
        *failures += r[i].rc != 0;
    }
    return 0;
}

/* A launch with attributes naming a forged event: lib's launch procedure
 * (rgpu_cu_launch_ex or rgpu_launch_ex) with one launch completion event
 * attribute; the function and stream are NULL, so only the event can be
 * refused first. */
static int launch_ex_forged_event(int fd, const char *lib, uint64_t *api)
{
    static const unsigned dims[3] = { 1, 1, 1 };
    struct rgpu_launch_attr attr = { CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT, 0,
                                     { FORGED, 0, 0, 0, 0 } };
    if (strcmp(lib, "cuda") == 0)
        return callf(fd, lib, "rgpu_cu_launch_ex", api, NULL, "uuuuuuuuuubuub", (uint64_t)0,
                     (uint64_t)1, (uint64_t)1, (uint64_t)1, (uint64_t)1, (uint64_t)1,
                     (uint64_t)1, (uint64_t)0, (uint64_t)0, (uint64_t)0, &attr, sizeof attr,
                     (uint64_t)1, (uint64_t)0, "", (size_t)0);
    return callf(fd, lib, "rgpu_launch_ex", api, NULL, "ubbuubuub", (uint64_t)0, dims,
                 sizeof dims, dims, sizeof dims, (uint64_t)0, (uint64_t)0, &attr, sizeof attr,
                 (uint64_t)1, (uint64_t)0, "", (size_t)0);
}

/* The procedures of launch attributes, names and functions by symbol:
 * forged events, functions and kernels. */
static int run_launch_cases(int fd, int *failures)
{
    static const struct {
        const char *name, *lib;
        int kind;               /* 0: launch with an event; 1: a name; 2: func_by_symbol */
        uint64_t arg, want;
    } cases[] = {
        { "cu-launch-ex-forged-event", "cuda", 0, 0, CUDA_ERROR_INVALID_HANDLE },
        { "launch-ex-forged-event", "cudart", 0, 0, cudaErrorInvalidResourceHandle },
        { "cu-name-forged-function", "cuda", 1, 0, CUDA_ERROR_INVALID_HANDLE },
        { "cu-name-forged-kernel", "cuda", 1, 1, CUDA_ERROR_INVALID_HANDLE },
        { "func-by-symbol-forged-kernel", "cudart", 2, 0, cudaErrorInvalidDeviceFunction },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t api = 0;
        int before = refusals(), rc;
        if (cases[i].kind == 0)
            rc = launch_ex_forged_event(fd, cases[i].lib, &api);
        else if (cases[i].kind == 1)
            rc = callf(fd, "cuda", cases[i].arg ? "rgpu_cu_kernel_name" : "rgpu_cu_func_name",
                       &api, NULL, "uuu", (uint64_t)64, (uint64_t)64, FORGED);
        else
            rc = callf(fd, "cudart", "rgpu_func_by_symbol", &api, NULL, "ou", FORGED);
        if (rc == 0 && api != cases[i].want)
            rc = fail("status %llu, wanted %llu", (unsigned long long)api,
                      (unsigned long long)cases[i].want);
        /* Names and functions are looked up in the session's tables, which
         * say nothing in the log; the events are refused with a word. */
        if (rc == 0 && cases[i].kind == 0 && refusals() <= before)
            rc = fail("rgpud did not refuse it: the library saw the handle");
        if (rc == 0 && good_call(fd, ++serial_no) < 0)
            rc = fail_prefix("session after it");
        printf("%s %s%s%s\n", rc ? "FAIL" : "ok", cases[i].name, rc ? ": " : "", rc ? why : "");
        *failures += rc != 0;
    }
    return 0;
}

/* rgpu's own procedures asked for no output (a length of 0 where the stub
 * sends the buffer's): the server function gets NULL whatever the length
 * parameter says, and must answer the library's status, not write there. */
static int run_no_output_cases(int fd, int *failures)
{
    static const struct {
        const char *name, *lib, *proc, *fmt;
        uint64_t a0, a1, want;
    } cases[] = {
        { "cudnn-versions-no-outputs", "cudnn", "rgpu_cudnn_versions", "uu", 0, 0,
          CUDNN_STATUS_BAD_PARAM },
        { "cudnn-last-error-no-buffer", "cudnn", "rgpu_cudnn_last_error", "uu", 0, 256,
          CUDNN_STATUS_SUCCESS },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t api = 0;
        int rc = callf(fd, cases[i].lib, cases[i].proc, &api, NULL, cases[i].fmt, cases[i].a0,
                       cases[i].a1);
        if (rc == 0 && api != cases[i].want)
            rc = fail("status %llu, wanted %llu", (unsigned long long)api,
                      (unsigned long long)cases[i].want);
        if (rc == 0 && good_call(fd, ++serial_no) < 0)
            rc = fail_prefix("session after it");
        printf("%s %s%s%s\n", rc ? "FAIL" : "ok", cases[i].name, rc ? ": " : "", rc ? why : "");
        *failures += rc != 0;
    }
    return 0;
}

/* The capture queries (rgpu_capture_info, rgpu_cu_capture_info) asked for
 * no output at all, their required status included, while max_deps names
 * room for 16 dependencies: the library's invalid-value status. */
static int run_capture_info_cases(int fd, int *failures)
{
    static const struct {
        const char *name, *lib, *proc;
        uint64_t want;
    } cases[] = {
        { "capture-info-no-outputs", "cudart", "rgpu_capture_info", cudaErrorInvalidValue },
        { "cu-capture-info-no-outputs", "cuda", "rgpu_cu_capture_info",
          CUDA_ERROR_INVALID_VALUE },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t api = 0, z = 0;
        /* stream, per_thread, status, id, graph, deps, edges, max_deps, count */
        int rc = callf(fd, cases[i].lib, cases[i].proc, &api, NULL, "uuuuuuuuu", z, z, z, z, z,
                       z, z, (uint64_t)16, z);
        if (rc == 0 && api != cases[i].want)
            rc = fail("status %llu, wanted %llu", (unsigned long long)api,
                      (unsigned long long)cases[i].want);
        if (rc == 0 && good_call(fd, ++serial_no) < 0)
            rc = fail_prefix("session after it");
        printf("%s %s%s%s\n", rc ? "FAIL" : "ok", cases[i].name, rc ? ": " : "", rc ? why : "");
        *failures += rc != 0;
    }
    return 0;
}

/* What the well-behaved calls must still do: legitimate handles, the
 * default streams, and a stream made through the handle it came from. */
static int setup(int a)
{
    uint64_t api;
    int b = open_session();
    if (b < 0)
        return fail_prefix("session B");
    /* Session B's stream: a real handle, but not session A's.  The fake
     * backend numbers its handles, so B makes more streams than A will
     * and passes on its last. */
    int rc = 0;
    for (int i = 0; i < 8 && rc == 0; i++)
        rc = must(b, "cudart", "cudaStreamCreate", &H.other_stream, "o", 0, 0);
    close(b);
    if (rc < 0)
        return fail_prefix("session B");
    if (must(a, "cuda", "cuInit", NULL, "u", 0, 0) < 0 ||
        must(a, "cudart", "cudaMalloc", &H.dev, "ou", 64, 0) < 0 ||
        must(a, "cublas", "cublasCreate_v2", &H.blas, "o", 0, 0) < 0 ||
        must(a, "cudnn", "cudnnCreate", &H.dnn, "o", 0, 0) < 0 ||
        must(a, "cudnn", "cudnnCreateTensorDescriptor", &H.tensor, "o", 0, 0) < 0 ||
        must(a, "cudart", "cudaStreamCreate", &H.stream, "o", 0, 0) < 0 ||
        must(a, "cudart", "cudaStreamCreate", &H.dead_stream, "o", 0, 0) < 0 ||
        must(a, "cudart", "cudaStreamDestroy", NULL, "u", H.dead_stream, 0) < 0)
        return -1;
    /* Allowed: the handles made, NULL and the special streams. */
    uint64_t ok_streams[] = { H.stream, 0, 1, 2 };
    for (size_t i = 0; i < sizeof ok_streams / sizeof ok_streams[0]; i++)
        if (must(a, "cublas", "cublasSetStream_v2", NULL, "uu", H.blas, ok_streams[i]) < 0 ||
            must(a, "cudnn", "cudnnSetStream", NULL, "uu", H.dnn, ok_streams[i]) < 0 ||
            must(a, "cudart", "cudaStreamSynchronize", NULL, "u", ok_streams[i], 0) < 0)
            return fail_prefix("a legitimate stream");
    if (callf(a, "cudnn", "cudnnSetTensor4dDescriptor", &api, NULL, "uuuuuuu", H.tensor,
              (uint64_t)CUDNN_TENSOR_NCHW, (uint64_t)CUDNN_DATA_FLOAT, (uint64_t)1, (uint64_t)1,
              (uint64_t)2, (uint64_t)2) < 0 || api != 0)
        return fail("cudnnSetTensor4dDescriptor on a real descriptor: %llu",
                    (unsigned long long)api);
    return 0;
}

int main(int argc, char **argv)
{
    int failures = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: %s RGPUD LIB_DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    count_proc = rgpu_proc_id("cudart", "cudaGetDeviceCount");
    if (start_logged(argv[1], argv[2]) < 0) {
        printf("FAIL start: %s\n", why);
        if (daemon_pid)
            stop_daemon();
        unlink(log_path);
        return 1;
    }
    int a = open_session();
    if (a < 0 || setup(a) < 0) {
        printf("FAIL setup: %s\n", why);
        stop_daemon();
        unlink(log_path);
        return 1;
    }
    printf("ok legitimate handles accepted\n");
    for (size_t i = 0; i < sizeof hcases / sizeof hcases[0]; i++) {
        const struct handle_case *c = &hcases[i];
        if (run_handle_case(a, c) < 0 || good_call(a, ++serial_no) < 0) {
            printf("FAIL %s (%s): %s\n", c->name, c->proc, why);
            failures++;
        } else {
            printf("ok %s (%s)\n", c->name, c->proc);
        }
    }
    run_hand_cases(a, &failures);
    run_launch_cases(a, &failures);
    run_no_output_cases(a, &failures);
    run_capture_info_cases(a, &failures);
    /* cuDNN backend descriptors are named by the client
     * (daemon/cudnn_backend.c): a forged name inside an attribute array, a
     * forged cuDNN handle inside one, a name the session never made, and
     * one made twice. */
    uint64_t api = 0, forged = FORGED, name = 0x5000;
    int before = refusals();
    if (callf(a, "cudnn", "rgpu_cudnn_backend_create", &api, NULL, "uuu", name,
              (uint64_t)CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, (uint64_t)0) < 0 ||
        (api != 0 && fail("create: status %llu", (unsigned long long)api)) ||
        callf(a, "cudnn", "rgpu_cudnn_backend_set", &api, NULL, "uuuubuu", name,
              (uint64_t)CUDNN_ATTR_OPERATIONGRAPH_OPS, (uint64_t)CUDNN_TYPE_BACKEND_DESCRIPTOR,
              (uint64_t)1, &forged, sizeof forged, (uint64_t)sizeof forged, (uint64_t)0) < 0 ||
        (api != CUDNN_STATUS_BAD_PARAM && fail("status %llu", (unsigned long long)api)) ||
        (refusals() <= before && fail("rgpud did not refuse it")) ||
        good_call(a, ++serial_no) < 0) {
        printf("FAIL forged-backend-descriptor-in-array: %s\n", why);
        failures++;
    } else {
        printf("ok forged-backend-descriptor-in-array (rgpu_cudnn_backend_set)\n");
    }
    before = refusals();
    if (callf(a, "cudnn", "rgpu_cudnn_backend_set", &api, NULL, "uuuubuu", name,
              (uint64_t)CUDNN_ATTR_OPERATIONGRAPH_HANDLE, (uint64_t)CUDNN_TYPE_HANDLE,
              (uint64_t)1, &forged, sizeof forged, (uint64_t)sizeof forged, (uint64_t)0) < 0 ||
        (api != CUDNN_STATUS_BAD_PARAM && fail("status %llu", (unsigned long long)api)) ||
        (refusals() <= before && fail("rgpud did not refuse it")) ||
        good_call(a, ++serial_no) < 0) {
        printf("FAIL forged-cudnn-handle-in-backend-array: %s\n", why);
        failures++;
    } else {
        printf("ok forged-cudnn-handle-in-backend-array (rgpu_cudnn_backend_set)\n");
    }
    before = refusals();
    if (callf(a, "cudnn", "rgpu_cudnn_backend_finalize", &api, NULL, "uuuouu", FORGED,
              (uint64_t)0, (uint64_t)0, (uint64_t)0, (uint64_t)0) < 0 ||
        (api != CUDNN_STATUS_BAD_PARAM && fail("status %llu", (unsigned long long)api)) ||
        (refusals() <= before && fail("rgpud did not refuse it")) ||
        callf(a, "cudnn", "rgpu_cudnn_backend_create", &api, NULL, "uuu", name,
              (uint64_t)CUDNN_BACKEND_TENSOR_DESCRIPTOR, (uint64_t)0) < 0 ||
        (api != CUDNN_STATUS_BAD_PARAM && fail("made twice: status %llu", (unsigned long long)api)) ||
        good_call(a, ++serial_no) < 0) {
        printf("FAIL backend-descriptor-names: %s\n", why);
        failures++;
    } else {
        printf("ok backend-descriptor-names (never made, made twice)\n");
    }
    /* CUDA arrays and texture objects (daemon/hand_arrays.c): a forged
     * array to the runtime's and the driver's array copies, a forged
     * texture object to its destroy. */
    static const char rows[16];
    uint64_t api_rt = 0, api_cu = 0, api_tex = 0;
    before = refusals();
    if (callf(a, "cudart", "rgpu_array_from_host", &api_rt, NULL, "uuuuuubu", FORGED,
              (uint64_t)0, (uint64_t)0, (uint64_t)16, (uint64_t)1, (uint64_t)0, rows,
              sizeof rows, (uint64_t)sizeof rows) < 0 ||
        callf(a, "cuda", "rgpu_cu_array_to_host", &api_cu, NULL, "uuuuuuuuu", FORGED,
              (uint64_t)0, (uint64_t)0, (uint64_t)0, (uint64_t)16, (uint64_t)1, (uint64_t)0,
              (uint64_t)sizeof rows, (uint64_t)sizeof rows) < 0 ||
        callf(a, "cudart", "cudaDestroyTextureObject", &api_tex, NULL, "u", FORGED) < 0 ||
        (api_rt != cudaErrorInvalidResourceHandle && fail("array copy: status %llu",
                                                          (unsigned long long)api_rt)) ||
        (api_cu != CUDA_ERROR_INVALID_HANDLE && fail("driver array copy: status %llu",
                                                     (unsigned long long)api_cu)) ||
        (api_tex != cudaErrorInvalidValue && fail("texture destroy: status %llu",
                                                  (unsigned long long)api_tex)) ||
        (refusals() < before + 3 && fail("rgpud logged %d refusals for 3 forged handles",
                                         refusals() - before)) ||
        good_call(a, ++serial_no) < 0) {
        printf("FAIL forged-array-and-texture: %s\n", why);
        failures++;
    } else {
        printf("ok forged-array-and-texture (rgpu_array_from_host, rgpu_cu_array_to_host, "
               "cudaDestroyTextureObject)\n");
    }
    /* The handles made earlier still work after all the refusals. */
    if (must(a, "cublas", "cublasSetStream_v2", NULL, "uu", H.blas, H.stream) < 0 ||
        must(a, "cudart", "cudaStreamDestroy", NULL, "u", H.stream, 0) < 0) {
        printf("FAIL still-serving: %s\n", why);
        failures++;
    } else {
        printf("ok still-serving\n");
    }
    return raw_finish(a, failures);
}
