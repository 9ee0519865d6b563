// The main of snug_mpi_tests, run by run_mpi.sh under `mpirun -np N`: every rank runs every test
// in the same order (each test's collectives pair up across ranks). Rank 0 prints gtest's usual
// output; the other ranks print only their failures, each line tagged with the rank. The exit
// status is the same on every rank: 1 when a test failed on any rank.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>

#include "dist/make_communicator.h"
#include "dist/mpi_test_world.h"

namespace snug::dist::testing_mpi {

namespace {

std::unique_ptr<Communicator> g_world;

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

Communicator& world() {
  return *g_world;
}

}  // namespace snug::dist::testing_mpi

int main(int argc, char** argv) {
  using namespace snug::dist;
  ::testing::InitGoogleTest(&argc, argv);
  CommOptions options;
  options.timeout_s = 120;  // a test that leaves a rank behind ends the job, named
  testing_mpi::g_world = make_communicator(options);
  Communicator& w = *testing_mpi::g_world;
  if (w.name() != "mpi" || w.size() < 2) {
    std::fprintf(stderr,
                 "snug_mpi_tests runs under mpirun -np N with N >= 2 (tests/dist/run_mpi.sh); "
                 "this is a '%.*s' world of %d\n",
                 static_cast<int>(w.name().size()), w.name().data(), w.size());
    return 1;
  }
  if (w.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new testing_mpi::FailurePrinter(w.rank()));
  }
  int64_t failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  w.all_reduce_sum(&failed, 1);
  w.finish();
  if (w.rank() == 0 && failed != 0)
    std::fprintf(stderr, "snug_mpi_tests: %lld rank(s) failed a test\n",
                 static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}
