#include "nn/neftune.h"

#include <cmath>

#include "core/random.h"
#include "kernels/op_table.h"

namespace snug::nn {

void add_neftune_noise(const RunContext& c, const Tensor& emb, double alpha) {
  const int64_t T = emb.dim(1), C = emb.dim(2);
  const double mag = alpha / std::sqrt(static_cast<double>(T * C));
  c.ops().add_uniform_noise(
      emb.data<float>(), emb.numel(),
      c.at_first_row(splitmix64_mix(c.forward_count ^ 0x6e656674756e65ull), emb.numel()), mag);
}

}  // namespace snug::nn
