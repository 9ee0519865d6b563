#include "data/loader.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "core/device.h"
#include "core/error.h"
#include "kernels/backends.h"
#include "support/expect_error.h"

namespace snug {
namespace {
namespace loader_test {

using testing_data::error_message;
using testing_data::HasSubstr;

// Tokens 0, 1, 2, ...: each token's value is its position, so windows identify themselves.
InMemoryTokenSource iota_source(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return InMemoryTokenSource(std::move(t), "iota");
}

struct Batch {
  std::vector<int32_t> x, y;
  bool operator==(const Batch&) const = default;
};

Batch take(DataLoader& dl) {
  Batch b{std::vector<int32_t>(static_cast<size_t>(dl.batch_size() * dl.seq_len())),
          std::vector<int32_t>(static_cast<size_t>(dl.batch_size() * dl.seq_len()))};
  dl.next(b.x.data(), b.y.data());
  return b;
}

TEST(DataLoader, TargetsAreInputsShiftedByOne) {
  const InMemoryTokenSource src = iota_source(1000);
  DataLoader dl(src, 4, 16, 1);
  for (int step = 0; step < 10; ++step) {
    const Batch b = take(dl);
    for (int64_t r = 0; r < 4; ++r) {
      const int32_t start = b.x[static_cast<size_t>(r * 16)];
      EXPECT_EQ(start % 16, 0) << "windows start at multiples of T";
      for (int64_t t = 0; t < 16; ++t) {
        EXPECT_EQ(b.x[static_cast<size_t>(r * 16 + t)], start + t);
        EXPECT_EQ(b.y[static_cast<size_t>(r * 16 + t)], start + t + 1);
      }
    }
  }
}

TEST(DataLoader, DeterministicForSeedAndDifferentAcrossSeeds) {
  const InMemoryTokenSource src = iota_source(5000);
  DataLoader a(src, 3, 8, 42), b(src, 3, 8, 42), c(src, 3, 8, 43);
  bool differs = false;
  for (int i = 0; i < 20; ++i) {
    const Batch ba = take(a), bb = take(b), bc = take(c);
    EXPECT_EQ(ba, bb);
    differs = differs || !(ba == bc);
  }
  EXPECT_TRUE(differs);
}

TEST(DataLoader, EachWindowOncePerEpochAndEpochsReshuffle) {
  // 1 + 10*T + 5 tokens: W = 10 windows (the tail of 5 is unused); B = 3 does not divide W.
  const int64_t T = 8;
  const InMemoryTokenSource src = iota_source(1 + 10 * T + 5);
  DataLoader dl(src, 3, T, 9);
  EXPECT_EQ(dl.windows_per_epoch(), 10);
  EXPECT_EQ(dl.batches_per_epoch(), 4);
  std::vector<int64_t> seen;      // window ids in visiting order
  for (int i = 0; i < 10; ++i) {  // 30 windows = 3 epochs
    const Batch b = take(dl);
    for (int r = 0; r < 3; ++r) seen.push_back(b.x[static_cast<size_t>(r * T)] / T);
  }
  EXPECT_EQ(dl.epoch(), 3);
  EXPECT_EQ(dl.position(), 0);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    std::vector<int64_t> ep(seen.begin() + e * 10, seen.begin() + (e + 1) * 10);
    EXPECT_EQ(std::set<int64_t>(ep.begin(), ep.end()).size(), 10u) << "epoch " << e;
    for (int64_t w : ep) {
      EXPECT_GE(w, 0);
      EXPECT_LT(w, 10);
    }
    for (int64_t p = 0; p < 10; ++p) EXPECT_EQ(dl.window_at(e, p), ep[static_cast<size_t>(p)]);
    epochs.push_back(ep);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
}

TEST(DataLoader, PositionAndEpochAdvance) {
  const InMemoryTokenSource src = iota_source(1 + 5 * 4);  // W = 5
  DataLoader dl(src, 2, 4, 0);
  EXPECT_EQ(dl.epoch(), 0);
  EXPECT_EQ(dl.position(), 0);
  take(dl);
  EXPECT_EQ(dl.position(), 2);
  take(dl);
  EXPECT_EQ(dl.position(), 4);
  take(dl);  // crosses into epoch 1
  EXPECT_EQ(dl.epoch(), 1);
  EXPECT_EQ(dl.position(), 1);
}

TEST(DataLoader, SeekReproducesTheSequence) {
  const InMemoryTokenSource src = iota_source(3000);
  DataLoader ref(src, 4, 32, 5);
  std::vector<Batch> batches;
  std::vector<std::pair<int64_t, int64_t>> states;
  for (int i = 0; i < 60; ++i) {  // W = 93: spans epochs
    states.emplace_back(ref.epoch(), ref.position());
    batches.push_back(take(ref));
  }
  for (size_t k : {size_t{0}, size_t{7}, size_t{23}, size_t{24}, size_t{41}}) {
    DataLoader dl(src, 4, 32, 5);
    dl.seek(states[k].first, states[k].second);
    for (size_t i = k; i < batches.size(); ++i) ASSERT_EQ(take(dl), batches[i]) << k << " " << i;
  }
  // Seeking backwards in the same loader works too.
  ref.seek(states[3].first, states[3].second);
  EXPECT_EQ(take(ref), batches[3]);
}

TEST(DataLoader, TensorOverloadChecksShapeAndDtype) {
  const InMemoryTokenSource src = iota_source(500);
  Device dev(cpu_backend());
  DataLoader dl(src, 2, 8, 3), ref(src, 2, 8, 3);
  Tensor x = Tensor::empty({2, 8}, DType::i32, Category::input_data, dev);
  Tensor y = Tensor::empty({2, 8}, DType::i32, Category::input_data, dev);
  dl.next(x, y);
  const Batch b = take(ref);
  EXPECT_EQ(std::vector<int32_t>(x.data<int32_t>(), x.data<int32_t>() + 16), b.x);
  EXPECT_EQ(std::vector<int32_t>(y.data<int32_t>(), y.data<int32_t>() + 16), b.y);
  Tensor wrong = Tensor::empty({2, 9}, DType::i32, Category::input_data, dev);
  EXPECT_THROW(dl.next(wrong, y), Error);
  Tensor f = Tensor::empty({2, 8}, DType::f32, Category::input_data, dev);
  EXPECT_TRUE(HasSubstr(error_message([&] { dl.next(x, f); }), "i32"));
}

TEST(DataLoader, Errors) {
  const InMemoryTokenSource src = iota_source(64);
  EXPECT_THROW(DataLoader(src, 1, 64, 0), Error);
  const std::string msg = error_message([&] { DataLoader(src, 1, 64, 0); });
  EXPECT_TRUE(HasSubstr(msg, "64 tokens"));
  EXPECT_TRUE(HasSubstr(msg, "at least 65"));
  EXPECT_NO_THROW(DataLoader(src, 1, 63, 0));
  EXPECT_THROW(DataLoader(src, 0, 8, 0), Error);
  EXPECT_THROW(DataLoader(src, 1, 0, 0), Error);
  DataLoader dl(src, 2, 8, 0);  // W = 7
  EXPECT_THROW(dl.seek(0, 7), Error);
  EXPECT_THROW(dl.seek(-1, 0), Error);
  EXPECT_NO_THROW(dl.seek(5, 6));
}

TEST(DataLoader, WorksOnBuiltinAndDummy) {
  auto builtin = open_dataset("builtin", 256, 0);
  DataLoader a(*builtin, 8, 128, 0);
  EXPECT_EQ(a.windows_per_epoch(), (builtin->size() - 1) / 128);
  Batch b = take(a);
  for (int32_t t : b.x) EXPECT_LT(t, 128);
  auto dummy = open_dataset("dummy", 1000, 0);
  DataLoader d(*dummy, 4, 64, 0);
  b = take(d);
  for (int32_t t : b.y) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 1000);
  }
}

}  // namespace loader_test
}  // namespace
}  // namespace snug
