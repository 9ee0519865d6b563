#include "dist/make_communicator.h"

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "dist/mpi_world.h"
#include "dist/single_process.h"

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

std::unique_ptr<Communicator> make_communicator(
    const CommOptions& options, const std::function<const char*(const char*)>& getenv) {
  check_options(options);
  const Launch launch = detect_launch(getenv);
  switch (choose(launch, mpi_built())) {
    case Choice::single:
      return std::make_unique<SingleProcess>();
    case Choice::mpi:
      return make_mpi_communicator(options);
    case Choice::refuse:
      break;
  }
  throw Error(refusal_message(launch));
}

std::unique_ptr<Communicator> make_communicator(const CommOptions& options) {
  return make_communicator(options, [](const char* name) { return std::getenv(name); });
}

}  // namespace snug::dist
