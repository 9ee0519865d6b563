// The MPI communicator's functions in a build without MPI (SNUG_MPI off, or MPI not found).
#include "core/error.h"
#include "dist/mpi_world.h"

namespace snug::dist {

bool mpi_built() {
  return false;
}

std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions&) {
  throw Error(
      "this snug was built without MPI (install libopenmpi-dev, e.g. scripts/install-deps.sh, "
      "and configure again; -DSNUG_MPI=ON makes a missing MPI an error)");
}

}  // namespace snug::dist
