// Built without cuDNN's attention (SNUG_CUDNN off, or cudnn.h / cudnn-frontend not found at
// configure time): every call declines and snug's own flash kernels run.
#include "kernels/cuda/cudnn_attention.h"

namespace snug::cuda {

bool cudnn_attention_enabled() {
  return false;
}
bool cudnn_attention_forward(float*, float*, const float*, const float*, const float*,
                             const AttentionDims&) {
  return false;
}
bool cudnn_attention_backward(float*, float*, float*, const float*, const float*, const float*,
                              const float*, const float*, const float*, const AttentionDims&) {
  return false;
}
int64_t cudnn_attention_scratch_high() {
  return 0;
}

}  // namespace snug::cuda
