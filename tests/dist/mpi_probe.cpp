// A two-rank job that goes wrong on purpose, for the failure tests of tests/CMakeLists.txt (label
// mpi): rank 1 misbehaves after a first all-reduce has shown both ranks up, while rank 0 goes on
// to a second all-reduce. What ends the job, and what it prints, is what the tests check:
//
//   mpi_probe sleep --ddp-timeout S   rank 1 sleeps far past S: rank 0 times out naming rank 1
//   mpi_probe stop --ddp-timeout S    rank 1 stops itself (SIGSTOP): the same
//   mpi_probe kill                    rank 1 starts the all-reduce, then SIGKILLs itself: mpirun
//                                     ends the job naming rank 1
//   mpi_probe throw                   rank 1 fails with a snug::Error mid-run: its message, and
//                                     mpirun ends the job at once (not after --ddp-timeout)
//   mpi_probe ok                      both ranks finish; exit 0
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/error.h"
#include "dist/make_communicator.h"

namespace {

using namespace snug::dist;

void run(const std::string& mode, const CommOptions& options) {
  std::unique_ptr<Communicator> comm = make_communicator(options);
  int64_t arrived = 1;
  comm->all_reduce_sum(&arrived, 1);
  std::fprintf(stderr, "mpi_probe: rank %d of %d: %lld ranks arrived; mode %s\n", comm->rank(),
               comm->size(), static_cast<long long>(arrived), mode.c_str());
  float x[64] = {};
  if (comm->rank() == 1) {
    if (mode == "sleep") sleep(600);
    if (mode == "stop") raise(SIGSTOP);
    if (mode == "kill") {
      Request r = comm->start_all_reduce_sum(x, 64);
      r.test();
      raise(SIGKILL);
    }
    if (mode == "throw") throw snug::Error("rank 1 failed on purpose (mpi_probe throw)");
  }
  comm->all_reduce_sum(x, 64);
  comm->finish();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: mpi_probe sleep|stop|kill|throw|ok [--ddp-timeout S]\n");
    return 2;
  }
  CommOptions options;
  for (int i = 2; i + 1 < argc; i += 2)
    if (std::strcmp(argv[i], "--ddp-timeout") == 0) options.timeout_s = std::atof(argv[i + 1]);
  try {
    run(argv[1], options);
  } catch (const snug::Error& e) {
    // As the snug command prints it.
    std::fprintf(stderr, "snug: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
