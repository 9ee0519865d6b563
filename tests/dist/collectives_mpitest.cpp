// The MPI communicator on N ranks (run_mpi.sh runs this binary under mpirun -np 2 and -np 3):
// every collective against the documented order, computed here on each rank by a plain loop, and
// the same bits on every rank. Each rank's inputs are a function of (rank, index) that every rank
// can evaluate: every mantissa bit used, magnitudes 2^-4..2^5 and both signs, so that sums over
// three or more ranks depend on their order (checked: the reverse order differs often).
//
// Every rank runs every collective whatever its assertions say (EXPECT, never ASSERT, after the
// first collective), so a failure on one rank does not leave the others waiting.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/make_communicator.h"
#include "dist/mpi_test_world.h"
#include "dist/mpi_world.h"

namespace snug::dist {
namespace {

using testing_mpi::world;

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

// Rank r's element i of a test buffer (`salt` tells tests apart).
double value(int r, size_t i, uint64_t salt) {
  const uint64_t h = mix((static_cast<uint64_t>(r) << 40) ^ (i * 2654435761ULL) ^ (salt << 56));
  const double mantissa = 1.0 + std::ldexp(static_cast<double>(h & ((1ULL << 52) - 1)), -52);
  const int exponent = static_cast<int>((h >> 52) % 9) - 4;
  return std::ldexp((h >> 63) != 0 ? -mantissa : mantissa, exponent);
}

template <typename T>
T input(int r, size_t i, uint64_t salt) {
  if constexpr (std::is_same_v<T, int64_t>)
    return static_cast<int64_t>(mix(static_cast<uint64_t>(r) * 1000003u + i + salt) >> 5) -
           (INT64_C(1) << 58);  // |x| < 2^58: no overflow in a sum over 16 ranks
  else
    return static_cast<T>(value(r, i, salt));
}

// The documented order: x_0 + x_1 + ... + x_{N-1}, left to right, in T.
template <typename T>
T rank_order_sum(int size, size_t i, uint64_t salt) {
  T s = input<T>(0, i, salt);
  for (int r = 1; r < size; ++r) s += input<T>(r, i, salt);
  return s;
}
template <typename T>
T reverse_order_sum(int size, size_t i, uint64_t salt) {
  T s = input<T>(size - 1, i, salt);
  for (int r = size - 2; r >= 0; --r) s += input<T>(r, i, salt);
  return s;
}

template <typename T>
size_t mismatches(const std::vector<T>& got, const std::vector<T>& want) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    bad += std::memcmp(&got[i], &want[i], sizeof(T)) != 0 ? 1 : 0;
  return bad;
}

// Every rank's `mine` equals rank 0's, bit for bit (a broadcast of rank 0's bytes).
template <typename T>
bool same_on_every_rank(const std::vector<T>& mine) {
  std::vector<T> zeros = mine;
  world().broadcast(zeros.data(), zeros.size() * sizeof(T), 0);
  int64_t differs = mismatches(mine, zeros) != 0 ? 1 : 0;
  world().all_reduce_sum(&differs, 1);
  return differs == 0;
}

// Sizes: empty, fewer elements than ranks, uneven chunks, several blocks of the accumulator.
const size_t kSizes[] = {0, 1, 2, 1000, 1037, 4099};

template <typename T>
void check_all_reduce(Communicator& comm, uint64_t salt) {
  const int r = comm.rank(), size = comm.size();
  for (size_t n : kSizes) {
    std::vector<T> data(n), want(n);
    size_t order_matters = 0;
    for (size_t i = 0; i < n; ++i) {
      data[i] = input<T>(r, i, salt);
      want[i] = rank_order_sum<T>(size, i, salt);
      order_matters += want[i] != reverse_order_sum<T>(size, i, salt) ? 1 : 0;
    }
    comm.all_reduce_sum(data.data(), n);
    EXPECT_EQ(mismatches(data, want), 0u) << "n = " << n << " on rank " << r;
    EXPECT_TRUE(same_on_every_rank(data)) << "n = " << n;
    // The test's teeth: with three ranks or more the order changes many float sums.
    if (std::is_floating_point_v<T> && size >= 3 && n >= 1000) {
      EXPECT_GT(order_matters, n / 20);
    }
  }
}

TEST(MpiCommunicator, IsTheWorld) {
  EXPECT_EQ(world().name(), "mpi");
  EXPECT_GE(world().size(), 2);
  EXPECT_LT(world().rank(), world().size());
  EXPECT_TRUE(mpi_built());
}

TEST(MpiCommunicator, AllReduceSumIsTheRankOrderSumOnEveryRank) {
  check_all_reduce<float>(world(), 1);
  check_all_reduce<double>(world(), 2);
  check_all_reduce<int64_t>(world(), 3);
}

TEST(MpiCommunicator, ReduceScatterSumGivesEachRankItsSliceSummedInRankOrder) {
  Communicator& comm = world();
  const int r = comm.rank(), size = comm.size();
  for (size_t shard : {size_t{0}, size_t{1}, size_t{333}, size_t{1500}}) {
    const size_t whole = shard * static_cast<size_t>(size);
    std::vector<float> in(whole), want(shard), out(shard, -7.0f);
    for (size_t i = 0; i < whole; ++i) in[i] = input<float>(r, i, 4);
    for (size_t i = 0; i < shard; ++i)
      want[i] = rank_order_sum<float>(size, static_cast<size_t>(r) * shard + i, 4);
    comm.reduce_scatter_sum(in.data(), out.data(), shard);
    EXPECT_EQ(mismatches(out, want), 0u) << "shard " << shard;
    // In place: this rank's slice of in becomes the sum.
    comm.reduce_scatter_sum(in.data(), in.data() + static_cast<size_t>(r) * shard, shard);
    const std::vector<float> mine(in.begin() + static_cast<std::ptrdiff_t>(r * shard),
                                  in.begin() + static_cast<std::ptrdiff_t>((r + 1) * shard));
    EXPECT_EQ(mismatches(mine, want), 0u) << "in place, shard " << shard;
  }
}

TEST(MpiCommunicator, AllGatherPutsRankJsShardAtSliceJ) {
  Communicator& comm = world();
  const int r = comm.rank(), size = comm.size();
  for (size_t shard : {size_t{0}, size_t{1}, size_t{257}}) {
    const size_t whole = shard * static_cast<size_t>(size);
    std::vector<float> mine(shard), want(whole), out(whole, -7.0f);
    for (size_t i = 0; i < shard; ++i) mine[i] = input<float>(r, i, 5);
    for (int j = 0; j < size; ++j)
      for (size_t i = 0; i < shard; ++i)
        want[static_cast<size_t>(j) * shard + i] = input<float>(j, i, 5);
    comm.all_gather(mine.data(), out.data(), shard);
    EXPECT_EQ(mismatches(out, want), 0u) << "shard " << shard;
    // In place: this rank's slice already holds its shard.
    std::vector<float> inplace(whole, -7.0f);
    std::copy(mine.begin(), mine.end(), inplace.begin() + static_cast<std::ptrdiff_t>(r * shard));
    comm.all_gather(inplace.data() + static_cast<size_t>(r) * shard, inplace.data(), shard);
    EXPECT_EQ(mismatches(inplace, want), 0u) << "in place, shard " << shard;
  }
}

// Several all-gathers as one collective (stage 3's block): each part's slice r is rank r's shard,
// for parts of 0, 1 and 257 elements, fp32 and 16-bit, one part in place.
TEST(MpiCommunicator, AllGatherManyGathersEveryPart) {
  Communicator& comm = world();
  const int r = comm.rank(), size = comm.size();
  const std::vector<size_t> shards = {257, 0, 1};
  std::vector<std::vector<float>> mine(3), out(3), want(3);
  std::vector<GatherPart<float>> parts;
  for (size_t k = 0; k < shards.size(); ++k) {
    const size_t s = shards[k];
    mine[k].resize(s);
    out[k].assign(s * static_cast<size_t>(size), -7.0f);
    want[k].resize(s * static_cast<size_t>(size));
    for (size_t i = 0; i < s; ++i) mine[k][i] = input<float>(r, i, 20 + static_cast<int>(k));
    for (int j = 0; j < size; ++j)
      for (size_t i = 0; i < s; ++i)
        want[k][static_cast<size_t>(j) * s + i] = input<float>(j, i, 20 + static_cast<int>(k));
  }
  // Part 2 in place: its shard already at this rank's slice.
  out[2][static_cast<size_t>(r)] = mine[2][0];
  for (size_t k = 0; k < shards.size(); ++k)
    parts.push_back({k == 2 ? out[2].data() + r : mine[k].data(), out[k].data(), shards[k]});
  comm.start_all_gather_many(parts).wait();
  for (size_t k = 0; k < shards.size(); ++k) EXPECT_EQ(mismatches(out[k], want[k]), 0u) << k;
  std::vector<uint16_t> a = {static_cast<uint16_t>(r), 7}, b = {static_cast<uint16_t>(100 + r)};
  std::vector<uint16_t> ga(2 * static_cast<size_t>(size)), gb(static_cast<size_t>(size));
  comm.start_all_gather_many(
          std::vector<GatherPart<uint16_t>>{{a.data(), ga.data(), 2}, {b.data(), gb.data(), 1}})
      .wait();
  for (int j = 0; j < size; ++j) {
    EXPECT_EQ(ga[2 * static_cast<size_t>(j)], j);
    EXPECT_EQ(ga[2 * static_cast<size_t>(j) + 1], 7);
    EXPECT_EQ(gb[static_cast<size_t>(j)], 100 + j);
  }
}

// 16-bit elements (ZeRO's bf16 weights): every rank's bits at its slice, bit for bit (the split
// into messages: LargeBuffersGoAsSeveralMessages).
TEST(MpiCommunicator, AllGatherOfSixteenBitElementsMovesTheBits) {
  Communicator& comm = world();
  const int r = comm.rank(), size = comm.size();
  for (size_t shard : {size_t{0}, size_t{3}, size_t{70001}}) {
    const size_t whole = shard * static_cast<size_t>(size);
    const auto bits = [](int rank, size_t i) {
      return static_cast<uint16_t>((rank * 40503u + i * 2654435761u) >> 7);
    };
    std::vector<uint16_t> mine(shard), want(whole), out(whole, 0xFFFF);
    for (size_t i = 0; i < shard; ++i) mine[i] = bits(r, i);
    for (int j = 0; j < size; ++j)
      for (size_t i = 0; i < shard; ++i) want[static_cast<size_t>(j) * shard + i] = bits(j, i);
    comm.all_gather(mine.data(), out.data(), shard);
    EXPECT_EQ(out, want) << "shard " << shard;
    std::vector<uint16_t> inplace(whole, 0xFFFF);
    std::copy(mine.begin(), mine.end(), inplace.begin() + static_cast<std::ptrdiff_t>(r * shard));
    comm.all_gather(inplace.data() + static_cast<size_t>(r) * shard, inplace.data(), shard);
    EXPECT_EQ(inplace, want) << "in place, shard " << shard;
  }
}

TEST(MpiCommunicator, BroadcastCopiesTheRootsBytes) {
  Communicator& comm = world();
  for (int root = 0; root < comm.size(); ++root) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{1001}}) {
      std::vector<unsigned char> data(bytes), want(bytes);
      for (size_t i = 0; i < bytes; ++i) {
        want[i] = static_cast<unsigned char>(mix(static_cast<uint64_t>(root) * 7919 + i));
        data[i] = comm.rank() == root ? want[i] : 0;
      }
      comm.broadcast(data.data(), bytes, root);
      EXPECT_EQ(data, want) << "root " << root << ", " << bytes << " bytes";
    }
  }
}

TEST(MpiCommunicator, BarrierCompletes) {
  for (int i = 0; i < 3; ++i) world().barrier();
  EXPECT_FALSE(world().start_barrier().done());  // waits in its destructor
}

// Buckets: several collectives in flight at once, advanced with test() while "backward" runs,
// waited for in another order than they were started; each gives what it gives alone.
TEST(MpiCommunicator, CollectivesInFlightTogetherDoNotMix) {
  Communicator& comm = world();
  const int r = comm.rank(), size = comm.size();
  const size_t n1 = 1037, n2 = 64, shard = 100;
  std::vector<float> a(n1), b(n2), in(shard * static_cast<size_t>(size)), out(shard);
  std::vector<double> c(3);
  for (size_t i = 0; i < n1; ++i) a[i] = input<float>(r, i, 6);
  for (size_t i = 0; i < n2; ++i) b[i] = input<float>(r, i, 7);
  for (size_t i = 0; i < in.size(); ++i) in[i] = input<float>(r, i, 8);
  for (size_t i = 0; i < c.size(); ++i) c[i] = input<double>(r, i, 9);
  Request ra = comm.start_all_reduce_sum(a.data(), n1);
  Request rb = comm.start_all_reduce_sum(b.data(), n2);
  Request rs = comm.start_reduce_scatter_sum(in.data(), out.data(), shard);
  Request rc = comm.start_all_reduce_sum(c.data(), c.size());
  for (int k = 0; k < 10; ++k) {
    ra.test();
    rb.test();
  }
  rc.wait();
  rs.wait();
  rb.wait();
  ra.wait();
  EXPECT_TRUE(ra.done() && rb.done() && rs.done() && rc.done());
  for (size_t i = 0; i < n1; ++i) EXPECT_EQ(a[i], rank_order_sum<float>(size, i, 6)) << i;
  for (size_t i = 0; i < n2; ++i) EXPECT_EQ(b[i], rank_order_sum<float>(size, i, 7)) << i;
  for (size_t i = 0; i < shard; ++i)
    EXPECT_EQ(out[i], rank_order_sum<float>(size, static_cast<size_t>(r) * shard + i, 8)) << i;
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], rank_order_sum<double>(size, i, 9)) << i;
}

// A buffer larger than the largest message goes as several messages, with the same bits. A
// second communicator (a duplicate of the world) with 16-byte messages: 4 floats each.
TEST(MpiCommunicator, LargeBuffersGoAsSeveralMessages) {
  CommOptions small;
  small.max_message_bytes = 16;
  small.timeout_s = 120;
  std::unique_ptr<Communicator> comm = make_communicator(small);
  check_all_reduce<float>(*comm, 10);
  check_all_reduce<double>(*comm, 11);
  std::vector<unsigned char> bytes(1001, comm->rank() == 1 ? 42 : 0);
  comm->broadcast(bytes.data(), bytes.size(), 1);
  EXPECT_EQ(bytes, std::vector<unsigned char>(1001, 42));
  // 16-bit elements: 8 to a message, a shard of 13 in two.
  std::vector<uint16_t> mine(13), out(13 * static_cast<size_t>(comm->size()));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<uint16_t>(1000 * comm->rank() + i);
  comm->all_gather(mine.data(), out.data(), mine.size());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], 1000 * (i / 13) + i % 13) << i;
  // Several parts in one collective, each split into messages of one tag: they land in order.
  std::vector<float> p0(9), p1(5);
  const auto value = [](size_t rank, size_t i, float sign) {
    return sign * static_cast<float>(100 * rank + i);
  };
  const auto me = static_cast<size_t>(comm->rank());
  for (size_t i = 0; i < p0.size(); ++i) p0[i] = value(me, i, 1.0f);
  for (size_t i = 0; i < p1.size(); ++i) p1[i] = value(me, i, -1.0f);
  const auto n = static_cast<size_t>(comm->size());
  std::vector<float> g0(9 * n), g1(5 * n);
  comm->start_all_gather_many(
          std::vector<GatherPart<float>>{{p0.data(), g0.data(), 9}, {p1.data(), g1.data(), 5}})
      .wait();
  for (size_t i = 0; i < g0.size(); ++i) EXPECT_EQ(g0[i], value(i / 9, i % 9, 1.0f)) << i;
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_EQ(g1[i], value(i / 5, i % 5, -1.0f)) << i;
  comm->finish();
}

TEST(MpiCommunicator, RefusesBadArgumentsOnEveryRankAlike) {
  Communicator& comm = world();
  char c = 0;
  try {
    comm.broadcast(&c, 1, comm.size());
    ADD_FAILURE() << "a root outside the world was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broadcast: root rank " + std::to_string(comm.size()) +
                                         " is not a rank of this world of " +
                                         std::to_string(comm.size())),
              std::string::npos)
        << e.what();
  }
  // The world still works: nothing was sent.
  int64_t one = 1;
  comm.all_reduce_sum(&one, 1);
  EXPECT_EQ(one, comm.size());
}

// --ddp-timeout takes any positive number: one beyond the clock's range means no timeout, not
// a deadline already past.
TEST(MpiCommunicator, AHugeTimeoutIsNoTimeout) {
  CommOptions forever;
  forever.timeout_s = 1e300;
  std::unique_ptr<Communicator> comm = make_communicator(forever);
  // Rank 0 comes late, so the others wait past their first poll.
  if (comm->rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  comm->barrier();
  int64_t one = 1;
  comm->all_reduce_sum(&one, 1);
  EXPECT_EQ(one, comm->size());
  comm->finish();
}

TEST(MpiCommunicator, TakesNoCollectiveAfterFinish) {
  std::unique_ptr<Communicator> comm = make_communicator({});
  comm->barrier();
  comm->finish();
  int64_t x = 0;
  try {
    comm->all_reduce_sum(&x, 1);
    ADD_FAILURE() << "a collective after finish() was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a collective after finish()"), std::string::npos);
  }
  // MPI itself is still up (the main's world holds it).
  world().barrier();
}

}  // namespace
}  // namespace snug::dist
