// A Device is its Backend (core/backend.h, kernels/backends.h): the allocator, the copies and the
// op table. The cpu backend's copies and zeroing, meta's no-ops, and host staging
// (core/host_staging.h) on a device the host does not address: a stand-in accelerator whose bytes
// live on the host heap but which says the host may not touch them, so every host-side path must
// go through its upload and download (counted here) and a host pool of its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/host_staging.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/op_table.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace backend_test {

// An accelerator as the rest of snug sees one: host_addressable() is false. Its memory is host
// heap so the fast kernels can still run on it; transfers are counted.
class StandInAccelerator final : public Backend {
 public:
  const char* name() const override { return "stand-in"; }
  bool backed() const override { return true; }
  bool host_addressable() const override { return false; }
  void* allocate(int64_t bytes) const override { return host_allocate(bytes); }
  void release(void* p, int64_t bytes) const override { host_release(p, bytes); }
  void zero(void* dst, int64_t bytes) const override {
    ++zeros;
    std::memset(dst, 0, static_cast<size_t>(bytes));
  }
  void upload(void* dst, const void* src, int64_t bytes) const override {
    ++uploads;
    std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  void download(void* dst, const void* src, int64_t bytes) const override {
    ++downloads;
    std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  void copy(void* dst, const void* src, int64_t bytes) const override {
    ++copies;
    std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  const OpTable& ops() const override { return fast_op_table(); }
  mutable int zeros = 0, uploads = 0, downloads = 0, copies = 0;
};

TEST(Backend, CpuCopiesAndZeroing) {
  Device dev(cpu_backend());
  EXPECT_STREQ(dev.name(), "cpu");
  EXPECT_TRUE(dev.host_addressable());
  EXPECT_EQ(&dev.host(), &dev);  // staging is counted in the device's own pool
  EXPECT_EQ(&dev.ops(), &fast_op_table());
  const std::vector<float> src = {1.5f, -2.0f, 3.25f, 4.0f};
  Tensor a = Tensor::empty({4}, DType::f32, Category::temporary, dev);
  Tensor b = Tensor::empty({4}, DType::f32, Category::temporary, dev);
  dev.upload(a.data<float>(), src.data(), 4);
  dev.copy(b.data<float>(), a.data<float>(), 4);
  std::vector<float> back(4, 0.0f);
  dev.download(back.data(), b.data<float>(), 4);
  EXPECT_EQ(back, src);
  b.slice_rows(1, 3).zero_();
  dev.download(back.data(), b.data<float>(), 4);
  EXPECT_EQ(back, (std::vector<float>{1.5f, 0.0f, 0.0f, 4.0f}));
  const Tensor z = Tensor::zeros({3}, DType::i32, Category::temporary, dev);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(z.data<int32_t>()[i], 0);
}

TEST(Backend, MetaAllocatesNothingAndCopiesNothing) {
  Device dev(meta_backend());
  EXPECT_TRUE(dev.is_meta());
  EXPECT_STREQ(dev.name(), "meta");
  EXPECT_EQ(&dev.ops(), &meta_op_table());
  Tensor t = Tensor::zeros({8}, DType::f32, Category::activations, dev);
  EXPECT_EQ(t.raw(), nullptr);
  EXPECT_EQ(dev.pool().live(Category::activations), 32);
  std::vector<float> host(8, 7.0f);
  dev.upload(t.data<float>(), host.data(), 8);
  dev.download(host.data(), t.data<float>(), 8);  // leaves the host values as they were
  for (float x : host) EXPECT_EQ(x, 7.0f);
  const HostStaging h(t, HostStaging::Use::read);
  EXPECT_EQ(h.raw(), nullptr);
  EXPECT_EQ(dev.pool().stats().alloc_count, 1);  // staging allocates nothing on meta
}

TEST(Backend, NamedByTheDeviceFlag) {
  EXPECT_EQ(&backend_named("cpu"), &cpu_backend());
  EXPECT_EQ(&backend_named("meta"), &meta_backend());
  try {
    backend_named("gpu");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown device 'gpu' (expected cpu, cuda, cuda:N or meta)");
  }
  EXPECT_EQ(&backend_named("cpu-remote"), &cpu_remote_backend());
  EXPECT_EQ(cuda_index("cuda"), 0);
  EXPECT_EQ(cuda_index("cuda:3"), 3);
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "cuda:12345", "cudax"}) {
    EXPECT_FALSE(cuda_index(bad).has_value()) << bad;
    EXPECT_FALSE(is_device_name(bad)) << bad;
  }
  // Without a GPU (or a CUDA build) the name is known but refused with the reason.
  if (cuda_device_count() == 0) {
    try {
      backend_named("cuda:1");
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::StartsWith("--device cuda: "));
    }
  }
}

TEST(HostStaging, IsTheTensorItselfOnCpu) {
  Device dev(cpu_backend());
  const Tensor t = Tensor::zeros({5}, DType::f32, Category::weights, dev);
  const HostStaging h(t, HostStaging::Use::read_write);
  EXPECT_EQ(h.raw(), t.raw());
  EXPECT_EQ(dev.pool().stats().alloc_count, 1);
}

TEST(HostStaging, GoesThroughTheHostPoolOnAnAccelerator) {
  const StandInAccelerator acc;
  Device dev(acc), host(cpu_backend());
  dev.set_host(host);
  EXPECT_FALSE(dev.host_addressable());
  const std::vector<float> v = {1, 2, 3};
  Tensor t = Tensor::empty({3}, DType::f32, Category::weights, dev);
  dev.upload(t.data<float>(), v.data(), 3);
  {
    const HostStaging r(t, HostStaging::Use::read);
    EXPECT_NE(r.raw(), t.raw());
    EXPECT_EQ(acc.downloads, 1);
    EXPECT_EQ(std::vector<float>(r.data<float>(), r.data<float>() + 3), v);
    // Counted in the host pool under the tensor's category; the device's pool is unchanged.
    EXPECT_EQ(host.pool().live(Category::weights), 12);
    EXPECT_EQ(dev.pool().live_total(), 12);
  }
  EXPECT_EQ(host.pool().live_total(), 0);
  {
    const HostStaging w(t, HostStaging::Use::write);
    EXPECT_EQ(acc.downloads, 1);  // written, not read
    for (int i = 0; i < 3; ++i) w.data<float>()[i] = 10.0f + static_cast<float>(i);
    w.upload();
  }
  std::vector<float> back(3);
  dev.download(back.data(), t.data<float>(), 3);
  EXPECT_EQ(back, (std::vector<float>{10, 11, 12}));
  t.zero_();
  EXPECT_EQ(acc.zeros, 1);
}

TEST(HostStaging, SafetensorsReadAndWriteAnAcceleratorsTensors) {
  test::TempDir tmp;
  const std::string path = tmp.path("w.safetensors");
  const StandInAccelerator acc;
  Device dev(acc), host(cpu_backend());
  dev.set_host(host);
  const std::vector<float> v = {0.5f, -1.0f, 2.0f, 8.0f, 3.0f, -0.25f};
  Tensor t = Tensor::empty({2, 3}, DType::f32, Category::weights, dev);
  dev.upload(t.data<float>(), v.data(), 6);
  save_safetensors(path, {{"w", &t}});
  EXPECT_EQ(acc.downloads, 1);
  Tensor bf = Tensor::empty({2, 3}, DType::bf16, Category::weights, dev);
  const SafetensorsFile f(path);
  f.read_into("w", bf);  // converted on the host, then uploaded
  EXPECT_EQ(acc.uploads, 2);
  check_finite(bf, path, "w");
  std::vector<uint16_t> bits(6);
  dev.download(bits.data(), bf.data_u16(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(bf16_to_f32(bits[i]), v[i]) << i;
  EXPECT_EQ(host.pool().live_total(), 0);
  EXPECT_GT(host.pool().stats().peak_total, 0);
}

}  // namespace backend_test
}  // namespace
}  // namespace snug
