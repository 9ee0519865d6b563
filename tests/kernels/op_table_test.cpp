// The per-device op table (kernels/op_table.h): every entry of the fast and ref tables is the
// namespace's own function, the meta table touches no memory and returns 0, every op has an
// entry in every table unless it is marked host-only, and a Device carries its backend's table.
// The ops are walked through kernels/all_ops.inc, so a new op list is checked here unasked.
#include "kernels/op_table.h"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/backends.h"

namespace snug {
namespace {
namespace op_table_test {

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
#include "kernels/all_ops.inc"
#undef SNUG_OP
  EXPECT_GT(n, 70);
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
#include "kernels/all_ops.inc"
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

// Every table a backend can carry: a device runs an op through its table's entry, unless the op
// is host-only (its callers stage host copies and run the host function). An op with neither an
// entry nor the mark would be a null call on that device.
TEST(OpTable, EveryOpHasAnEntryOrIsMarkedHostOnly) {
  for (const OpTable* t : {&fast_op_table(), &ref_op_table(), &meta_op_table(),
                           &cpu_backend().ops(), &meta_backend().ops()}) {
    int entries = 0, host_only = 0;
#define SNUG_OP(ret, name, params)                                      \
  EXPECT_NE(t->name, nullptr) << t->impl << " has no entry for " #name; \
  ++entries;
#define SNUG_HOST_OP(ret, name, params) ++host_only;
#include "kernels/all_ops.inc"
#undef SNUG_HOST_OP
#undef SNUG_OP
    EXPECT_GT(entries, 70) << t->impl;
    EXPECT_EQ(host_only, 2) << t->impl;
  }
  // The marks themselves: the ops whose work needs host memory, and nothing else.
  EXPECT_EQ(host_only_ops(),
            (std::vector<std::string>{"galore_projector", "quantize_weight_codes"}));
}

TEST(OpTable, DeviceCarriesTheTableOfItsBackend) {
  Device cpu(cpu_backend());
  Device meta(meta_backend());
  Device cpu_ref(cpu_backend(), &ref_op_table());
  EXPECT_EQ(&cpu.ops(), &fast_op_table());
  EXPECT_EQ(&meta.ops(), &meta_op_table());
  EXPECT_EQ(&cpu_ref.ops(), &ref_op_table());
  EXPECT_THROW(Device(meta_backend(), &fast_op_table()), Error);
}

}  // namespace op_table_test
}  // namespace
}  // namespace snug
