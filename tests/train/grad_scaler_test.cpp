// GradScaler follows torch.cuda.amp.GradScaler: 2^16 to start, x0.5 and a skipped step on
// inf/NaN, x2 after 2000 good steps in a row.
#include "train/grad_scaler.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/device.h"
#include "kernels/backends.h"
#include "nn/parameter.h"

namespace snug {
namespace {
namespace grad_scaler_test {

TEST(GradScaler, DefaultsAndScheduleAsPyTorch) {
  GradScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  s.update(true);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  for (int i = 0; i < 1000; ++i) s.update(false);
  s.update(true);  // an overflow resets the streak
  EXPECT_EQ(s.scale(), 32768.0);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 32768.0);
}

TEST(GradScaler, UnscalesAndDetectsInjectedInf) {
  Device dev(cpu_backend());
  Parameter p;
  p.name = "w";
  p.value = Tensor::zeros({4}, DType::f32, Category::weights, dev);
  float* g = p.grad_for_accumulation();
  for (int i = 0; i < 4; ++i) g[i] = 65536.0f * static_cast<float>(i + 1);
  GradScaler s;
  EXPECT_FALSE(s.unscale_and_check({&p}));
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(g[i], static_cast<float>(i + 1));
  g[2] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(s.unscale_and_check({&p}));
  g[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(s.unscale_and_check({&p}));
}

}  // namespace grad_scaler_test
}  // namespace
}  // namespace snug
