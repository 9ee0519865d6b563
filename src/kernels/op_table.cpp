#include "kernels/op_table.h"

#include <type_traits>

namespace snug {

namespace {

// The meta version of an op of type F: takes the op's arguments, touches nothing, returns a
// value-initialized result (0 for the losses and sums some ops return).
template <typename F>
struct MetaOp;
template <typename R, typename... A>
struct MetaOp<R(A...)> {
  static R run(A...) {
    if constexpr (!std::is_void_v<R>) return R{};
  }
};

const OpTable kFast = {
    "fast",
#define SNUG_OP(ret, name, params) &kernels::name,
#include "kernels/all_ops.inc"
#undef SNUG_OP
};

const OpTable kRef = {
    "ref",
#define SNUG_OP(ret, name, params) &ref::name,
#include "kernels/all_ops.inc"
#undef SNUG_OP
};

const OpTable kMeta = {
    "meta",
#define SNUG_OP(ret, name, params) &MetaOp<ret params>::run,
#include "kernels/all_ops.inc"
#undef SNUG_OP
};

}  // namespace

const OpTable& fast_op_table() {
  return kFast;
}
const OpTable& ref_op_table() {
  return kRef;
}
const OpTable& meta_op_table() {
  return kMeta;
}

const std::vector<std::string>& host_only_ops() {
  static const std::vector<std::string> names = {
#define SNUG_OP(ret, name, params)
#define SNUG_HOST_OP(ret, name, params) #name,
#include "kernels/all_ops.inc"
#undef SNUG_HOST_OP
#undef SNUG_OP
  };
  return names;
}

}  // namespace snug
