/* The texts the server's libraries give for their status codes
 * (rgpu_error_string of rgpu's own library, codegen/rgpu_own.h; client
 * side common/rgpu_client.c): what cudaGetErrorString and its kin answer,
 * which the headers do not hold. */
#include "rgpud.h"
#include "rgpu_serve.h"

#include <cuda.h>
#include <stdio.h>
#include <string.h>

/* The error-text function of a library, as one signature; NULL without. */
static const char *error_text(const char *lib, int code)
{
    if (strcmp(lib, "cuda") == 0) {
        CUresult (*fn)(CUresult, const char **) =
            (CUresult (*)(CUresult, const char **))backend_sym("cuda", "cuGetErrorString");
        const char *s = NULL;
        return fn && fn((CUresult)code, &s) == 0 ? s : NULL;
    }
    static const struct { const char *lib, *fn; } table[] = {
        { "cudart", "cudaGetErrorString" },
        { "cublas", "cublasGetStatusString" },
        { "cublasLt", "cublasLtGetStatusString" },
        { "cudnn", "cudnnGetErrorString" },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(lib, table[i].lib) == 0) {
            const char *(*fn)(int) = (const char *(*)(int))backend_sym(lib, table[i].fn);
            return fn ? fn(code) : NULL;
        }
    }
    return NULL;
}

/* A code whose text is the library's text for an unknown code has none:
 * the client then answers from the header's description. */
rgpu_status serve_rgpu_error_string(const char *lib, int code, char *text, size_t max_size)
{
    if (!lib || !text || !max_size)
        return RGPU_STATUS_INVALID;
    const char *s = error_text(lib, code), *unknown = error_text(lib, 0x7fffffff);
    if (!s || (unknown && strcmp(s, unknown) == 0))
        return RGPU_STATUS_NOT_FOUND;
    snprintf(text, max_size, "%s", s);
    return RGPU_STATUS_OK;
}
