// A module with one initialised global, for tests/images.c: compiled to a
// cubin whose headers the test then falsifies.  The initialiser is the
// bytes 1..64, so that a global read back from anywhere else shows.
#define B8(n) n + 1, n + 2, n + 3, n + 4, n + 5, n + 6, n + 7, n + 8
__device__ unsigned char rgpu_image_global[64] = {
    B8(0), B8(8), B8(16), B8(24), B8(32), B8(40), B8(48), B8(56),
};

__global__ void rgpu_image_kernel(unsigned char *out)
{
    out[threadIdx.x] = rgpu_image_global[threadIdx.x];
}
