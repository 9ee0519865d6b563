#include "nn/embedding.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

Embedding::Embedding(ParameterStore& ps, const std::string& name, int64_t vocab, int64_t dim,
                     const std::string& positions_name, int64_t max_positions)
    : ctx_(&ps.context()), dim_(dim), max_pos_(max_positions) {
  SNUG_CHECK(vocab > 0 && dim > 0, name, ": embedding sizes ", vocab, " x ", dim,
             " must be positive");
  w_ = ps.add(name, {vocab, dim}, true);
  if (max_positions > 0) pos_ = ps.add(positions_name, {max_positions, dim}, true);
}

void Embedding::forward(const Tensor& tokens, const Tensor& out, Saved& s,
                        int64_t first_position) const {
  const int64_t B = tokens.dim(0), T = tokens.dim(1);
  SNUG_CHECK(pos_ == nullptr || first_position + T <= max_pos_, "sequence length ",
             first_position + T, " exceeds the ", max_pos_, " learned positions");
  Tensor w_s, pos_s;  // --bf16-full: the tables widened to fp32 (temporary)
  const float* w = ctx_->param_f32(w_, w_s);
  const float* pos = pos_ ? ctx_->param_f32(pos_, pos_s) : nullptr;
  if (pos) pos += first_position * dim_;
  ctx_->ops().embedding_forward(f32(out), tokens.data<int32_t>(), w, pos, B, T, dim_);
  s.tokens = tokens;
}

void Embedding::backward(const Tensor& dout, Saved& s) const {
  const int64_t B = s.tokens.dim(0), T = s.tokens.dim(1);
  float* dw = ctx_->grad(w_);
  float* dpos = ctx_->grad(pos_);
  ctx_->ops().embedding_backward(dw, dpos, f32(dout), s.tokens.data<int32_t>(), B, T, dim_);
  s.tokens.reset();
}

}  // namespace snug::nn
