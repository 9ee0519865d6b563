// The CUDA op table: every op starts as a stub that throws naming it; each kernel file
// (SNUG_CUDA_KERNEL_FILES in context.cuh) then sets the entries it implements. Host-only ops
// (kernels/op_table.h) keep the host function: callers hand them staged host pointers.
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/cuda_backend.h"

namespace snug {

namespace {

[[noreturn]] void missing(const char* op) {
  throw Error(std::string("op ") + op +
              " has no CUDA kernel yet (issue 27): this run needs it on --device cuda");
}

template <typename F>
struct Missing;
template <typename R, typename... A>
struct Missing<R(A...)> {
  template <const char* Name>
  static R run(A...) {
    missing(Name);
  }
};

namespace names {
#define SNUG_OP(ret, name, params) constexpr char name[] = #name;
#include "kernels/all_ops.inc"
#undef SNUG_OP
}  // namespace names

OpTable stub_table() {
  OpTable t{};
  t.impl = "cuda";
#define SNUG_OP(ret, name, params) t.name = &Missing<ret params>::template run<names::name>;
#define SNUG_HOST_OP(ret, name, params) t.name = &kernels::name;
#include "kernels/all_ops.inc"
#undef SNUG_HOST_OP
#undef SNUG_OP
  return t;
}

const OpTable& table() {
  static const OpTable t = [] {
    OpTable x = stub_table();
#define SNUG_CUDA_REGISTER(file) cuda::register_##file(x);
    SNUG_CUDA_KERNEL_FILES(SNUG_CUDA_REGISTER)
#undef SNUG_CUDA_REGISTER
    return x;
  }();
  return t;
}

}  // namespace

const OpTable& cuda_op_table() {
  return table();
}

std::vector<std::string> cuda_missing_ops() {
  const OpTable stubs = stub_table();
  const OpTable& t = table();
  std::vector<std::string> out;
#define SNUG_OP(ret, name, params) \
  if (t.name == stubs.name) out.push_back(#name);
#define SNUG_HOST_OP(ret, name, params)
#include "kernels/all_ops.inc"
#undef SNUG_HOST_OP
#undef SNUG_OP
  return out;
}

}  // namespace snug
