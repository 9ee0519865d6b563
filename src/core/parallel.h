// Threading: OpenMP everywhere (oneDNN is built on OpenMP too, so one pool serves both).
#pragma once

namespace snug {

// Sets the OpenMP thread count for snug's kernels and oneDNN (0 = leave the default:
// OMP_NUM_THREADS, else the number of cores).
void set_num_threads(int n);
int num_threads();

}  // namespace snug
