/* rgpu's own procedures of libcublasLt (codegen/cublasLt.ann,
 * "procedures"): requests of the wire that are no cuBLASLt function,
 * declared as C functions so that the one codec marshals them (see
 * codegen/cudart_own.h for the conventions). */
#ifndef RGPU_CUBLASLT_OWN_H
#define RGPU_CUBLASLT_OWN_H

#include <cublasLt.h>

/* The client's cuBLASLt log mask (cublasLtLoggerSetMask and its kin):
 * rgpud's callback sends the messages of that mask to the client
 * (stubs/cublasLt_logger.c through common/rgpu_liblog.c; daemon/liblog.c). */
cublasStatus_t rgpu_cublasLt_log_settings(int mask);

#endif
