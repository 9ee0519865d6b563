// The NCCL communicator (dist/nccl_world.h) on a GPU, as far as one GPU can check it (issue 30's
// acceptance 5: NCCL refuses two ranks on one GPU): a world of one bootstrapped without mpirun.
// Its collectives give the known values for device and host buffers, in place and not, started
// and waited for; and `snug train --device cuda --ddp-backend nccl` gives the losses of the run
// without a communicator, step for step. Without a GPU or without libnccl.so.2 each test skips,
// naming why.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/nccl_world.h"
#include "support/gpu.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace nccl_cudatest {

using test::GpuBuffer;

#define SNUG_REQUIRE_NCCL(gpu)                                                       \
  SNUG_REQUIRE_GPU(gpu);                                                             \
  if (const std::string why = ::snug::dist::nccl_unavailable_reason(); !why.empty()) \
  GTEST_SKIP() << "no NCCL: " << why

std::vector<float> iota(size_t n, float from) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

TEST(NcclWorldOfOne, CollectivesGiveTheKnownValues) {
  SNUG_REQUIRE_NCCL(gpu);
  auto comm = dist::make_nccl_communicator({}, 0, nullptr);
  ASSERT_EQ(comm->name(), "nccl");
  ASSERT_EQ(comm->rank(), 0);
  ASSERT_EQ(comm->size(), 1);

  // Device buffers: a sum over one rank is the buffer itself; the flat layout's one slice.
  const std::vector<float> x = iota(1000, -3.5f);
  GpuBuffer<float> d(gpu, x);
  dist::Request r = comm->start_all_reduce_sum(d.get(), x.size());
  r.wait();
  EXPECT_TRUE(r.done());
  EXPECT_EQ(d.host(), x);
  GpuBuffer<double> dd(gpu, std::vector<double>{1.25, -2.5, 1e300});
  comm->all_reduce_sum(dd.get(), 3);
  EXPECT_EQ(dd.host(), (std::vector<double>{1.25, -2.5, 1e300}));
  GpuBuffer<int64_t> di(gpu, std::vector<int64_t>{int64_t{1} << 40, -7});
  comm->all_reduce_sum(di.get(), 2);
  EXPECT_EQ(di.host(), (std::vector<int64_t>{int64_t{1} << 40, -7}));

  GpuBuffer<float> out(gpu, static_cast<int64_t>(x.size()));  // poisoned
  comm->reduce_scatter_sum(d.get(), out.get(), x.size());
  EXPECT_EQ(out.host(), x);
  comm->reduce_scatter_sum(d.get(), d.get(), x.size());  // in place: out == in + 0*shard
  EXPECT_EQ(d.host(), x);
  GpuBuffer<float> gathered(gpu, static_cast<int64_t>(x.size()));
  comm->all_gather(d.get(), gathered.get(), x.size());
  EXPECT_EQ(gathered.host(), x);
  comm->all_gather(gathered.get(), gathered.get(), x.size());  // in place
  EXPECT_EQ(gathered.host(), x);
  GpuBuffer<uint8_t> bytes(gpu, std::vector<uint8_t>{1, 2, 3, 250});
  comm->broadcast(bytes.get(), 4, 0);
  EXPECT_EQ(bytes.host(), (std::vector<uint8_t>{1, 2, 3, 250}));
  comm->barrier();

  // Several in flight, completed out of order by test() and wait().
  GpuBuffer<float> a(gpu, iota(5000, 1.0f)), b(gpu, iota(7, 2.0f));
  dist::Request ra = comm->start_all_reduce_sum(a.get(), 5000);
  dist::Request rb = comm->start_all_reduce_sum(b.get(), 7);
  rb.wait();
  while (!ra.test()) {
  }
  EXPECT_EQ(a.host(), iota(5000, 1.0f));
  EXPECT_EQ(b.host(), iota(7, 2.0f));

  // Host buffers (the trainer's scalars, the job id) are staged and complete at once.
  int64_t targets = 1234;
  double loss = 0.75;
  comm->all_reduce_sum(&targets, 1);
  comm->all_reduce_sum(&loss, 1);
  EXPECT_EQ(targets, 1234);
  EXPECT_EQ(loss, 0.75);
  std::vector<float> hx = x, hout(x.size(), -1.0f);
  comm->reduce_scatter_sum(hx.data(), hout.data(), hx.size());
  EXPECT_EQ(hout, x);
  std::vector<float> hg(x.size(), -1.0f);
  comm->all_gather(hx.data(), hg.data(), hx.size());
  EXPECT_EQ(hg, x);
  char id[16] = "job 42";
  comm->broadcast(id, sizeof id, 0);
  EXPECT_STREQ(id, "job 42");

  // The argument checks are the other communicators'.
  EXPECT_THROW(comm->broadcast(id, sizeof id, 1), Error);
  EXPECT_THROW(comm->reduce_scatter_sum(hx.data(), hx.data() + 1, 4), Error);
  comm->finish();
  EXPECT_THROW(comm->barrier(), Error);
}

std::vector<double> losses_of(const std::string& flags, const std::string& report) {
  const test::CliResult r = test::run_snug(flags + " --report-json " + report, 600);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return {};
  return nlohmann::json::parse(test::slurp(report))["loss"].get<std::vector<double>>();
}

TEST(NcclWorldOfOne, TrainingGivesTheLossesOfNoCommunicator) {
  SNUG_REQUIRE_NCCL(gpu);
  test::TempDir dir;
  const std::string flags =
      "train --device cuda --model gpt2-tiny --data builtin --seq-len 64 "
      "--per-device-train-batch-size 4 --max-steps 5 --seed 7";
  const std::vector<double> plain = losses_of(flags, dir.path("plain.json"));
  const test::CliResult nccl =
      test::run_snug(flags + " --ddp-backend nccl --report-json " + dir.path("nccl.json"), 600);
  ASSERT_EQ(nccl.exit_code, 0) << nccl.err;
  EXPECT_NE(nccl.out.find("per rank of 1 (nccl)"), std::string::npos) << nccl.out;
  const auto with_nccl =
      nlohmann::json::parse(test::slurp(dir.path("nccl.json")))["loss"].get<std::vector<double>>();
  ASSERT_EQ(plain.size(), 5u);
  EXPECT_EQ(with_nccl, plain);  // bit for bit: a world of one sums nothing
}

}  // namespace nccl_cudatest
}  // namespace
}  // namespace snug
