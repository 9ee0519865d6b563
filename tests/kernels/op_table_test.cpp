// The per-device op table (kernels/op_table.h): every entry of the fast and ref tables is the
// namespace's own function, the meta table touches no memory and returns 0, and a Device
// carries the table of its kind.
#include "kernels/op_table.h"

#include <gtest/gtest.h>

#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/backends.h"

namespace snug {
namespace {

TEST(OpTable, FastAndRefEntriesAreTheNamespacesFunctions) {
  const OpTable& fast = fast_op_table();
  const OpTable& ref = ref_op_table();
  int n = 0;
#define SNUG_OP(ret, name, params)                          \
  EXPECT_EQ(fast.name, &kernels::name) << #name;            \
  EXPECT_EQ(ref.name, &ref::name) << #name;                 \
  EXPECT_NE(meta_op_table().name, nullptr) << #name;        \
  EXPECT_NE(meta_op_table().name, &kernels::name) << #name; \
  ++n;
#include "kernels/flash_ops.inc"
#include "kernels/lm_head_ops.inc"
#include "kernels/ops.inc"
#include "kernels/optim_ops.inc"
#include "kernels/quant_ops.inc"
#undef SNUG_OP
  EXPECT_GT(n, 30);
  EXPECT_STREQ(fast.impl, "fast");
  EXPECT_STREQ(ref.impl, "ref");
  EXPECT_STREQ(meta_op_table().impl, "meta");
}

// Calls op with value-initialized arguments (null pointers, zero sizes): a meta op that
// dereferenced anything would crash here. Returns the op's result (0 expected).
template <typename R, typename... A>
double call_with_nulls(R (*op)(A...)) {
  if constexpr (std::is_void_v<R>) {
    op(A{}...);
    return 0.0;
  } else {
    return static_cast<double>(op(A{}...));
  }
}

TEST(OpTable, MetaOpsTouchNothingAndReturnZero) {
  const OpTable& meta = meta_op_table();
#define SNUG_OP(ret, name, params) EXPECT_EQ(call_with_nulls(meta.name), 0.0) << #name;
#include "kernels/flash_ops.inc"
#include "kernels/lm_head_ops.inc"
#include "kernels/ops.inc"
#include "kernels/optim_ops.inc"
#include "kernels/quant_ops.inc"
#undef SNUG_OP
  // With real buffers and sizes the outputs keep their sentinel values.
  std::vector<float> a(16, 1.0f), b(16, 2.0f), c(16, -7.0f);
  meta.gemm_f32(false, false, 4, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4);
  for (float x : c) EXPECT_EQ(x, -7.0f);
  std::vector<float> probs(8, -3.0f), losses(2, -3.0f);
  const std::vector<int32_t> targets = {1, 2};
  EXPECT_EQ(meta.softmax_xent_forward(losses.data(), probs.data(), a.data(), targets.data(), 2, 4),
            0.0);
  for (float x : probs) EXPECT_EQ(x, -3.0f);
  for (float x : losses) EXPECT_EQ(x, -3.0f);
  EXPECT_EQ(meta.sum_squares(a.data(), 16), 0.0);
}

TEST(OpTable, DeviceCarriesTheTableOfItsKind) {
  Device cpu(cpu_backend());
  Device meta(meta_backend());
  Device cpu_ref(cpu_backend(), &ref_op_table());
  EXPECT_EQ(&cpu.ops(), &fast_op_table());
  EXPECT_EQ(&meta.ops(), &meta_op_table());
  EXPECT_EQ(&cpu_ref.ops(), &ref_op_table());
  EXPECT_THROW(Device(meta_backend(), &fast_op_table()), Error);
}

}  // namespace
}  // namespace snug
