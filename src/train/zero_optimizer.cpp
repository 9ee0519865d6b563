#include "train/zero_optimizer.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "kernels/op_table.h"
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

std::vector<ZeroPiece> zero3_pieces(const Zero3Parameters& params, int rank) {
  std::vector<ZeroPiece> out;
  for (const Zero3Entry& e : params.entries()) {
    const int64_t lo = rank * e.shard, hi = lo + e.shard;
    const int64_t b = std::min(hi, e.numel);
    if (lo < b) out.push_back({e.p, lo, b - lo, e.offset});
    const int64_t pad = std::max(lo, e.numel);
    if (pad < hi) out.push_back({nullptr, pad - e.numel, hi - pad, e.offset + (pad - lo), e.p});
  }
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
    : stage_(stage), comm_(comm), dev_(dev) {
  SNUG_CHECK(stage == 1 || stage == 2, "ZeroOptimizer: stage ", stage, " is not 1 or 2");
  check_zero_optimizer(optim, stage);
  flat_.emplace(params, comm.size(), stage, dev);
  const FlatLayout& l = flat_->layout();
  const int64_t lo = l.begin(comm.rank()), hi = l.end(comm.rank());
  for (const FlatLayout::Entry& e : l.entries) {
    const int64_t a = std::max(lo, e.offset), b = std::min(hi, e.offset + e.p->numel());
    owned_range_[e.p] = a < b ? Owned{a - e.offset, b - e.offset, a - lo} : Owned{};
  }
  pieces_ = zero_pieces(l, comm.rank());
  if (stage == 2)
    for (const FlatLayout::Entry& e : l.entries) e.p->grad_category = Category::temporary;
  std::vector<const Parameter*> order;
  for (const FlatLayout::Entry& e : l.entries) order.push_back(e.p);
  make_pieces(flat_->buffer().slice_rows(lo, hi), order, optim, o);
}

ZeroOptimizer::ZeroOptimizer(const std::string& optim, Zero3Parameters& params,
                             const OptimizerOptions& o, dist::Communicator& comm, Device& dev)
    : stage_(3), comm_(comm), dev_(dev), z3_(&params) {
  check_zero_optimizer(optim, 3);
  pieces_ = zero3_pieces(params, comm.rank());
  for (const Zero3Entry& e : params.entries()) owned_range_[e.p] = Owned{};
  for (const ZeroPiece& pc : pieces_)
    if (pc.source != nullptr)
      owned_range_[pc.source] = Owned{pc.begin, pc.begin + pc.count, pc.slice_offset};
  std::vector<const Parameter*> order;
  for (const Zero3Entry& e : params.entries()) {
    e.p->grad_category = Category::temporary;
    order.push_back(e.p);
  }
  make_pieces(params.shards(), order, optim, o);
}

void ZeroOptimizer::make_pieces(const Tensor& weights, const std::vector<const Parameter*>& order,
                                const std::string& optim, const OptimizerOptions& o) {
  std::unordered_map<const Parameter*, int64_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int64_t>(i);
  for (const ZeroPiece& pc : pieces_) {
    auto p = std::make_unique<Parameter>();
    p->name = pc.source       ? pc.source->name
              : pc.padding_of ? std::string(kZeroPaddingName) + "." + pc.padding_of->name
                              : std::string(kZeroPaddingName);
    p->decay = pc.source ? pc.source->decay : false;
    p->value = weights.slice_rows(pc.slice_offset, pc.slice_offset + pc.count);
    if (pc.source != nullptr) {
      owned_elements_ += pc.count;
      // --bf16-full's rounding draws the bits the whole tensor's update would (nn/parameter.h).
      p->rounding_tensor = position.at(pc.source);
      p->rounding_offset = pc.begin;
    }
    piece_list_.push_back(p.get());
    owned_.push_back(std::move(p));
  }
  inner_ = make_optimizer(optim, piece_list_, o);
}

ZeroOptimizer::~ZeroOptimizer() {
  // The model outlives the optimizer: its gradients go back to their own category.
  for (const auto& [p, range] : owned_range_)
    const_cast<Parameter*>(p)->grad_category = Category::gradients;
}

void ZeroOptimizer::begin_window() {
  if (stage_ < 2) return;
  release_gradients();
  // The slice takes the weights' dtype: fp32, or bf16 under --precision-layout deepspeed (as
  // DeepSpeed's 16-bit gradient partition), so a rank's gradients are 2 or 4 bytes per element.
  received_ = 0;
  slice_ = Tensor::zeros({flat_ ? flat_->layout().shard : z3_->shard()},
                         flat_ ? flat_->layout().dtype : z3_->dtype(), Category::gradients, dev_);
  for (size_t i = 0; i < pieces_.size(); ++i)
    piece_list_[i]->grad =
        slice_.slice_rows(pieces_[i].slice_offset, pieces_[i].slice_offset + pieces_[i].count);
}

void ZeroOptimizer::accumulate_owned(const Parameter& p, int64_t begin, const float* src,
                                     int64_t count) {
  SNUG_ASSERT(slice_.defined(), "ZeRO stage ", stage_, ": a gradient reduced outside a window");
  const auto it = owned_range_.find(&p);
  SNUG_CHECK(it != owned_range_.end(), "ZeRO: parameter ", p.name, " is not sharded");
  const Owned& own = it->second;
  const int64_t a = std::max(own.begin, begin), b = std::min(own.end, begin + count);
  if (a >= b) return;
  const OpTable& ops = dev_.ops();
  const int64_t at = own.at + (a - own.begin), n = b - a;
  const float* from = dev_.is_meta() ? nullptr : src + (a - begin);
  // Each owned element gets one sum per micro-batch, and a micro-batch's sums all come before
  // the next one's: until the slice has had as many as it owns, this is the window's first.
  const bool first = received_ < owned_elements_;
  received_ += n;
  if (slice_.dtype() == DType::f32) {
    if (!dev_.is_meta()) ops.add(slice_.data<float>() + at, slice_.data<float>() + at, from, n);
    return;
  }
  // A bf16 slice (DeepSpeed's 16-bit gradient partition). The first micro-batch's sums are
  // rounded into it (as stage 0 rounds its sums into the gradients); later ones are added to its
  // widened values and rounded once, in chunks through a small fp32 temporary (the plan counts
  // it: meta allocates it too).
  uint16_t* dst = dev_.is_meta() ? nullptr : slice_.data_u16() + at;
  if (first) {
    if (!dev_.is_meta()) ops.pack_half(dst, from, n, false);
    return;
  }
  for (int64_t c = 0; c < n; c += kWidenChunk) {
    const int64_t m = std::min(kWidenChunk, n - c);
    Tensor wide = Tensor::empty({m}, DType::f32, Category::temporary, dev_);
    if (dev_.is_meta()) continue;
    ops.unpack_half(wide.data<float>(), dst + c, m, false);
    ops.add(wide.data<float>(), wide.data<float>(), from + c, m);
    ops.pack_half(dst + c, wide.data<float>(), m, false);
  }
}

void ZeroOptimizer::bind_whole_gradients() {
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const ZeroPiece& pc = pieces_[i];
    Parameter* q = piece_list_[i];
    if (pc.source == nullptr) {
      q->grad = Tensor::zeros({pc.count}, q->value.dtype(), Category::gradients, dev_);
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
  // Stage 3: the shards are the weights; the next gather of each block brings the update.
  if (!flat_ || dev_.is_meta() || comm_.size() == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  const FlatLayout& l = flat_->layout();
  const auto shard = static_cast<size_t>(l.shard);
  if (l.dtype == DType::bf16) {
    uint16_t* buf = flat_->buffer().data_u16();
    comm_.all_gather(buf + l.begin(comm_.rank()), buf, shard);
  } else {
    float* buf = flat_->buffer().data<float>();
    comm_.all_gather(buf + l.begin(comm_.rank()), buf, shard);
  }
  gather_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace snug
