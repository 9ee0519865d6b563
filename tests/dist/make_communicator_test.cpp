// Which communicator a process gets (dist/make_communicator.h), from its environment, in builds
// with and without MPI; and what a rank says when a collective times out (dist/messages.h).
#include "dist/make_communicator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "dist/messages.h"
#include "support/expect_error.h"

namespace snug::dist {
namespace {
namespace make_communicator_test {

using testing_data::error_message;
using testing_data::HasSubstr;

Launch launch_with(const std::map<std::string, std::string>& env) {
  return detect_launch([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(MakeCommunicator, ReadsTheLaunchersVariables) {
  const Launch none = launch_with({{"PATH", "/bin"}});
  EXPECT_FALSE(none.by_launcher);
  const Launch ompi = launch_with({{"OMPI_COMM_WORLD_SIZE", "2"}, {"PMIX_RANK", "1"}});
  EXPECT_TRUE(ompi.by_launcher);
  EXPECT_EQ(ompi.evidence, "OMPI_COMM_WORLD_SIZE=2");
  EXPECT_EQ(ompi.world_size, 2);
  const Launch pmix = launch_with({{"PMIX_RANK", "0"}});
  EXPECT_TRUE(pmix.by_launcher);
  EXPECT_EQ(pmix.evidence, "PMIX_RANK=0");
  EXPECT_EQ(pmix.world_size, 0);  // PMIx does not say
  const Launch hydra = launch_with({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}});
  EXPECT_EQ(hydra.evidence, "PMI_RANK=3");
  EXPECT_EQ(hydra.world_size, 4);
  EXPECT_EQ(launch_with({{"OMPI_COMM_WORLD_SIZE", "two"}}).world_size, 0);
}

TEST(MakeCommunicator, ChoosesByLaunchAndBuild) {
  const Launch none = launch_with({});
  const Launch two = launch_with({{"OMPI_COMM_WORLD_SIZE", "2"}});
  const Launch one = launch_with({{"OMPI_COMM_WORLD_SIZE", "1"}});
  const Launch unknown = launch_with({{"PMIX_RANK", "0"}});
  EXPECT_EQ(choose(none, true), Choice::single);
  EXPECT_EQ(choose(none, false), Choice::single);
  EXPECT_EQ(choose(two, true), Choice::mpi);
  EXPECT_EQ(choose(one, true), Choice::mpi);
  EXPECT_EQ(choose(two, false), Choice::refuse);
  EXPECT_EQ(choose(unknown, false), Choice::refuse);
  EXPECT_EQ(choose(one, false), Choice::single);
}

TEST(MakeCommunicator, TheRefusalSaysWhyAndWhatToDo) {
  const std::string m = refusal_message(launch_with({{"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_TRUE(HasSubstr(m,
                        "launched by an MPI launcher (OMPI_COMM_WORLD_SIZE=2) but built "
                        "without MPI"));
  EXPECT_TRUE(HasSubstr(m, "libopenmpi-dev"));
  EXPECT_TRUE(HasSubstr(m, "or run snug without mpirun"));
}

TEST(MakeCommunicator, WithoutALauncherItIsTheWorldOfOne) {
  auto comm = make_communicator({}, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(comm->name(), "single");
  EXPECT_EQ(comm->size(), 1);
  comm->finish();
}

TEST(MakeCommunicator, RefusesATimeoutThatIsNotAPositiveNumber) {
  for (double t : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    CommOptions o;
    o.timeout_s = t;
    EXPECT_TRUE(HasSubstr(error_message([&] { check_options(o); }),
                          "--ddp-timeout must be a number of seconds > 0, got "))
        << t;
  }
  EXPECT_EQ(CommOptions{}.timeout_s, 1800.0);  // HF's ddp_timeout default
}

TEST(MakeCommunicator, ReadsTheLocalRank) {
  EXPECT_EQ(launch_with({}).local_rank, -1);
  EXPECT_EQ(
      launch_with({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}).local_rank,
      0);
  EXPECT_EQ(launch_with({{"PMI_RANK", "3"}, {"MPI_LOCALRANKID", "1"}}).local_rank, 1);
  EXPECT_EQ(launch_with({{"PMIX_RANK", "3"}, {"SLURM_LOCALID", "2"}}).local_rank, 2);
  EXPECT_EQ(launch_with({{"PMIX_RANK", "3"}, {"SLURM_LOCALID", "x"}}).local_rank, -1);
}

TEST(MakeCommunicator, GpuRanksTakeTheirLocalRanksGpu) {
  const Launch none = launch_with({});
  const Launch two =
      launch_with({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(rank_gpu("cpu", two), -1);
  EXPECT_EQ(rank_gpu("meta", none), -1);
  EXPECT_EQ(rank_gpu("cuda", none), 0);
  EXPECT_EQ(rank_gpu("cuda:3", none), 3);
  EXPECT_EQ(rank_gpu("cuda", two), 1);    // one GPU per rank of the machine
  EXPECT_EQ(rank_gpu("cuda:0", two), 0);  // named: as given (NCCL refuses a shared GPU)
  EXPECT_EQ(rank_gpu("cuda", launch_with({{"OMPI_COMM_WORLD_SIZE", "1"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}})),
            0);
}

// Every row of make_communicator.h's table, in builds with and without MPI and NCCL.
TEST(MakeCommunicator, ChoosesByDeviceAndDdpBackend) {
  const Launch none = launch_with({});
  const Launch two = launch_with({{"OMPI_COMM_WORLD_SIZE", "2"}});
  const Launch one = launch_with({{"OMPI_COMM_WORLD_SIZE", "1"}});
  const Placement cpu{-1, ""}, cpu_mpi{-1, "mpi"}, cpu_nccl{-1, "nccl"};
  const Placement gpu{0, ""}, gpu_mpi{0, "mpi"}, gpu_nccl{0, "nccl"};
  for (bool nccl : {false, true}) {
    EXPECT_EQ(choose(none, cpu, true, nccl), Choice::single);
    EXPECT_EQ(choose(two, cpu, true, nccl), Choice::mpi);
    EXPECT_EQ(choose(two, cpu_mpi, true, nccl), Choice::mpi);
    EXPECT_EQ(choose(two, cpu, false, nccl), Choice::refuse);
    EXPECT_EQ(choose(none, cpu_nccl, true, nccl), Choice::refuse);
    EXPECT_EQ(choose(two, gpu_mpi, true, nccl), Choice::refuse);
    EXPECT_EQ(choose(none, gpu, true, nccl), Choice::single);  // a GPU run of one process
  }
  EXPECT_EQ(choose(none, gpu_nccl, false, true), Choice::nccl);  // the world of one, no mpirun
  EXPECT_EQ(choose(none, gpu_nccl, false, false), Choice::refuse);
  EXPECT_EQ(choose(two, gpu, true, true), Choice::nccl);
  EXPECT_EQ(choose(two, gpu_nccl, true, true), Choice::nccl);
  EXPECT_EQ(choose(one, gpu, true, true), Choice::nccl);
  EXPECT_EQ(choose(two, gpu, false, true), Choice::refuse);  // no MPI to find each other
  EXPECT_EQ(choose(two, gpu, true, false), Choice::refuse);
  EXPECT_EQ(choose(one, gpu, false, false), Choice::single);
  EXPECT_EQ(choose(one, gpu_nccl, false, false), Choice::refuse);
}

TEST(MakeCommunicator, RefusalsNameTheFlagOrTheMissingPiece) {
  const Launch none = launch_with({});
  const Launch two = launch_with({{"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_TRUE(HasSubstr(refusal_message(none, {-1, "nccl"}, true, true),
                        "--ddp-backend nccl: NCCL sums GPU memory, and this run's ranks compute "
                        "on the CPU"));
  EXPECT_TRUE(HasSubstr(refusal_message(two, {1, "mpi"}, true, true),
                        "--ddp-backend mpi: the MPI communicator sums host memory, and this run's "
                        "ranks compute on cuda:1"));
  EXPECT_TRUE(HasSubstr(refusal_message(two, {0, ""}, true, false),
                        "launched by an MPI launcher (OMPI_COMM_WORLD_SIZE=2) with --device cuda, "
                        "but "));
  EXPECT_TRUE(HasSubstr(refusal_message(two, {0, ""}, false, true), "built without MPI"));
  EXPECT_TRUE(HasSubstr(refusal_message(two, {-1, ""}, false, true), "libopenmpi-dev"));
}

TEST(MakeCommunicator, ACpuRankAskingForNcclIsRefused) {
  EXPECT_TRUE(HasSubstr(
      error_message([] {
        make_communicator({}, [](const char*) -> const char* { return nullptr; }, {-1, "nccl"});
      }),
      "--ddp-backend nccl: NCCL sums GPU memory"));
}

TEST(CollectiveMessages, NameTheCollectiveAndTheRanksWaitedFor) {
  EXPECT_EQ(timeout_message("all_reduce_sum", 17, 0, 2, 2, {1}),
            "snug: rank 0 of 2: all_reduce_sum (collective 17) did not complete within "
            "--ddp-timeout 2 s: rank 1 did not arrive; ending the job");
  EXPECT_EQ(timeout_message("barrier", 3, 2, 4, 1800, {0, 3}),
            "snug: rank 2 of 4: barrier (collective 3) did not complete within --ddp-timeout "
            "1800 s: ranks 0, 3 did not arrive; ending the job");
  EXPECT_EQ(timeout_message("all_gather", 1, 0, 2, 0.5, {}),
            "snug: rank 0 of 2: all_gather (collective 1) did not complete within --ddp-timeout "
            "0.5 s: every rank's data arrived, yet the exchange did not complete; ending the job");
  EXPECT_EQ(collective_error_message("broadcast", 5, 1, 2, 0,
                                     "MPI_ERR_TRUNCATE: message "
                                     "truncated"),
            "rank 1 of 2: broadcast (collective 5) failed with rank 0: MPI_ERR_TRUNCATE: message "
            "truncated");
  EXPECT_EQ(collective_error_message("barrier", 2, 0, 3, -1, "x"),
            "rank 0 of 3: barrier (collective 2) failed: x");
}

}  // namespace make_communicator_test
}  // namespace
}  // namespace snug::dist
