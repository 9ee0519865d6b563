// The world of one (dist/single_process.h): every collective leaves the bits as they were or
// copies the one slice, and the argument checks are the MPI communicator's.
#include "dist/single_process.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "support/compare.h"
#include "support/expect_error.h"

namespace snug::dist {
namespace {
namespace single_process_test {

using test::same_bits;

using testing_data::error_message;
using testing_data::HasSubstr;

// Values whose bits a careless copy or a "+ 0" would change: -0 (0 + -0 is +0), a NaN payload,
// a denormal.
std::vector<float> awkward_floats() {
  float nan_payload;
  const uint32_t bits = 0x7fc01234u;
  std::memcpy(&nan_payload, &bits, 4);
  return {-0.0f, nan_payload, std::numeric_limits<float>::denorm_min(), 1.5f, -3.25e30f};
}

TEST(SingleProcess, IsTheWorldOfOne) {
  SingleProcess comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.name(), "single");
}

TEST(SingleProcess, AllReduceSumLeavesEveryBit) {
  SingleProcess comm;
  std::vector<float> f = awkward_floats();
  comm.all_reduce_sum(f.data(), f.size());
  EXPECT_TRUE(same_bits(f, awkward_floats()));
  std::vector<double> d = {-0.0, 1e300, 2.5};
  comm.all_reduce_sum(d.data(), d.size());
  EXPECT_TRUE(std::signbit(d[0]));
  EXPECT_EQ(d[1], 1e300);
  std::vector<int64_t> i = {std::numeric_limits<int64_t>::min(), 7};
  comm.all_reduce_sum(i.data(), i.size());
  EXPECT_EQ(i[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i[1], 7);
}

TEST(SingleProcess, ReduceScatterAndAllGatherCopyTheOneSlice) {
  SingleProcess comm;
  const std::vector<float> in = awkward_floats();
  std::vector<float> out(in.size(), 9.0f);
  comm.reduce_scatter_sum(in.data(), out.data(), in.size());
  EXPECT_TRUE(same_bits(out, in));
  std::vector<float> gathered(in.size(), 9.0f);
  comm.all_gather(in.data(), gathered.data(), in.size());
  EXPECT_TRUE(same_bits(gathered, in));
  // In place: out is in + rank*shard = in.
  std::vector<float> same = awkward_floats();
  comm.reduce_scatter_sum(same.data(), same.data(), same.size());
  comm.all_gather(same.data(), same.data(), same.size());
  EXPECT_TRUE(same_bits(same, in));
  // Shard 0: nothing to copy, nothing read.
  comm.reduce_scatter_sum(nullptr, nullptr, 0);
  comm.all_gather(static_cast<const float*>(nullptr), static_cast<float*>(nullptr), 0);
}

// Several all-gathers as one: each part's one slice copied (the default: each part's own
// all-gather, complete together).
TEST(SingleProcess, AllGatherManyCopiesEachPart) {
  SingleProcess comm;
  const std::vector<float> a = {1.5f, -2.0f}, b = {3.0f};
  std::vector<float> ga(2), gb(1);
  Request r = comm.start_all_gather_many(
      std::vector<GatherPart<float>>{{a.data(), ga.data(), 2}, {b.data(), gb.data(), 1}});
  r.wait();
  EXPECT_EQ(ga, a);
  EXPECT_EQ(gb, b);
}

// 16-bit elements (bf16 weights' bits) are moved as they are, NaN payloads included.
TEST(SingleProcess, AllGatherOfSixteenBitElementsCopiesTheBits) {
  SingleProcess comm;
  const std::vector<uint16_t> in = {0x0000, 0x8000, 0x3F80, 0x7FC1, 0xFF81, 0x0001};
  std::vector<uint16_t> out(in.size(), 0x1234);
  comm.all_gather(in.data(), out.data(), in.size());
  EXPECT_EQ(out, in);
  comm.all_gather(out.data(), out.data(), out.size());
  EXPECT_EQ(out, in);
  EXPECT_TRUE(HasSubstr(error_message([&] { comm.all_gather(out.data() + 1, out.data(), 4); }),
                        "all_gather: the input overlaps the output other than at this rank's "
                        "slice 0"));
}

TEST(SingleProcess, BroadcastFromRankZeroAndBarrier) {
  SingleProcess comm;
  char text[] = "unchanged";
  comm.broadcast(text, sizeof text, 0);
  EXPECT_STREQ(text, "unchanged");
  comm.barrier();
}

TEST(SingleProcess, EveryStartedCollectiveIsAlreadyComplete) {
  SingleProcess comm;
  float x = 2.0f;
  float y = 0.0f;
  Request a = comm.start_all_reduce_sum(&x, 1);
  Request b = comm.start_all_gather(&x, &y, 1);
  EXPECT_TRUE(a.done());
  EXPECT_TRUE(a.test());
  EXPECT_TRUE(b.done());
  b.wait();
  EXPECT_EQ(x, 2.0f);
  EXPECT_EQ(y, 2.0f);
  EXPECT_TRUE(comm.start_barrier().done());
}

TEST(SingleProcess, RefusesARootThatIsNotARank) {
  SingleProcess comm;
  char c = 0;
  const std::string m = error_message([&] { comm.broadcast(&c, 1, 1); });
  EXPECT_TRUE(HasSubstr(m, "broadcast: root rank 1 is not a rank of this world of 1 (0..0)"));
  EXPECT_TRUE(HasSubstr(error_message([&] { comm.broadcast(&c, 1, -1); }), "root rank -1"));
}

TEST(SingleProcess, RefusesOverlappingBuffersOtherThanInPlace) {
  SingleProcess comm;
  std::vector<float> buf(8);
  // out overlaps in (4 elements) but is not in + 0.
  EXPECT_TRUE(HasSubstr(
      error_message([&] { comm.reduce_scatter_sum(buf.data(), buf.data() + 2, 4); }),
      "reduce_scatter_sum: the output overlaps the input other than at this rank's slice 0"));
  EXPECT_TRUE(HasSubstr(error_message([&] { comm.all_gather(buf.data() + 1, buf.data(), 4); }),
                        "all_gather: the input overlaps the output other than at this rank's "
                        "slice 0"));
}

}  // namespace single_process_test
}  // namespace
}  // namespace snug::dist
