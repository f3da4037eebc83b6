// The driver's potential block size, as programs that size their launches
// with it ask: cuOccupancyMaxPotentialBlockSize with a constant dynamic
// shared memory, with a callback that gives each block size its own (the
// program's function, which through rgpu runs on the client), with a block
// size limit, and the WithFlags form.  Each answer must be a block size of
// the most resident threads per multiprocessor, as the driver's own
// occupancy query (cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
// counts them for every size a launch could use, and its grid the blocks
// of that occupancy on every multiprocessor; then a launch of that shape
// runs.
#include <cuda.h>
#include "check.h"
#include "kernels.cuh"

// Shared memory a block of a given size needs: 16 bytes a thread.
static size_t CUDA_CB smem_of_block(int block_size)
{
    return (size_t)block_size * 16;
}

static size_t CUDA_CB no_smem(int block_size)
{
    (void)block_size;
    return 0;
}

struct query {
    const char *name;
    CUoccupancyB2DSize smem_of;
    size_t dynamic_smem;
    int limit;
    unsigned flags;
};

// Resident threads per multiprocessor at a block size (0 on a failure).
static long long resident_threads(CUfunction f, const struct query *q, int size)
{
    int blocks = 0;
    size_t smem = q->smem_of ? q->smem_of(size) : q->dynamic_smem;
    if (cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, f, size, smem, q->flags) !=
        CUDA_SUCCESS)
        return 0;
    return (long long)blocks * size;
}

static void check_query(CUfunction f, const struct query *q, int sms, int max_threads)
{
    char name[160];
    int grid = 0, block = 0;
    CUresult r = q->flags ? cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, f, q->smem_of,
                                                                      q->dynamic_smem, q->limit,
                                                                      q->flags)
                          : cuOccupancyMaxPotentialBlockSize(&grid, &block, f, q->smem_of,
                                                             q->dynamic_smem, q->limit);
    if (!check_cu(r, fmt_name(name, sizeof name, "%s", q->name)))
        return;
    int most = q->limit > 0 && q->limit < max_threads ? q->limit : max_threads;
    check(block > 0 && block <= most, fmt_name(name, sizeof name, "%s: a block size in range",
                                               q->name),
          "%d of at most %d", block, most);
    long long best = resident_threads(f, q, block);
    int beaten_by = 0;
    for (int size = 32; size <= most && !beaten_by; size += 32)
        if (resident_threads(f, q, size) > best)
            beaten_by = size;
    check(best > 0 && !beaten_by,
          fmt_name(name, sizeof name, "%s: no block size keeps more threads resident", q->name),
          "%d keeps %lld, %d more", block, best, beaten_by);
    int blocks = 0;
    size_t smem = q->smem_of ? q->smem_of(block) : q->dynamic_smem;
    cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, f, block, smem, q->flags);
    check(grid == blocks * sms,
          fmt_name(name, sizeof name, "%s: the grid fills every multiprocessor", q->name),
          "grid %d, %d blocks on each of %d", grid, blocks, sms);

    // Launched in that shape: every element once.
    int n = grid * block, *d = NULL;
    static int h[1 << 20];
    if (n <= 0 || n > (int)(sizeof h / sizeof h[0]) ||
        cudaMalloc((void **)&d, n * sizeof(int)) != cudaSuccess)
        return;
    cudaMemset(d, 0, n * sizeof(int));
    k_inc<<<grid, block>>>(d, n);
    cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost);
    int i = 0;
    while (i < n && h[i] == 1)
        i++;
    check(i == n, fmt_name(name, sizeof name, "%s: a launch of that shape", q->name),
          "element %d is %d", i, i < n ? h[i] : 0);
    cudaFree(d);
}

int main(void)
{
    CUfunction f = NULL;
    int sms = 0, max_threads = 0;
    if (!check_cuda(cudaGetFuncBySymbol((cudaFunction_t *)&f, (const void *)k_inc),
                    "cudaGetFuncBySymbol") ||
        !check_cu(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
                  "cuFuncGetAttribute max threads") ||
        !check_cu(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0),
                  "cuDeviceGetAttribute multiprocessors"))
        return check_exit_status();
    const struct query queries[] = {
        { "no dynamic shared memory", NULL, 0, 0, 0 },
        { "constant dynamic shared memory", NULL, 8192, 0, 0 },
        { "a callback per block size", smem_of_block, 0, 0, 0 },
        { "a callback and a block size limit", smem_of_block, 0, 200, 0 },
        { "a callback giving none", no_smem, 0, 96, 0 },
        { "WithFlags, caching override off", smem_of_block, 0, 0,
          CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE },
    };
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++)
        check_query(f, &queries[i], sms, max_threads);

    // The same question twice, the same answer.
    int g1 = 0, b1 = 0, g2 = 0, b2 = 0;
    cuOccupancyMaxPotentialBlockSize(&g1, &b1, f, smem_of_block, 0, 0);
    cuOccupancyMaxPotentialBlockSize(&g2, &b2, f, smem_of_block, 0, 0);
    check(g1 == g2 && b1 == b2, "asked twice, the same answer", "%d/%d against %d/%d", g1, b1,
          g2, b2);
    return check_exit_status();
}
