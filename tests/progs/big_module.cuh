// Device code for tests/progs/big_module.cu: 80 MiB of initialised device
// memory, so that the module image (a fatbin or cubin, built at build time
// and kept as its non-zero blocks by sparse_image.py) is larger than a frame
// of rgpu's protocol (72 MiB).  The program writes a pattern over the table's
// initial bytes in the image before loading it and reads it back from the
// device.
#pragma once

__device__ unsigned int big_table[(80u << 20) / 4] = { 1u };
__device__ unsigned int big_marker[4] = { 0x12345678u, 0x9abcdef0u, 3u, 4u };
