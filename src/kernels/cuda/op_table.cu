// The CUDA op table: every op starts as a stub that throws naming it; each kernel file
// (SNUG_CUDA_KERNEL_FILES in context.cuh) then sets the entries it implements. Host-only ops
// (kernels/op_table.h) keep the host function: callers hand them staged host pointers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

// SNUG_CUDA_PROFILE=1: every op of the table is timed (the stream drained before and after it,
// host clock), and a table of calls and seconds per op goes to stderr at exit, slowest first.
// Slows the run (a sync per op); for finding where a step's time goes.
struct OpTime {
  const char* name;
  long long calls = 0;
  double seconds = 0.0;
};
std::vector<OpTime>& op_times() {
  static std::vector<OpTime> t;
  return t;
}
void print_op_times() {
  std::vector<OpTime> t = op_times();
  std::sort(t.begin(), t.end(),
            [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  double total = 0.0;
  for (const OpTime& x : t) total += x.seconds;
  std::fprintf(stderr, "\nsnug CUDA op profile (SNUG_CUDA_PROFILE=1): %.3f s in ops\n", total);
  for (const OpTime& x : t)
    if (x.calls > 0)
      std::fprintf(stderr, "  %-30s %8lld calls %10.3f ms %6.1f%%\n", x.name, x.calls,
                   x.seconds * 1e3, total > 0 ? 100.0 * x.seconds / total : 0.0);
}

template <const char* Name, typename F>
struct Timed;
template <const char* Name, typename R, typename... A>
struct Timed<Name, R(A...)> {
  static inline R (*orig)(A...) = nullptr;
  static inline size_t slot = 0;
  static R run(A... a) {
    cuda::sync(Name);
    const auto t0 = std::chrono::steady_clock::now();
    struct Done {
      std::chrono::steady_clock::time_point t0;
      ~Done() {
        cudaStreamSynchronize(cuda::stream());
        OpTime& o = op_times()[slot];
        ++o.calls;
        o.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    } done{t0};
    return orig(a...);
  }
};

void add_timing(OpTable& x) {
#define SNUG_OP(ret, name, params)                          \
  Timed<names::name, ret params>::orig = x.name;            \
  Timed<names::name, ret params>::slot = op_times().size(); \
  op_times().push_back(OpTime{names::name});                \
  x.name = &Timed<names::name, ret params>::run;
#include "kernels/all_ops.inc"
#undef SNUG_OP
  std::atexit(print_op_times);
}

const OpTable& table() {
  static const OpTable t = [] {
    OpTable x = stub_table();
#define SNUG_CUDA_REGISTER(file) cuda::register_##file(x);
    SNUG_CUDA_KERNEL_FILES(SNUG_CUDA_REGISTER)
#undef SNUG_CUDA_REGISTER
    const char* profile = std::getenv("SNUG_CUDA_PROFILE");
    if (profile && std::string(profile) == "1") add_timing(x);
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
