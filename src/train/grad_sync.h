// Data parallelism's gradient synchronisation (issue 30, ZeRO stage 0 = DDP; docs/distributed.md):
// after the window's last backward, every trainable gradient is summed across the ranks so that
// each rank holds the one-process window's gradient. A sum, not a mean: each rank's losses were
// already divided by the window's target count summed over the ranks (Trainer's
// synchronise_targets), the gradient-accumulation rule extended to ranks.
//
// The gradients go through one flat fp32 bucket of at most --ddp-bucket-cap-mb (PyTorch DDP's
// bucket_cap_mb, 25 MiB by default): the gradients, last parameter first (the order backward
// finishes them), are copied into it back to back (a gradient larger than the bucket is cut
// across buckets), each full bucket is all-reduced and copied back. The bucket is allocated from
// the device's pool as Category::temporary (scratch that lives for the synchronisation only) for
// as long as the synchronisation runs, so that a dry run on meta (which allocates it and moves
// nothing) counts it. The communicator's own scratch (dist/rank_order.h) is host memory it keeps.
//
// The buckets are reduced after backward, not while it runs: OpenMPI 4 moves messages only inside
// MPI calls, so a bucket started from a grad-ready listener would wait for the next one anyway;
// overlapping needs test() calls between layers, a later step.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "dist/communicator.h"
#include "nn/parameter.h"

namespace snug {

// PyTorch DDP's default bucket_cap_mb.
inline constexpr double kDefaultBucketCapMb = 25.0;

// The elements of the bucket for `params`' trainable gradients at cap `cap_mb` MiB: the smaller
// of the cap (at least one element) and all those gradients together.
int64_t gradient_bucket_elements(const ParameterList& params, double cap_mb);

struct GradSyncStats {
  int64_t buckets = 0;  // collectives run
  int64_t bytes = 0;    // bytes all-reduced
};

// Sums each parameter's gradient across comm's ranks in place (see above); a parameter that
// trains but has no gradient is an error (every rank must bring the same tensors). fp32
// gradients only. On meta, the bucket is allocated and nothing moves.
GradSyncStats all_reduce_gradients(const ParameterList& params, dist::Communicator& comm,
                                   double cap_mb, Device& dev);

}  // namespace snug
