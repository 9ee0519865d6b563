#include "train/grad_sync.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "kernels/op_table.h"

namespace snug {

int64_t gradient_bucket_elements(const ParameterList& params, double cap_mb) {
  int64_t total = 0;
  for (const Parameter* p : params)
    if (p->requires_grad) total += p->numel();
  const auto cap = static_cast<int64_t>(cap_mb * 1024.0 * 1024.0) / 4;
  return std::min(total, std::max<int64_t>(cap, 1));
}

GradientBuckets::GradientBuckets(const ParameterList& params, dist::Communicator& comm,
                                 double cap_mb, Device& dev, GradientSink sink)
    : params_(params),
      comm_(comm),
      dev_(dev),
      sink_(std::move(sink)),
      cap_(gradient_bucket_elements(params, cap_mb)) {}

GradientBuckets::~GradientBuckets() {
  // An error left the window early: the collectives in flight still own their buffers.
  for (Bucket& b : in_flight_) b.request.wait();
}

GradientBuckets::Bucket& GradientBuckets::filling() {
  if (!current_.buffer.defined()) {
    if (spare_.empty() && static_cast<int>(in_flight_.size()) >= kBucketsInFlight) {
      complete(in_flight_.front());
      spare_.push_back(std::move(in_flight_.front()));
      in_flight_.pop_front();
    }
    if (!spare_.empty()) {
      current_.buffer = std::move(spare_.back().buffer);
      spare_.pop_back();
    } else {
      current_.buffer = Tensor::empty({cap_}, DType::f32, Category::temporary, dev_);
    }
  }
  return current_;
}

void GradientBuckets::start(Bucket& b) {
  if (dev_.is_meta()) return;  // nothing to move
  b.request = comm_.start_all_reduce_sum(b.buffer.data<float>(), static_cast<size_t>(b.fill));
  ++stats_.buckets;
  stats_.bytes += b.fill * 4;
}

void GradientBuckets::complete(Bucket& b) {
  b.request.wait();
  const float* buf = dev_.is_meta() ? nullptr : b.buffer.data<float>();
  int64_t at = 0;
  for (const Piece& pc : b.pieces) {
    if (sink_)
      sink_(*pc.p, pc.begin, buf == nullptr ? nullptr : buf + at, pc.count);
    else if (buf != nullptr && pc.p->grad.dtype() == DType::bf16)
      dev_.ops().pack_half(pc.p->grad.data_u16() + pc.begin, buf + at, pc.count, false);
    else if (buf != nullptr)
      dev_.copy(pc.p->grad.data<float>() + pc.begin, buf + at, pc.count);
    at += pc.count;
  }
  b.pieces.clear();
  b.fill = 0;
}

void GradientBuckets::add(Parameter& p) {
  SNUG_CHECK(std::find(added_.begin(), added_.end(), &p) == added_.end(),
             "data parallelism: parameter ", p.name, " was handed over twice in one window");
  SNUG_CHECK(p.grad.defined(), "data parallelism: parameter ", p.name,
             " trains but has no gradient after backward on rank ", comm_.rank());
  const bool half = p.grad.dtype() == DType::bf16;
  SNUG_CHECK(dev_.is_meta() || half || p.grad.dtype() == DType::f32, "data parallelism: parameter ",
             p.name, " has a ", dtype_name(p.grad.dtype()),
             " gradient; the gradient all-reduce sums fp32 or bf16 gradients only");
  added_.push_back(&p);
  for (Bucket& b : in_flight_) b.request.test();
  const int64_t n = p.grad.numel();
  for (int64_t begin = 0; begin < n;) {
    Bucket& b = filling();
    const int64_t count = std::min(n - begin, cap_ - b.fill);
    if (!dev_.is_meta() && half)
      dev_.ops().unpack_half(b.buffer.data<float>() + b.fill, p.grad.data_u16() + begin, count,
                             false);
    else if (!dev_.is_meta())
      dev_.copy(b.buffer.data<float>() + b.fill, p.grad.data<float>() + begin, count);
    b.pieces.push_back({&p, begin, count});
    b.fill += count;
    begin += count;
    if (b.fill == cap_) {
      start(b);
      in_flight_.push_back(std::move(current_));
      current_ = Bucket{};
    }
  }
  if (sink_) p.free_grad();  // its sums go to the sink: the gradient itself is done
}

GradSyncStats GradientBuckets::finish() {
  for (auto it = params_.rbegin(); it != params_.rend(); ++it)
    if ((*it)->requires_grad && std::find(added_.begin(), added_.end(), *it) == added_.end())
      add(**it);
  if (current_.fill > 0) {
    start(current_);
    in_flight_.push_back(std::move(current_));
  }
  current_ = Bucket{};
  while (!in_flight_.empty()) {
    complete(in_flight_.front());
    in_flight_.pop_front();
  }
  spare_.clear();
  added_.clear();
  return std::exchange(stats_, GradSyncStats{});
}

GradSyncStats all_reduce_gradients(const ParameterList& params, dist::Communicator& comm,
                                   double cap_mb, Device& dev) {
  GradientBuckets buckets(params, comm, cap_mb, dev);
  return buckets.finish();
}

}  // namespace snug
