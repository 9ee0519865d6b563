// What a rank says when a collective fails: one line naming the collective, this rank and the
// ranks it waited for, so that the job's output says which rank to look at.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace snug::dist {

// "snug: rank 0 of 2: all_reduce_sum (collective 17) did not complete within --ddp-timeout 2 s:
// rank 1 did not arrive; ending the job". `missing`: the ranks nothing was received from.
std::string timeout_message(std::string_view collective, uint64_t seq, int rank, int size,
                            double timeout_s, const std::vector<int>& missing);

// "rank 0 of 2: all_gather (collective 5) failed with rank 1: <MPI's words>"; peer < 0: no one
// rank named.
std::string collective_error_message(std::string_view collective, uint64_t seq, int rank, int size,
                                     int peer, std::string_view what);

}  // namespace snug::dist
