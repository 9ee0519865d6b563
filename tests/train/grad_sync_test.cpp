// train/grad_sync.h: the bucketed gradient all-reduce of data parallelism, on one process with a
// stand-in communicator whose "sum" is over two identical ranks (each element doubled), so that
// every element's passage through the buckets shows.
#include "train/grad_sync.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "dist/meta_world.h"
#include "dist/single_process.h"
#include "kernels/backends.h"

namespace snug {
namespace {
namespace grad_sync_test {

// Rank 0 of two: its peer holds the same data (a sum doubles each element) or, given `peer`,
// that value in every element; counts what it was given.
class TwoRanks final : public dist::Communicator {
 public:
  TwoRanks() = default;
  explicit TwoRanks(float peer) : peer_(peer) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string_view name() const override { return "two-ranks"; }
  dist::Request start_all_reduce_sum(float* d, size_t n) override {
    for (size_t i = 0; i < n; ++i) d[i] += peer_ ? *peer_ : d[i];
    sizes.push_back(n);
    return {};
  }
  dist::Request start_all_reduce_sum(double*, size_t) override { return {}; }
  dist::Request start_all_reduce_sum(int64_t*, size_t) override { return {}; }
  dist::Request start_reduce_scatter_sum(const float*, float*, size_t) override { return {}; }
  dist::Request start_all_gather(const float*, float*, size_t) override { return {}; }
  dist::Request start_all_gather(const uint16_t*, uint16_t*, size_t) override { return {}; }
  dist::Request start_broadcast(void*, size_t, int) override { return {}; }
  dist::Request start_barrier() override { return {}; }
  void finish() override {}
  [[noreturn]] void abort(int, std::string_view) override { std::abort(); }
  std::vector<size_t> sizes;

 private:
  std::optional<float> peer_;
};

struct Params {
  explicit Params(Device& dev, const std::vector<int64_t>& sizes) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto p = std::make_unique<Parameter>();
      p->name = "p" + std::to_string(i);
      p->value = Tensor::zeros({sizes[i]}, DType::f32, Category::weights, dev);
      float* g = p->grad_for_accumulation();
      for (int64_t j = 0; j < sizes[i]; ++j) g[j] = static_cast<float>(100 * i + j);
      list.push_back(p.get());
      owned.push_back(std::move(p));
    }
  }
  std::vector<std::unique_ptr<Parameter>> owned;
  ParameterList list;
};

// 16-byte cap = 4 floats: gradients of 3, 5 and 2 elements (10) go last first as buckets of
// 4, 4 and 2, cutting across parameters; every element is doubled exactly once.
TEST(GradSync, BucketsCutAcrossParametersAndEveryElementIsSummedOnce) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  TwoRanks comm;
  const double cap_mb = 16.0 / (1024.0 * 1024.0);
  EXPECT_EQ(gradient_bucket_elements(ps.list, cap_mb), 4);
  const GradSyncStats st = all_reduce_gradients(ps.list, comm, cap_mb, dev);
  EXPECT_EQ(st.buckets, 3);
  EXPECT_EQ(st.bytes, 40);
  EXPECT_EQ(comm.sizes, (std::vector<size_t>{4, 4, 2}));
  for (size_t i = 0; i < ps.owned.size(); ++i)
    for (int64_t j = 0; j < ps.owned[i]->grad.numel(); ++j)
      EXPECT_EQ(ps.owned[i]->grad.data<float>()[j], 2.0f * static_cast<float>(100 * i + j));
  // The buckets were tracked as temporary (two at most: one reduced while one fills), and are
  // gone.
  const MemoryStats m = dev.pool().stats();
  EXPECT_EQ(m.max_by_category[static_cast<size_t>(Category::temporary)], 32);
  EXPECT_EQ(m.live[static_cast<size_t>(Category::temporary)], 0);
}

// Handed over during backward (first p1, then p0), the rest after: p1's gradient starts the
// first bucket, a bucket is started when full while p0 comes, and finish() adds p2 (never handed
// over) and reduces the partial bucket; a hand-over twice is refused.
TEST(GradSync, HandedOverDuringBackwardThenFinished) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  TwoRanks comm;
  GradientBuckets buckets(ps.list, comm, 16.0 / (1024.0 * 1024.0), dev);
  buckets.add(*ps.owned[1]);
  EXPECT_EQ(comm.sizes, (std::vector<size_t>{4}));  // started while "backward" goes on
  EXPECT_THROW(buckets.add(*ps.owned[1]), Error);
  buckets.add(*ps.owned[0]);
  EXPECT_EQ(comm.sizes, (std::vector<size_t>{4, 4}));
  const GradSyncStats st = buckets.finish();
  EXPECT_EQ(st.buckets, 3);
  EXPECT_EQ(comm.sizes, (std::vector<size_t>{4, 4, 2}));
  for (size_t i = 0; i < ps.owned.size(); ++i)
    for (int64_t j = 0; j < ps.owned[i]->grad.numel(); ++j)
      EXPECT_EQ(ps.owned[i]->grad.data<float>()[j], 2.0f * static_cast<float>(100 * i + j));
  // Two buckets at most existed (the third reused the first), and none is left.
  EXPECT_EQ(dev.pool().stats().max_by_category[static_cast<size_t>(Category::temporary)], 32);
  EXPECT_EQ(dev.pool().stats().live[static_cast<size_t>(Category::temporary)], 0);
}

// The default cap holds small models whole; frozen parameters take no part.
TEST(GradSync, OneBucketOfTheTrainableGradientsUnderTheCap) {
  Device dev(cpu_backend());
  Params ps(dev, {6, 7});
  ps.owned[0]->requires_grad = false;
  EXPECT_EQ(gradient_bucket_elements(ps.list, kDefaultBucketCapMb), 7);
  TwoRanks comm;
  all_reduce_gradients(ps.list, comm, kDefaultBucketCapMb, dev);
  EXPECT_EQ(comm.sizes, (std::vector<size_t>{7}));
  EXPECT_EQ(ps.owned[0]->grad.data<float>()[1], 1.0f);  // frozen: untouched
  EXPECT_EQ(dev.pool().stats().max_by_category[static_cast<size_t>(Category::temporary)], 28);
}

// bf16 gradients (--bf16-full) are widened into the fp32 bucket, summed there and rounded back
// once, to nearest even: 1 + 1.5*2^-8 is not a bf16 value and goes up to 1 + 2^-7, where two
// bf16 additions would give the same only by luck; 256 + 1.5*2^-8 goes back to 256 (the bf16
// spacing there is 2); -3 + 1.5*2^-8 to -3. An fp32 gradient in the same bucket keeps every bit.
// The bucket is the fp32 run's: 4 bytes an element.
TEST(GradSync, BfloatGradientsAreSummedInFp32AndRoundedOnce) {
  Device dev(cpu_backend());
  Parameter h, f;
  h.name = "h";
  h.value = Tensor::zeros({3}, DType::bf16, Category::weights, dev);
  h.grad = Tensor::empty({3}, DType::bf16, Category::gradients, dev);
  const float hv[3] = {1.0f, 256.0f, -3.0f};
  for (int i = 0; i < 3; ++i) h.grad.data_u16()[i] = f32_to_bf16(hv[i]);
  f.name = "f";
  f.value = Tensor::zeros({2}, DType::f32, Category::weights, dev);
  f.grad_for_accumulation()[0] = 1.0f;
  f.grad.data<float>()[1] = 0.1f;
  const float peer = 0.005859375f;  // 1.5 * 2^-8, a bf16 value
  TwoRanks comm(peer);
  all_reduce_gradients({&h, &f}, comm, kDefaultBucketCapMb, dev);
  EXPECT_EQ(h.grad.dtype(), DType::bf16);
  EXPECT_EQ(bf16_to_f32(h.grad.data_u16()[0]), 1.0078125f);
  EXPECT_EQ(bf16_to_f32(h.grad.data_u16()[1]), 256.0f);
  EXPECT_EQ(bf16_to_f32(h.grad.data_u16()[2]), -3.0f);
  EXPECT_EQ(f.grad.data<float>()[0], 1.0f + peer);
  EXPECT_EQ(f.grad.data<float>()[1], 0.1f + peer);
  EXPECT_EQ(dev.pool().stats().max_by_category[static_cast<size_t>(Category::temporary)], 20);
}

// On meta the bucket is allocated (the plan counts it) and nothing moves.
TEST(GradSync, MetaAllocatesTheBucketOnly) {
  Device dev(meta_backend());
  Parameter p;
  p.name = "w";
  p.value = Tensor::zeros({1000}, DType::f32, Category::weights, dev);
  p.grad_for_accumulation();
  dist::MetaWorld world(0, 4);
  const GradSyncStats st = all_reduce_gradients({&p}, world, kDefaultBucketCapMb, dev);
  EXPECT_EQ(st.buckets, 0);
  EXPECT_EQ(dev.pool().stats().max_by_category[static_cast<size_t>(Category::temporary)], 4000);
}

TEST(MetaWorld, IsRankOfNAndRefusesRanksOutside) {
  dist::MetaWorld w(1, 3);
  EXPECT_EQ(w.rank(), 1);
  EXPECT_EQ(w.size(), 3);
  EXPECT_EQ(w.name(), "meta");
  EXPECT_THROW(dist::MetaWorld(3, 3), Error);
  EXPECT_THROW(dist::MetaWorld(0, 0), Error);
  EXPECT_THROW(w.broadcast(nullptr, 0, 3), Error);
}

}  // namespace grad_sync_test
}  // namespace
}  // namespace snug
