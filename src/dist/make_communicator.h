// Which communicator a process gets, from how it was launched and where it computes: under mpirun
// (or another MPI launcher) the MPI one for CPU ranks and the NCCL one (bootstrapped over MPI) for
// GPU ranks, else the world of one. A process launched by mpirun in a snug built without MPI (or,
// for GPU ranks, without NCCL) is refused with the reason, rather than running N copies of a
// one-process job. --ddp-backend (HF's ddp_backend) names the communicator instead: `nccl` gives
// a GPU run of one process an NCCL world of one (no launcher needed).
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
  int local_rank = -1;   // the rank among this machine's ranks; -1 when the launcher does not say
};

// Where this rank computes and which communicator was asked for.
struct Placement {
  int gpu = -1;         // --device cuda:N: N; -1 for a CPU rank
  std::string backend;  // --ddp-backend: "" (chosen as below), "mpi" or "nccl"
};

// The environment a launcher leaves: OMPI_COMM_WORLD_SIZE (OpenMPI's mpirun), PMIX_RANK (PMIx
// launchers: OpenMPI 4+, Slurm's srun --mpi=pmix), PMI_RANK/PMI_SIZE (MPICH's Hydra, Intel MPI);
// the local rank from OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID (Hydra) or SLURM_LOCALID.
// `getenv` is std::getenv or a test's table.
Launch detect_launch(const std::function<const char*(const char*)>& getenv);

enum class Choice { single, mpi, nccl, refuse };

// What a CPU process launched so gets, in a build with MPI or without:
//   not launched                   single
//   launched, built with MPI       mpi (a world of one under -np 1)
//   launched, built without MPI    refuse, unless the launcher says its world is one (single)
Choice choose(const Launch& launch, bool built_with_mpi);
// The refusal: names the variable and how to build with MPI.
std::string refusal_message(const Launch& launch);

// With the placement (docs/distributed.md's table):
//   CPU rank, --ddp-backend "" or mpi   choose(launch, built_with_mpi)
//   CPU rank, --ddp-backend nccl        refuse (NCCL moves GPU memory)
//   GPU rank, --ddp-backend mpi         refuse (the MPI communicator sums host memory)
//   GPU rank, not launched              single; nccl (a world of one) with --ddp-backend nccl
//   GPU rank, launched                  nccl (bootstrapped over MPI: needs both built), or
//                                       single when the launcher's world is one and MPI or NCCL
//                                       is missing; else refuse
Choice choose(const Launch& launch, const Placement& where, bool built_with_mpi,
              bool built_with_nccl);
// Why choose() refused (one message naming the flag, the variable or the missing piece).
std::string refusal_message(const Launch& launch, const Placement& where, bool built_with_mpi,
                            bool built_with_nccl);

// The GPU a rank of `launch` uses for --device `device`: cuda:N is N; plain "cuda" is the local
// rank under a launcher of several ranks (one GPU per rank of a machine, as torchrun's
// LOCAL_RANK), else 0; -1 for a device that is not a GPU.
int rank_gpu(const std::string& device, const Launch& launch);

// Checks `options` (timeout_s > 0, naming --ddp-timeout) and makes the communicator choose()
// picks (snug::Error with refusal_message for a refusal). Without a placement: a CPU rank.
std::unique_ptr<Communicator> make_communicator(const CommOptions& options,
                                                const Placement& where = {});
std::unique_ptr<Communicator> make_communicator(
    const CommOptions& options, const std::function<const char*(const char*)>& getenv,
    const Placement& where = {});

// Throws snug::Error unless `options` is usable.
void check_options(const CommOptions& options);

}  // namespace snug::dist
