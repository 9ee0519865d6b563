#include "data/prefetch.h"

#include <cstring>

#include "core/error.h"

namespace snug {

Prefetcher::Prefetcher(BatchSource& loader, int num_workers, int prefetch_factor, Device& dev)
    : loader_(loader), threaded_(num_workers > 0 && !dev.is_meta()) {
  SNUG_CHECK(num_workers >= 0, "--dataloader-num-workers must be >= 0, got ", num_workers);
  SNUG_CHECK(prefetch_factor >= 1, "prefetch factor must be >= 1, got ", prefetch_factor);
  const int64_t B = loader.batch_size(), T = loader.seq_len();
  const int n = num_workers * prefetch_factor;
  Device& host = dev.host();
  for (int i = 0; i < n; ++i) {
    slots_.push_back({Tensor::empty({B, T}, DType::i32, Category::input_data, host),
                      Tensor::empty({B, T}, DType::i32, Category::input_data, host),
                      loader.has_positions()
                          ? Tensor::empty({B, T}, DType::i32, Category::input_data, host)
                          : Tensor(),
                      0});
    free_.push_back(static_cast<size_t>(i));
  }
  if (threaded_) thread_ = std::thread([this] { produce(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::produce() {
  for (;;) {
    size_t slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
      if (stop_) return;
      slot = free_.front();
      free_.pop_front();
    }
    try {
      Slot& s = slots_[slot];
      s.cols = loader_.next_rows(loader_.batch_size(), s.inputs.data<int32_t>(),
                                 s.targets.data<int32_t>(),
                                 s.positions.defined() ? s.positions.data<int32_t>() : nullptr);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_.push_back(slot);
    }
    cv_.notify_all();
  }
}

int64_t Prefetcher::next(int32_t* inputs, int32_t* targets, int32_t* positions) {
  if (!threaded_) return loader_.next_rows(loader_.batch_size(), inputs, targets, positions);
  size_t slot;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !ready_.empty() || error_; });
    if (ready_.empty()) std::rethrow_exception(error_);
    slot = ready_.front();
    ready_.pop_front();
  }
  const Slot& s = slots_[slot];
  const auto n = static_cast<size_t>(loader_.batch_size() * s.cols);
  const int64_t cols = s.cols;
  if (inputs) std::memcpy(inputs, s.inputs.data<int32_t>(), n * sizeof(int32_t));
  if (targets) std::memcpy(targets, s.targets.data<int32_t>(), n * sizeof(int32_t));
  if (positions && s.positions.defined())
    std::memcpy(positions, s.positions.data<int32_t>(), n * sizeof(int32_t));
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(slot);
  }
  cv_.notify_all();
  return cols;
}

}  // namespace snug
