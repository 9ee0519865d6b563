// The world of one process (name "single"): what a run without a launcher uses. Sums are the
// input itself, reduce_scatter and all_gather copy the one slice, broadcast (root 0) and barrier
// do nothing; every Request comes back complete. The argument checks are the MPI ones, so a
// caller's mistake shows on one process too.
#pragma once

#include "dist/communicator.h"

namespace snug::dist {

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view name() const override { return "single"; }

  Request start_all_reduce_sum(float* data, size_t n) override;
  Request start_all_reduce_sum(double* data, size_t n) override;
  Request start_all_reduce_sum(int64_t* data, size_t n) override;
  Request start_reduce_scatter_sum(const float* in, float* out, size_t shard) override;
  Request start_all_gather(const float* in_shard, float* out, size_t shard) override;
  Request start_all_gather(const uint16_t* in_shard, uint16_t* out, size_t shard) override;
  Request start_broadcast(void* data, size_t bytes, int root) override;
  Request start_barrier() override;

  void finish() override {}
  [[noreturn]] void abort(int code, std::string_view message) override;
};

}  // namespace snug::dist
