// Which communicator a process gets, from how it was launched: under mpirun (or another MPI
// launcher) the MPI one, else the world of one. A process launched by mpirun in a snug built
// without MPI is refused with the reason, rather than running N copies of a one-process job.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dist/communicator.h"

namespace snug::dist {

struct Launch {
  bool by_launcher = false;
  std::string evidence;  // the variable that says so: "OMPI_COMM_WORLD_SIZE=2"
  int world_size = 0;    // the launcher's world size; 0 when it does not say
};

// The environment a launcher leaves: OMPI_COMM_WORLD_SIZE (OpenMPI's mpirun), PMIX_RANK (PMIx
// launchers: OpenMPI 4+, Slurm's srun --mpi=pmix), PMI_RANK/PMI_SIZE (MPICH's Hydra, Intel MPI).
// `getenv` is std::getenv or a test's table.
Launch detect_launch(const std::function<const char*(const char*)>& getenv);

enum class Choice { single, mpi, refuse };

// What a process launched so gets, in a build with MPI or without:
//   not launched                   single
//   launched, built with MPI       mpi (a world of one under -np 1)
//   launched, built without MPI    refuse, unless the launcher says its world is one (single)
Choice choose(const Launch& launch, bool built_with_mpi);
// The refusal: names the variable and how to build with MPI.
std::string refusal_message(const Launch& launch);

// Checks `options` (timeout_s > 0, naming --ddp-timeout) and makes the communicator choose()
// picks (snug::Error with refusal_message for a refusal).
std::unique_ptr<Communicator> make_communicator(const CommOptions& options);
std::unique_ptr<Communicator> make_communicator(
    const CommOptions& options, const std::function<const char*(const char*)>& getenv);

// Throws snug::Error unless `options` is usable.
void check_options(const CommOptions& options);

}  // namespace snug::dist
