// The NCCL communicator's entry points (issue 30; docs/distributed.md, "GPU ranks: NCCL").
// Nothing here includes nccl.h or a CUDA header: a build without NCCL (SNUG_NCCL off, no CUDA
// toolkit, or no nccl.h) links nccl_absent.cpp instead of dist/nccl/, whose functions say so,
// and the rest of snug builds the same.
//
// NCCL itself (libnccl.so.2, about 200 MB) is loaded when the first NCCL communicator is made,
// not linked: a build needs only nccl.h, and its binaries run on a machine without NCCL (every
// GPU run of one process included), where asking for NCCL is refused naming the library.
#pragma once

#include <memory>
#include <string>

#include "dist/communicator.h"

namespace snug::dist {

// True when this snug was built with the NCCL communicator.
bool nccl_built();

// Why an NCCL communicator cannot be made in this process ("" when it can): built without it,
// or libnccl.so.2 cannot be loaded (SNUG_NCCL_LIBRARY names another path to try first).
std::string nccl_unavailable_reason();

// This process's rank of a world of GPU ranks as a Communicator (name "nccl") on GPU `gpu`.
// The CUDA backend of that GPU is made first (its context and stream; the backend's "context"
// figure then leaves NCCL's buffers out), then NCCL's communicator:
//   bootstrap == nullptr   a world of one, no launcher needed: ncclGetUniqueId,
//   ncclCommInitRank(1); bootstrap (MPI)        rank 0's unique id is broadcast over it, then
//   ncclCommInitRank on every
//                          rank; the NCCL communicator keeps it, and finish() / abort() end it too
//                          (MPI's rules for a failed rank hold: docs/distributed.md).
// NCCL 2.28 refuses two ranks on one GPU ("Duplicate GPU detected"): the error says so.
std::unique_ptr<Communicator> make_nccl_communicator(const CommOptions& options, int gpu,
                                                     std::unique_ptr<Communicator> bootstrap);

}  // namespace snug::dist
