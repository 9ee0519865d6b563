// SNUG_HD marks a small math function that both the host kernels and the CUDA kernels
// (src/kernels/cuda/) call, so that one formula serves both: __host__ __device__ under nvcc,
// nothing for the host compiler (whose code is then exactly what it was without the mark).
#pragma once

#if defined(__CUDACC__)
#define SNUG_HD __host__ __device__
#else
#define SNUG_HD
#endif
