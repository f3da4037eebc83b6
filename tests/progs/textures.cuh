// A kernel that fetches through a texture object, for textures.cu.
//
// Not in kernels.cuh, so that other programs' modules stay as they are.
// The fake GPU backend carries its CPU twin (tests/fakegpu/kernels.c).
#pragma once
#include <cuda_runtime.h>

// out[y][x] = 2 * tex2D(tex, x + dx + 0.5, y + 0.5): the texel centres,
// shifted dx texels (unnormalized coordinates; a shift past the edge shows
// the texture's addressing mode).
__global__ void k_tex_fetch(cudaTextureObject_t tex, float *out, int w, int h, int dx)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h)
        out[y * w + x] = 2.0f * tex2D<float>(tex, x + dx + 0.5f, y + 0.5f);
}

// surf2Dwrite(100 * y + x + 0.5, surf, x * 4, y) over a w x h float array
// made for surface load/store.
__global__ void k_surf_write(cudaSurfaceObject_t surf, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h)
        surf2Dwrite(100 * y + x + 0.5f, surf, x * (int)sizeof(float), y);
}
