// Data parallelism's gradient synchronisation (issue 30, ZeRO stage 0 = DDP; docs/distributed.md):
// every trainable gradient is summed across the ranks so that each rank holds the one-process
// window's gradient. A sum, not a mean: each rank's losses were already divided by the window's
// target count summed over the ranks (Trainer's synchronise_targets), the gradient-accumulation
// rule extended to ranks.
//
// Buckets, as PyTorch DDP's: gradients are copied back to back into a flat fp32 bucket of at most
// --ddp-bucket-cap-mb (bucket_cap_mb, 25 MiB by default; a gradient larger than the bucket is cut
// across buckets), and a full bucket's all-reduce is started at once. The Trainer hands each
// gradient over from a grad-ready listener on the window's last micro-batch (models/grad_ready.h)
// while backward goes on, in the order backward finishes them, and advances the buckets in flight
// at each hand-over (OpenMPI 4 moves messages only inside MPI calls, so these test() calls between
// layers are what overlaps communication with backward). After backward, finish() adds what was
// not handed over (last parameter first), reduces the last partial bucket, waits for all and
// copies the sums back.
//
// bf16 gradients (--bf16-full, --precision-layout deepspeed) are widened into the fp32 bucket,
// summed there in fp32 and rounded back once (round to nearest even): each element of the sum is
// round(g_0 + g_1 + ... + g_{N-1}) over the ranks' bf16 values, one rounding where an all-reduce
// in bf16 (PyTorch DDP's on a bf16 model) rounds every partial sum. The bucket is the same fp32
// buffer as an fp32 run's, so the plan of such a run is the one it always was.
//
// Memory: at most kBucketsInFlight buckets exist (a third waits for the oldest to complete and
// reuses it), each allocated from the device's pool as Category::temporary (scratch that lives
// for the synchronisation only) when first needed and freed by finish(); a bucket is never larger
// than all the trainable gradients together. A dry run on meta allocates them the same way and
// moves nothing, so the plan counts them. The communicator's own scratch (dist/rank_order.h) is
// host memory inside it. Gradients go in and out of a bucket by the device's copy, so on GPU
// ranks the buckets are device memory that the NCCL communicator sums where they are.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "dist/communicator.h"
#include "nn/parameter.h"

namespace snug {

// PyTorch DDP's default bucket_cap_mb.
inline constexpr double kDefaultBucketCapMb = 25.0;
// Buckets that may exist at once (one filling while one is reduced).
inline constexpr int kBucketsInFlight = 2;

// The elements of a bucket for `params`' trainable gradients at cap `cap_mb` MiB: the smaller of
// the cap (at least one element) and all those gradients together.
int64_t gradient_bucket_elements(const ParameterList& params, double cap_mb);

struct GradSyncStats {
  int64_t buckets = 0;  // collectives run
  int64_t bytes = 0;    // bytes all-reduced
};

// Where a reduced bucket's sums go instead of back into the gradients: elements [begin,
// begin+count) of p's summed gradient at `sum`, fp32 whatever the gradient's dtype (ZeRO stage 2
// keeps only the ones the rank owns: train/zero_optimizer.h). With a sink, add() also frees each
// gradient once it is in the bucket.
using GradientSink =
    std::function<void(const Parameter& p, int64_t begin, const float* sum, int64_t count)>;

// One window's synchronisation (see above). fp32 or bf16 gradients. With a `sink`, finish() may be
// called after every micro-batch (ZeRO stage 2 reduces each micro-batch's gradients at once).
class GradientBuckets {
 public:
  GradientBuckets(const ParameterList& params, dist::Communicator& comm, double cap_mb, Device& dev,
                  GradientSink sink = {});
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // p's gradient is final for this window: into the bucket (starting its all-reduce when full),
  // and the buckets in flight advanced. A parameter handed over twice is an error.
  void add(Parameter& p);
  // Adds the trainable parameters not handed over (every one that trains must have a gradient),
  // reduces the rest, copies every sum back and frees the buckets.
  GradSyncStats finish();

 private:
  struct Piece {
    Parameter* p;
    int64_t begin, count;
  };
  struct Bucket {
    Tensor buffer;
    std::vector<Piece> pieces;
    int64_t fill = 0;
    dist::Request request;
  };
  void start(Bucket& b);
  void complete(Bucket& b);  // waits and copies back
  Bucket& filling();         // the bucket to copy into (waiting for the oldest if need be)

  const ParameterList& params_;
  dist::Communicator& comm_;
  Device& dev_;
  GradientSink sink_;
  int64_t cap_;
  std::deque<Bucket> in_flight_;  // started, oldest first
  std::vector<Bucket> spare_;     // completed, reusable
  Bucket current_;                // being filled (buffer undefined until needed)
  std::vector<const Parameter*> added_;
  GradSyncStats stats_;
};

// A whole synchronisation after backward: GradientBuckets with nothing handed over, finished.
GradSyncStats all_reduce_gradients(const ParameterList& params, dist::Communicator& comm,
                                   double cap_mb, Device& dev);

}  // namespace snug
