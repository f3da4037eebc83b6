// Library logs reach the program: cuBLASLt's, cuBLAS's and cuDNN's logger
// callbacks are called in this process with what the library logged, and
// stop when logging is turned off.  With rgpu the libraries run in rgpud,
// so each message must travel back.
//
// With "--env" it makes one cuBLASLt matmul and one cuBLAS gemm and sets no
// logger: the caller sets CUBLASLT_LOG_LEVEL, CUBLASLT_LOG_FILE and
// friends and checks the files (tests/liblog-env.sh).
#include "check.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---- what the callbacks saw ----

static int lt_matmul_api_lines, lt_other_lines;
static int blas_sgemm_lines, blas_lines;
static int dnn_set_tensor_lines, dnn_lines, dnn_bad_udata, dnn_bad_pid;
static int dnn_tag;

static void lt_callback(int level, const char *function, const char *message)
{
    (void)message;
    if (level == 5 && function && strcmp(function, "cublasLtMatmul") == 0)
        lt_matmul_api_lines++;
    else
        lt_other_lines++;
}

static void blas_callback(const char *msg)
{
    blas_lines++;
    if (msg && strstr(msg, "cublasSgemm"))
        blas_sgemm_lines++;
}

static void dnn_callback(cudnnSeverity_t sev, void *udata, const cudnnDebug_t *dbg,
                         const char *msg)
{
    (void)sev;
    dnn_lines++;
    if (msg && strstr(msg, "cudnnSetTensor4dDescriptor"))
        dnn_set_tensor_lines++;
    if (udata != &dnn_tag)
        dnn_bad_udata++;
    if (!dbg || dbg->pid != (unsigned long long)getpid())
        dnn_bad_pid++;
}

// ---- work that logs ----

static float *dA, *dB, *dC;

static void alloc_matrices(void)
{
    float h[16];
    for (int i = 0; i < 16; i++)
        h[i] = (float)(i % 5);
    check_cuda(cudaMalloc(&dA, sizeof h), "cudaMalloc A");
    check_cuda(cudaMalloc(&dB, sizeof h), "cudaMalloc B");
    check_cuda(cudaMalloc(&dC, sizeof h), "cudaMalloc C");
    check_cuda(cudaMemcpy(dA, h, sizeof h, cudaMemcpyHostToDevice), "copy A");
    check_cuda(cudaMemcpy(dB, h, sizeof h, cudaMemcpyHostToDevice), "copy B");
}

// One 4x4 fp32 matmul through cuBLASLt, then a synchronize.
static bool lt_matmul(cublasLtHandle_t lt)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t l = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    float one = 1.0f, zero = 0.0f;
    bool ok = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0 &&
              cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 4, 4) == 0 &&
              cublasLtMatmulPreferenceCreate(&pref) == 0 &&
              cublasLtMatmulAlgoGetHeuristic(lt, op, l, l, l, l, pref, 1, &res, &found) == 0 &&
              found == 1 &&
              cublasLtMatmul(lt, op, &one, dA, l, dB, l, &zero, dC, l, dC, l, &res.algo, NULL, 0,
                             0) == 0 &&
              cudaDeviceSynchronize() == cudaSuccess;
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(op);
    return ok;
}

static bool sgemm(cublasHandle_t h)
{
    float one = 1.0f, zero = 0.0f;
    return cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, dA, 4, dB, 4, &zero, dC, 4) ==
               CUBLAS_STATUS_SUCCESS &&
           cudaDeviceSynchronize() == cudaSuccess;
}

// ---- the checks ----

static void test_cublasLt(void)
{
    cublasLtHandle_t lt = NULL;
    check(cublasLtLoggerSetCallback(lt_callback) == CUBLAS_STATUS_SUCCESS,
          "cublasLtLoggerSetCallback", "failed");
    // cuBLASLt writes its log file besides calling the callback: not on
    // standard output, whose text is compared between runs.
    check(cublasLtLoggerOpenFile("/dev/null") == CUBLAS_STATUS_SUCCESS,
          "cublasLtLoggerOpenFile", "failed");
    check(cublasLtLoggerSetLevel(5) == CUBLAS_STATUS_SUCCESS, "cublasLtLoggerSetLevel 5",
          "failed");
    if (!check(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS, "cublasLtCreate", "failed"))
        return;
    check(lt_matmul(lt), "cuBLASLt matmul with API trace on", "failed");
    check(lt_matmul_api_lines >= 1, "cuBLASLt's API trace of cublasLtMatmul reached the callback",
          "%d lines for cublasLtMatmul, %d others", lt_matmul_api_lines, lt_other_lines);

    check(cublasLtLoggerSetLevel(0) == CUBLAS_STATUS_SUCCESS, "cublasLtLoggerSetLevel 0", "failed");
    int before = lt_matmul_api_lines + lt_other_lines;
    check(lt_matmul(lt), "cuBLASLt matmul with logging off", "failed");
    check(lt_matmul_api_lines + lt_other_lines == before, "no cuBLASLt lines with logging off",
          "%d more", lt_matmul_api_lines + lt_other_lines - before);

    check(cublasLtLoggerForceDisable() == CUBLAS_STATUS_SUCCESS, "cublasLtLoggerForceDisable",
          "failed");
    cublasLtLoggerSetLevel(5);
    before = lt_matmul_api_lines + lt_other_lines;
    check(lt_matmul(lt), "cuBLASLt matmul after cublasLtLoggerForceDisable", "failed");
    check(lt_matmul_api_lines + lt_other_lines == before, "no cuBLASLt lines once disabled",
          "%d more", lt_matmul_api_lines + lt_other_lines - before);
    cublasLtDestroy(lt);
}

static void test_cublas(void)
{
    cublasHandle_t h = NULL;
    cublasLogCallback got = NULL;
    if (!check(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate", "failed"))
        return;
    check(cublasSetLoggerCallback(blas_callback) == CUBLAS_STATUS_SUCCESS &&
          cublasGetLoggerCallback(&got) == CUBLAS_STATUS_SUCCESS && got == blas_callback,
          "cublasSetLoggerCallback, cublasGetLoggerCallback", "another callback");
    check(cublasLoggerConfigure(1, 0, 0, NULL) == CUBLAS_STATUS_SUCCESS,
          "cublasLoggerConfigure on", "failed");
    check(sgemm(h), "cublasSgemm with logging on", "failed");
    check(blas_sgemm_lines >= 1, "cuBLAS's log of cublasSgemm reached the callback",
          "%d lines, none naming cublasSgemm", blas_lines);

    check(cublasLoggerConfigure(0, 0, 0, NULL) == CUBLAS_STATUS_SUCCESS,
          "cublasLoggerConfigure off", "failed");
    int before = blas_lines;
    check(sgemm(h), "cublasSgemm with logging off", "failed");
    check(blas_lines == before, "no cuBLAS lines with logging off", "%d more", blas_lines - before);
    cublasDestroy(h);
}

static void test_cudnn(void)
{
    cudnnTensorDescriptor_t t = NULL;
    unsigned mask = 0;
    void *udata = NULL;
    cudnnCallback_t fn = NULL;
    unsigned all = CUDNN_SEV_ERROR_EN | CUDNN_SEV_WARNING_EN | CUDNN_SEV_INFO_EN;

    check(cudnnSetCallback(all, &dnn_tag, dnn_callback) == CUDNN_STATUS_SUCCESS,
          "cudnnSetCallback", "failed");
    check(cudnnGetCallback(&mask, &udata, &fn) == CUDNN_STATUS_SUCCESS && mask == all &&
          udata == &dnn_tag && fn == dnn_callback, "cudnnGetCallback gives back what was set",
          "mask 0x%x", mask);
    if (!check(cudnnCreateTensorDescriptor(&t) == CUDNN_STATUS_SUCCESS,
               "cudnnCreateTensorDescriptor", "failed"))
        return;
    check(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 2, 3, 4) ==
          CUDNN_STATUS_SUCCESS, "cudnnSetTensor4dDescriptor", "failed");
    check(dnn_set_tensor_lines >= 1, "cuDNN's log of cudnnSetTensor4dDescriptor reached the callback",
          "%d lines, none naming it", dnn_lines);
    check(dnn_lines > 0 && dnn_bad_udata == 0, "cuDNN's callback gets the program's udata",
          "%d of %d lines with another", dnn_bad_udata, dnn_lines);
    check(dnn_lines > 0 && dnn_bad_pid == 0, "cuDNN's debug structure names this process",
          "%d of %d lines with another pid", dnn_bad_pid, dnn_lines);

    check(cudnnSetCallback(0, NULL, NULL) == CUDNN_STATUS_SUCCESS, "cudnnSetCallback off",
          "failed");
    int before = dnn_lines;
    cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, 1);
    check(dnn_lines == before, "no cuDNN lines with the mask cleared", "%d more",
          dnn_lines - before);

    // The last error message is kept per thread where cuDNN runs.
    char message[512] = "";
    check(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 0, 1, 1, 1) ==
          CUDNN_STATUS_BAD_PARAM, "cudnnSetTensor4dDescriptor with n = 0 -> BAD_PARAM", "accepted");
    cudnnGetLastErrorString(message, sizeof message);
    check(message[0] != '\0', "cudnnGetLastErrorString names the last error", "empty");
    cudnnDestroyTensorDescriptor(t);
}

// --env: work only; the environment chose where the logs go.
static int env_mode(void)
{
    cublasLtHandle_t lt = NULL;
    cublasHandle_t h = NULL;
    alloc_matrices();
    check(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS && lt_matmul(lt), "cuBLASLt matmul",
          "failed");
    check(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS && sgemm(h), "cublasSgemm", "failed");
    cublasLtDestroy(lt);
    cublasDestroy(h);
    return check_exit_status();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--env") == 0)
        return env_mode();
    alloc_matrices();
    test_cublasLt();
    test_cublas();
    test_cudnn();
    return check_exit_status();
}
