// Background batch preparation: the Trainer's `dataloader_num_workers`.
//
// With 0 workers batches are read on the training thread when needed (PyTorch's default). With
// N > 0 a producer thread fills N * prefetch_factor staging slots ahead of the training loop
// (torch.utils.data's prefetch_factor defaults to 2), so reading never stalls a step. Batch order
// is exactly that of the synchronous loader (a sharded one's rows: data/batches.h's DataShard):
// one producer walks the same loader, which is why more workers deepen the queue instead of
// adding threads (reading windows of token ids is a memcpy; one thread keeps ahead of any
// training step). The staging slots are host memory: tensors
// of the device's host pool (Device::host(), the device's own pool on cpu and meta) in
// `input_data`, so the report shows what prefetching costs; the model uploads a batch to its device
// when it runs it. Pinned memory (`--dataloader-pin-memory`) is a CUDA host-allocation mode; on
// the cpu device it changes nothing and is accepted for compatibility.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "data/loader.h"

namespace snug {

class Prefetcher {
 public:
  // `loader` must outlive the prefetcher. The slots are allocated in dev.host(). On the meta
  // device nothing is read (the slots are still accounted). Slots hold a full batch (batch_size x
  // seq_len), and position ids too when the loader has them.
  Prefetcher(BatchSource& loader, int num_workers, int prefetch_factor, Device& dev);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next batch, (B,T) int32 each. Rethrows an error the producer hit (e.g. a bad file).
  void next(int32_t* inputs, int32_t* targets) { next(inputs, targets, nullptr); }
  // The next full batch (batch_size rows) as (B, cols) each; returns cols (BatchSource).
  int64_t next(int32_t* inputs, int32_t* targets, int32_t* positions);
  int64_t slots() const { return static_cast<int64_t>(slots_.size()); }

 private:
  struct Slot {
    Tensor inputs, targets, positions;
    int64_t cols = 0;
  };
  void produce();

  BatchSource& loader_;
  bool threaded_;
  std::vector<Slot> slots_;
  std::deque<size_t> free_, ready_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace snug
