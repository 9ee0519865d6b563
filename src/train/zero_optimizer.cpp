#include "train/zero_optimizer.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "optim/registry.h"

namespace snug {

std::vector<ZeroPiece> zero_pieces(const FlatLayout& layout, int rank) {
  const int64_t lo = layout.begin(rank), hi = layout.end(rank);
  std::vector<ZeroPiece> out;
  for (const FlatLayout::Entry& e : layout.entries) {
    const int64_t a = std::max(lo, e.offset), b = std::min(hi, e.offset + e.p->numel());
    if (a < b) out.push_back({e.p, a - e.offset, b - a, a - lo});
  }
  const int64_t a = std::max(lo, layout.numel);
  if (a < hi) out.push_back({nullptr, a - layout.numel, hi - a, a - lo});
  return out;
}

void check_zero_optimizer(const std::string& name, int stage) {
  const OptimizerEntry& e = optimizer_entry(name);
  SNUG_CHECK(!e.updates_in_backward, "--optim ", name, " with --zero-stage ", stage,
             ": its update runs inside backward, before the gradients could be reduced to their "
             "owners; use another --optim, or --zero-stage 0 on one process");
  SNUG_CHECK(e.elementwise, "--optim ", name, " with --zero-stage ", stage,
             ": the ZeRO stages cut parameters anywhere in the flat layout, which needs an "
             "elementwise optimizer (its state factored, blockwise or projected per tensor "
             "cannot be cut); use adamw_torch, sgd or lion, or --zero-stage 0");
}

ZeroOptimizer::ZeroOptimizer(const std::string& optim, const ParameterList& params,
                             const OptimizerOptions& o, int stage, dist::Communicator& comm,
                             Device& dev)
    : stage_(stage), comm_(comm), dev_(dev), flat_(params, comm.size(), stage, dev) {
  SNUG_CHECK(stage == 1 || stage == 2, "ZeroOptimizer: stage ", stage, " is not 1 or 2");
  check_zero_optimizer(optim, stage);
  const FlatLayout& l = flat_.layout();
  for (const FlatLayout::Entry& e : l.entries) offset_[e.p] = e.offset;
  pieces_ = zero_pieces(l, comm.rank());
  const int64_t slice_begin = l.begin(comm.rank());
  for (const ZeroPiece& pc : pieces_) {
    auto p = std::make_unique<Parameter>();
    p->name = pc.source ? pc.source->name : kZeroPaddingName;
    p->decay = pc.source ? pc.source->decay : false;
    const int64_t at = slice_begin + pc.slice_offset;
    p->value = flat_.buffer().slice_rows(at, at + pc.count);
    piece_list_.push_back(p.get());
    owned_.push_back(std::move(p));
  }
  if (stage == 2)
    for (const FlatLayout::Entry& e : l.entries) e.p->grad_category = Category::temporary;
  inner_ = make_optimizer(optim, piece_list_, o);
}

ZeroOptimizer::~ZeroOptimizer() {
  // The model outlives the optimizer: its gradients go back to their own category.
  for (const FlatLayout::Entry& e : flat_.layout().entries)
    e.p->grad_category = Category::gradients;
}

void ZeroOptimizer::begin_window() {
  if (stage_ != 2) return;
  release_gradients();
  slice_ = Tensor::zeros({flat_.layout().shard}, DType::f32, Category::gradients, dev_);
  for (size_t i = 0; i < pieces_.size(); ++i)
    piece_list_[i]->grad =
        slice_.slice_rows(pieces_[i].slice_offset, pieces_[i].slice_offset + pieces_[i].count);
}

void ZeroOptimizer::accumulate_owned(const Parameter& p, int64_t begin, const float* src,
                                     int64_t count) {
  SNUG_ASSERT(slice_.defined(), "ZeRO stage 2: a gradient reduced outside a window");
  const auto it = offset_.find(&p);
  SNUG_CHECK(it != offset_.end(), "ZeRO: parameter ", p.name, " is not in the flat layout");
  const FlatLayout& l = flat_.layout();
  const int64_t lo = l.begin(comm_.rank()), hi = l.end(comm_.rank());
  const int64_t a = std::max(lo, it->second + begin), b = std::min(hi, it->second + begin + count);
  if (a >= b || dev_.is_meta()) return;
  float* dst = slice_.data<float>() + (a - lo);
  const float* from = src + (a - it->second - begin);
  for (int64_t i = 0; i < b - a; ++i) dst[i] += from[i];
}

void ZeroOptimizer::bind_whole_gradients() {
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const ZeroPiece& pc = pieces_[i];
    Parameter* q = piece_list_[i];
    if (pc.source == nullptr) {
      q->grad = Tensor::zeros({pc.count}, DType::f32, Category::gradients, dev_);
    } else if (pc.source->grad.defined()) {
      q->grad =
          pc.source->grad.view({pc.source->numel()}).slice_rows(pc.begin, pc.begin + pc.count);
    }
  }
}

void ZeroOptimizer::release_gradients() {
  for (Parameter* q : piece_list_) q->grad.reset();
  slice_.reset();
}

void ZeroOptimizer::step(float lr) {
  if (stage_ == 1) bind_whole_gradients();
  inner_->set_steps(steps_);
  inner_->step(lr);
  steps_ = inner_->steps();
  release_gradients();
  gather();
}

void ZeroOptimizer::gather() {
  if (dev_.is_meta() || comm_.size() == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  const FlatLayout& l = flat_.layout();
  float* buf = flat_.buffer().data<float>();
  comm_.all_gather(buf + l.begin(comm_.rank()), buf, static_cast<size_t>(l.shard));
  gather_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace snug
