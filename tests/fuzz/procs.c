/* The procedure tables of every library, as the session serves them (daemon/session.c keeps its own copy, static). */
#include "procs.h"

#include "cudart_procs.h"
#include "cuda_procs.h"
#include "cublas_procs.h"
#include "cublasLt_procs.h"
#include "cudnn_procs.h"
#include "nvml_procs.h"
#include "rgpu_procs.h"
#include "rgpu_proto.h"

const struct fuzz_gen fuzz_gen[FUZZ_NGEN] = {
    { &rgpu_cudart_lib, rgpu_cudart_server_procs },
    { &rgpu_cuda_lib, rgpu_cuda_server_procs },
    { &rgpu_cublas_lib, rgpu_cublas_server_procs },
    { &rgpu_cublasLt_lib, rgpu_cublasLt_server_procs },
    { &rgpu_cudnn_lib, rgpu_cudnn_server_procs },
    { &rgpu_nvml_lib, rgpu_nvml_server_procs },
    { &rgpu_rgpu_lib, rgpu_rgpu_server_procs },
};

const struct rgpu_proc *fuzz_pick_generated(unsigned sel, unsigned index, unsigned *lib)
{
    *lib = sel % FUZZ_NGEN;
    const struct rgpu_lib *l = fuzz_gen[*lib].lib;
    return &l->procs[index % l->nprocs];
}

int fuzz_locate(uint32_t id, unsigned *sel, unsigned *index)
{
    for (unsigned i = 0; i < FUZZ_NGEN; i++) {
        const struct rgpu_proc *p = rgpu_lib_find(fuzz_gen[i].lib, id);
        if (p) {
            *sel = i;
            *index = (unsigned)(p - fuzz_gen[i].lib->procs);
            return 0;
        }
    }
    return -1;
}
