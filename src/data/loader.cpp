#include "data/loader.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/random.h"

namespace snug {

DataLoader::DataLoader(const TokenSource& source, int64_t B, int64_t T, uint64_t seed, bool shuffle,
                       const DataShard& shard)
    : BatchSource(shard), source_(source), B_(B), T_(T), seed_(seed), shuffle_(shuffle) {
  SNUG_CHECK(B >= 1, "data loader: batch size must be at least 1, got ", B);
  SNUG_CHECK(T >= 1, "data loader: sequence length must be at least 1, got ", T);
  const int64_t n = source.size();
  SNUG_CHECK(n >= T + 1, "dataset ", source.describe(), " is too short: it has ", n,
             " tokens, but sequence length ", T, " needs at least ", T + 1,
             " (T + 1: inputs plus the shifted targets)");
  windows_ = (n - 1) / T;
  SNUG_CHECK(windows_ <= std::numeric_limits<uint32_t>::max(), "dataset ", source.describe(),
             " has ", windows_, " windows of ", T + 1, " tokens; at most 2^32 - 1 are supported");
  order_ = permutation(windows_, seed_, epoch_);
  scratch_.resize(static_cast<size_t>(T + 1));
}

std::vector<uint32_t> DataLoader::permutation(int64_t windows, uint64_t seed, int64_t epoch) const {
  std::vector<uint32_t> order(static_cast<size_t>(windows));
  std::iota(order.begin(), order.end(), 0u);
  if (!shuffle_) return order;
  // Fisher-Yates driven by SplitMix64 keyed by (seed, epoch): the same on every platform.
  SplitMix64 rng(splitmix64_mix(seed) ^
                 splitmix64_mix(static_cast<uint64_t>(epoch) + 0x6c6f616465726570ull));
  for (int64_t i = windows - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

void DataLoader::next(int32_t* inputs, int32_t* targets) {
  next_rows(B_, inputs, targets, nullptr);
}

void DataLoader::advance() {
  if (++position_ == windows_) {
    ++epoch_;
    position_ = 0;
    order_ = permutation(windows_, seed_, epoch_);
  }
}

void DataLoader::skip_rows(int64_t rows) {
  for (int64_t b = 0; b < rows; ++b) advance();
}

int64_t DataLoader::read_rows(int64_t rows, int32_t* inputs, int32_t* targets, int32_t*) {
  SNUG_ASSERT(rows >= 1 && rows <= B_, "rows ", rows);
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t w = order_[static_cast<size_t>(position_)];
    source_.read(w * T_, T_ + 1, scratch_.data());
    if (inputs != nullptr) std::copy_n(scratch_.data(), T_, inputs + b * T_);
    if (targets != nullptr) std::copy_n(scratch_.data() + 1, T_, targets + b * T_);
    advance();
  }
  return T_;
}

void DataLoader::next(Tensor& inputs, Tensor& targets) {
  for (const Tensor* t : {&inputs, &targets}) {
    const char* what = t == &inputs ? "inputs" : "targets";
    SNUG_CHECK(t->defined(), "data loader: ", what, " tensor is undefined");
    SNUG_CHECK(t->dtype() == DType::i32, "data loader: ", what, " tensor must be i32, got ",
               dtype_name(t->dtype()));
    check_shape(*t, {B_, T_}, what);
  }
  if (inputs.is_meta() || targets.is_meta()) {
    // Nothing to fill; keep the state moving as a real run would.
    next(nullptr, nullptr);
    return;
  }
  next(inputs.data<int32_t>(), targets.data<int32_t>());
}

void DataLoader::seek(int64_t epoch, int64_t position) {
  SNUG_CHECK(epoch >= 0, "data loader: cannot seek to epoch ", epoch, " (must be >= 0)");
  SNUG_CHECK(position >= 0 && position < windows_, "data loader: cannot seek to position ",
             position, " (an epoch of this dataset has ", windows_, " windows: 0..", windows_ - 1,
             ")");
  if (epoch != epoch_) order_ = permutation(windows_, seed_, epoch);
  epoch_ = epoch;
  position_ = position;
}

int64_t DataLoader::window_at(int64_t epoch, int64_t position) const {
  SNUG_CHECK(epoch >= 0 && position >= 0 && position < windows_,
             "data loader: no window at "
             "epoch ",
             epoch, " position ", position);
  if (epoch == epoch_) return order_[static_cast<size_t>(position)];
  return permutation(windows_, seed_, epoch)[static_cast<size_t>(position)];
}

}  // namespace snug
