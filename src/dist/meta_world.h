// A rank of a world that exists only on paper (name "meta"): what `snug plan --world-size N`
// replays one rank of (plan/dry_run.h). rank() is the rank replayed, size() is N, and every
// collective moves nothing and completes at once: on the meta device there are no values, but the
// buffers a collective needs are allocated by its caller as in the real run, so the plan counts
// them. Only the broadcast's root is checked
// (meta tensors have no addresses to check the buffers by).
#pragma once

#include "dist/communicator.h"

namespace snug::dist {

class MetaWorld final : public Communicator {
 public:
  // Throws snug::Error unless 0 <= rank < size.
  MetaWorld(int rank, int size);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "meta"; }

  Request start_all_reduce_sum(float*, size_t) override { return {}; }
  Request start_all_reduce_sum(double*, size_t) override { return {}; }
  Request start_all_reduce_sum(int64_t*, size_t) override { return {}; }
  Request start_reduce_scatter_sum(const float* in, float* out, size_t shard) override;
  Request start_all_gather(const float* in_shard, float* out, size_t shard) override;
  Request start_all_gather(const uint16_t* in_shard, uint16_t* out, size_t shard) override;
  Request start_broadcast(void* data, size_t bytes, int root) override;
  Request start_barrier() override { return {}; }

  void finish() override {}
  [[noreturn]] void abort(int code, std::string_view message) override;

 private:
  int rank_, size_;
};

}  // namespace snug::dist
