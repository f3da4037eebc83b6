/* A procedure of the newer release and the function of an older major's
 * library that takes the same bytes (rgpu-gen --compat writes the tables:
 * build/stubs/cuda12/<lib>12_names.c).  Read by backend.c. */
#ifndef RGPU_OLDER_NAMES_H
#define RGPU_OLDER_NAMES_H

struct rgpu_older_name {
    const char *name;           /* the newer release's: cudaStreamGetCaptureInfo */
    const char *older;          /* the older library's: cudaStreamGetCaptureInfo_v3 */
};

extern const struct rgpu_older_name rgpu_cudart12_names[], rgpu_cublas12_names[],
    rgpu_cublasLt12_names[];
extern const unsigned rgpu_cudart12_nnames, rgpu_cublas12_nnames, rgpu_cublasLt12_nnames;

#endif
