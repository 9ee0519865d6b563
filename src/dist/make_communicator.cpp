#include "dist/make_communicator.h"

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "dist/mpi_world.h"
#include "dist/nccl_world.h"
#include "dist/single_process.h"
#include "kernels/backends.h"

namespace snug::dist {

namespace {

// A positive decimal int, or 0.
int parse_size(const char* v) {
  if (v == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v && *end == '\0' && n > 0 && n <= 1 << 30 ? static_cast<int>(n) : 0;
}

}  // namespace

Launch detect_launch(const std::function<const char*(const char*)>& getenv) {
  Launch l;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = getenv(var);
    if (v == nullptr) continue;
    l.by_launcher = true;
    l.evidence = std::string(var) + "=" + v;
    break;
  }
  if (!l.by_launcher) return l;
  l.world_size = parse_size(getenv("OMPI_COMM_WORLD_SIZE"));
  if (l.world_size == 0) l.world_size = parse_size(getenv("PMI_SIZE"));
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = getenv(var);
    if (v == nullptr) continue;
    l.local_rank = std::string_view(v) == "0" ? 0 : parse_size(v) > 0 ? parse_size(v) : -1;
    break;
  }
  return l;
}

void check_options(const CommOptions& options) {
  SNUG_CHECK(std::isfinite(options.timeout_s) && options.timeout_s > 0,
             "--ddp-timeout must be a number of seconds > 0, got ", options.timeout_s);
  SNUG_CHECK(options.max_message_bytes >= 16,
             "the largest MPI message must be at least 16 bytes, got ", options.max_message_bytes);
}

Choice choose(const Launch& launch, bool built_with_mpi) {
  if (!launch.by_launcher) return Choice::single;
  if (built_with_mpi) return Choice::mpi;
  return launch.world_size == 1 ? Choice::single : Choice::refuse;
}

std::string refusal_message(const Launch& launch) {
  return detail::concat(
      "snug was launched by an MPI launcher (", launch.evidence,
      ") but built without MPI, so its ranks could not talk to each other: install "
      "libopenmpi-dev (scripts/install-deps.sh) and configure again (-DSNUG_MPI=ON makes a "
      "missing MPI an error), or run snug without mpirun");
}

Choice choose(const Launch& launch, const Placement& where, bool built_with_mpi,
              bool built_with_nccl) {
  const bool gpu = where.gpu >= 0;
  if (!gpu) return where.backend == "nccl" ? Choice::refuse : choose(launch, built_with_mpi);
  if (where.backend == "mpi") return Choice::refuse;
  if (!launch.by_launcher)
    return where.backend == "nccl" ? (built_with_nccl ? Choice::nccl : Choice::refuse)
                                   : Choice::single;
  if (built_with_mpi && built_with_nccl) return Choice::nccl;
  return launch.world_size == 1 && where.backend != "nccl" ? Choice::single : Choice::refuse;
}

std::string refusal_message(const Launch& launch, const Placement& where, bool built_with_mpi,
                            bool built_with_nccl) {
  const bool gpu = where.gpu >= 0;
  if (!gpu && where.backend == "nccl")
    return "--ddp-backend nccl: NCCL sums GPU memory, and this run's ranks compute on the CPU "
           "(give --device cuda, or use --ddp-backend mpi)";
  if (!gpu) return refusal_message(launch);
  if (where.backend == "mpi")
    return detail::concat(
        "--ddp-backend mpi: the MPI communicator sums host memory, and this "
        "run's ranks compute on cuda:",
        where.gpu, " (GPU ranks use --ddp-backend nccl)");
  if (!built_with_nccl)
    return detail::concat(launch.by_launcher
                              ? detail::concat("snug was launched by an MPI launcher (",
                                               launch.evidence, ") with --device cuda, but ")
                              : std::string("--ddp-backend nccl: "),
                          nccl_unavailable_reason());
  return detail::concat(
      "snug was launched by an MPI launcher (", launch.evidence,
      ") with --device cuda: the NCCL communicator's ranks find each other over MPI, but this "
      "snug was built without MPI (install libopenmpi-dev and configure again",
      "), or run snug without mpirun");
}

int rank_gpu(const std::string& device, const Launch& launch) {
  const std::optional<int> index = cuda_index(device);
  if (!index) return -1;
  if (device == "cuda" && launch.by_launcher && launch.world_size != 1 && launch.local_rank >= 0)
    return launch.local_rank;
  return *index;
}

std::unique_ptr<Communicator> make_communicator(
    const CommOptions& options, const std::function<const char*(const char*)>& getenv,
    const Placement& where) {
  check_options(options);
  const Launch launch = detect_launch(getenv);
  // NCCL is loaded only where it would be used.
  const bool wanted = where.gpu >= 0 && (launch.by_launcher || where.backend == "nccl");
  const bool with_nccl = nccl_built() && (!wanted || nccl_unavailable_reason().empty());
  switch (choose(launch, where, mpi_built(), with_nccl)) {
    case Choice::single:
      return std::make_unique<SingleProcess>();
    case Choice::mpi:
      return make_mpi_communicator(options);
    case Choice::nccl:
      return make_nccl_communicator(options, where.gpu,
                                    launch.by_launcher ? make_mpi_communicator(options) : nullptr);
    case Choice::refuse:
      break;
  }
  throw Error(refusal_message(launch, where, mpi_built(), with_nccl));
}

std::unique_ptr<Communicator> make_communicator(const CommOptions& options,
                                                const Placement& where) {
  return make_communicator(
      options, [](const char* name) { return std::getenv(name); }, where);
}

}  // namespace snug::dist
