// The NCCL communicator's functions in a build without it (SNUG_NCCL off, no CUDA backend, or no
// nccl.h found).
#include "core/error.h"
#include "dist/nccl_world.h"

namespace snug::dist {

bool nccl_built() {
  return false;
}

std::string nccl_unavailable_reason() {
  return "this snug was built without NCCL (it needs the CUDA backend and nccl.h, e.g. from the "
         "CUDA toolkit or libnccl-dev; -DSNUG_NCCL=ON makes a missing NCCL an error)";
}

std::unique_ptr<Communicator> make_nccl_communicator(const CommOptions&, int,
                                                     std::unique_ptr<Communicator>) {
  throw Error(nccl_unavailable_reason());
}

}  // namespace snug::dist
