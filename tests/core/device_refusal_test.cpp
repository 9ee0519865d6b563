// A device that refuses memory (a full GPU) stops the run with snug's budget report, as a
// --device-memory capacity does, not with the device library's error (issue 27 step 2).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "core/backend.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/backends.h"

namespace snug {
namespace {
namespace device_refusal_test {

// cpu memory up to a byte limit, then refusals (nullptr), as a full GPU's allocator.
class FullAfter final : public Backend {
 public:
  explicit FullAfter(int64_t limit) : limit_(limit) {}
  const char* name() const override { return "cuda"; }
  bool backed() const override { return true; }
  bool host_addressable() const override { return false; }
  void* allocate(int64_t bytes) const override {
    if (used_ + bytes > limit_) return nullptr;
    used_ += bytes;
    return host_allocate(bytes);
  }
  void release(void* p, int64_t bytes) const override {
    used_ -= bytes;
    host_release(p, bytes);
  }
  void zero(void*, int64_t) const override {}
  void upload(void*, const void*, int64_t) const override {}
  void download(void*, const void*, int64_t) const override {}
  void copy(void*, const void*, int64_t) const override {}
  const OpTable& ops() const override { return cpu_backend().ops(); }

 private:
  int64_t limit_;
  mutable int64_t used_ = 0;
};

TEST(DeviceRefusal, GivesTheBudgetReportAndKeepsTheAccountsStraight) {
  const FullAfter full(1000);
  Device dev(full);
  dev.pool().set_phase("forward h.3");
  const Tensor kept = Tensor::empty({200}, DType::f32, Category::weights, dev);  // 800 bytes
  try {
    (void)Tensor::empty({100}, DType::f32, Category::activations, dev);
    FAIL() << "no error";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    EXPECT_THAT(m, ::testing::StartsWith("out of memory: tried to allocate 400 B (400 bytes) for "
                                         "activations during 'forward h.3'; 800 B already in use, "
                                         "and the cuda refused more"));
    EXPECT_THAT(m, ::testing::HasSubstr("\n  live by category:\n    weights: 800 B"));
    EXPECT_THAT(m, ::testing::HasSubstr("hint: the same command with --device meta"));
  }
  // The refused bytes are not counted.
  EXPECT_EQ(dev.pool().live_total(), 800);
  EXPECT_EQ(dev.pool().stats().peak_total, 800);
}

}  // namespace device_refusal_test
}  // namespace
}  // namespace snug
