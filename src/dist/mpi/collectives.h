// The collectives of communicator.h over MPI point-to-point messages (exchange.h), as direct
// exchanges: every rank sends each peer what that peer needs and receives from each peer what it
// needs, all at once (N-1 messages each way per phase). Volume per rank equals a ring's:
//
//   all_reduce_sum      phase 0: chunk j (dist/rank_order.h) to rank j; sum the N copies of this
//                       rank's chunk in rank order; phase 1: the summed chunk to every rank
//                       (a reduce-scatter then an all-gather: 2(N-1)/N of the buffer each way)
//   reduce_scatter_sum  slice j to rank j; sum in rank order into out
//   all_gather          this rank's shard to every rank
//   all_gather_many     each part's shard to every rank, all parts' messages at once
//   broadcast           root's bytes to every other rank
//   barrier             an empty message to and from every rank
//
// Message tags carry the collective's sequence number and phase, on the communicator's own
// duplicate of the world, so collectives in flight together (buckets) never take each other's
// messages. Scratch: all_reduce_sum holds (N-1) copies of this rank's chunk and
// reduce_scatter_sum (N-1) shards, in host memory outside the tracked pools
// (dist/rank_order.h: *_scratch_elements).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace snug::dist::mpi {

// What every collective of one communicator shares.
struct World {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  CommOptions options;
  uint64_t next_seq = 1;  // the next collective's number (1 = the first)
  int in_flight = 0;      // collectives started and not yet complete
};

std::unique_ptr<PendingCollective> start_all_reduce_sum(World& world, float* data, size_t n);
std::unique_ptr<PendingCollective> start_all_reduce_sum(World& world, double* data, size_t n);
std::unique_ptr<PendingCollective> start_all_reduce_sum(World& world, int64_t* data, size_t n);
std::unique_ptr<PendingCollective> start_reduce_scatter_sum(World& world, const float* in,
                                                            float* out, size_t shard);
std::unique_ptr<PendingCollective> start_all_gather(World& world, const float* in_shard, float* out,
                                                    size_t shard);
std::unique_ptr<PendingCollective> start_all_gather(World& world, const uint16_t* in_shard,
                                                    uint16_t* out, size_t shard);
// Several all-gathers as one collective: every part's messages posted at once, received straight
// into each part's slices (no scratch).
std::unique_ptr<PendingCollective> start_all_gather_many(
    World& world, const std::vector<GatherPart<float>>& parts);
std::unique_ptr<PendingCollective> start_all_gather_many(
    World& world, const std::vector<GatherPart<uint16_t>>& parts);
std::unique_ptr<PendingCollective> start_broadcast(World& world, void* data, size_t bytes,
                                                   int root);
std::unique_ptr<PendingCollective> start_barrier(World& world);

}  // namespace snug::dist::mpi
