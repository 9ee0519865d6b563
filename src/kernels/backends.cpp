#include "kernels/backends.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/op_table.h"

namespace snug {

namespace {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  bool backed() const override { return true; }
  bool host_addressable() const override { return true; }
  void* allocate(int64_t bytes) const override { return host_allocate(bytes); }
  void release(void* p, int64_t bytes) const override { host_release(p, bytes); }
  void zero(void* dst, int64_t bytes) const override {
    if (bytes > 0) std::memset(dst, 0, static_cast<size_t>(bytes));
  }
  void upload(void* dst, const void* src, int64_t bytes) const override { copy(dst, src, bytes); }
  void download(void* dst, const void* src, int64_t bytes) const override { copy(dst, src, bytes); }
  void copy(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  const OpTable& ops() const override { return fast_op_table(); }
};

class MetaBackend final : public Backend {
 public:
  const char* name() const override { return "meta"; }
  bool backed() const override { return false; }
  bool host_addressable() const override { return false; }
  void* allocate(int64_t) const override { return nullptr; }
  void release(void*, int64_t) const override {}
  void zero(void*, int64_t) const override {}
  void upload(void*, const void*, int64_t) const override {}
  void download(void*, const void*, int64_t) const override {}
  void copy(void*, const void*, int64_t) const override {}
  const OpTable& ops() const override { return meta_op_table(); }
};

// cpu-remote: the cpu kernels on host memory whose addresses the host cannot dereference. Every
// pointer it hands out carries a tag in bits no x86-64 address uses, so host code that reads or
// writes a tensor without Device::upload/download or core/host_staging.h faults at once, as it
// would on an accelerator; its copies and its op table strip the tag before the host touches
// the bytes. A CI stand-in for a GPU: a run on it proves the run's host work goes through the
// backend (tests/core/cpu_remote_test.cpp).
constexpr uintptr_t kRemoteTag = uintptr_t{1} << 62;

template <typename T>
T untag(T v) {
  if constexpr (std::is_pointer_v<T>) {
    const auto u = reinterpret_cast<uintptr_t>(v);
    return reinterpret_cast<T>(u & ~kRemoteTag);
  } else {
    return v;
  }
}

// AttentionDims carries device pointers of its own (position ids, the dropout mask and the
// dropped probabilities).
AttentionDims untag(const AttentionDims& d) {
  AttentionDims c = d;
  c.pos = untag(d.pos);
  c.drop_mask = untag(d.drop_mask);
  c.att_dropped = untag(d.att_dropped);
  return c;
}

void* tag(void* p) {
  return p ? reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) | kRemoteTag) : nullptr;
}

// Pointer arguments an op takes in host memory by contract (bit i: argument i): host-only ops
// take host pointers only; rope's inv_freq (argument 9) is a small host table (kernels/ops.inc);
// so are the 8-bit code tables (by type, below), and sum_squares_each's four arrays (its
// entries in xs are device memory: remote_sum_squares_each checks and untags them).
// Every other pointer an op is given must be device memory: cpu-remote refuses a host pointer
// there, which on a GPU would be an illegal address.
constexpr uint32_t kAllHost = ~uint32_t{0};
constexpr uint32_t host_args(std::string_view op) {
  if (op == "sum_squares_each") return 0xfu;
  return op == "rope_forward" || op == "rope_backward" ? uint32_t{1} << 9 : 0;
}

template <typename T>
void check_device_arg(const T& v, int i, uint32_t host_mask, const char* op) {
  // The 8-bit optimizers' code tables (quant8::Code) are host constants by type.
  if constexpr (std::is_pointer_v<T> &&
                !std::is_same_v<std::remove_cv_t<std::remove_pointer_t<T>>, quant8::Code>) {
    const auto u = reinterpret_cast<uintptr_t>(v);
    if (u != 0 && (u & kRemoteTag) == 0 && ((host_mask >> i) & 1u) == 0)
      throw Error(std::string("op ") + op + ": argument " + std::to_string(i) +
                  " is host memory where the op takes device memory (cpu-remote)");
  }
}

void check_device_arg(const AttentionDims& d, int i, uint32_t host_mask, const char* op) {
  check_device_arg(d.pos, i, host_mask, op);
  check_device_arg(d.drop_mask, i, host_mask, op);
  check_device_arg(d.att_dropped, i, host_mask, op);
}

template <auto F, uint32_t HostMask, const char* Name>
struct Untagged;
template <typename R, typename... A, R (*F)(A...), uint32_t HostMask, const char* Name>
struct Untagged<F, HostMask, Name> {
  static R run(A... a) {
    check_all(std::index_sequence_for<A...>{}, a...);
    return F(untag(a)...);
  }
  template <size_t... I>
  static void check_all(std::index_sequence<I...>, const A&... a) {
    (check_device_arg(a, static_cast<int>(I), HostMask, Name), ...);
  }
};

namespace names {
#define SNUG_OP(ret, name, params) constexpr char name[] = #name;
#include "kernels/all_ops.inc"
#undef SNUG_OP
}  // namespace names

// sum_squares_each's vectors, a host array of device pointers.
void remote_sum_squares_each(double* out, const void* const* xs, const int64_t* ns,
                             const bool* bf16, int64_t count) {
  std::vector<const void*> bare(static_cast<size_t>(count > 0 ? count : 0));
  for (size_t i = 0; i < bare.size(); ++i) {
    check_device_arg(xs[i], 1, 0, "sum_squares_each");
    bare[i] = untag(xs[i]);
  }
  Untagged<&kernels::sum_squares_each, host_args("sum_squares_each"), names::sum_squares_each>::run(
      out, bare.data(), ns, bf16, count);
}

const OpTable kRemoteOps = [] {
  OpTable t = {
      "fast",
#define SNUG_OP(ret, name, params) &Untagged<&kernels::name, host_args(#name), names::name>::run,
#define SNUG_HOST_OP(ret, name, params) &Untagged<&kernels::name, kAllHost, names::name>::run,
#include "kernels/all_ops.inc"
#undef SNUG_HOST_OP
#undef SNUG_OP
  };
  t.sum_squares_each = &remote_sum_squares_each;
  return t;
}();

class CpuRemoteBackend final : public Backend {
 public:
  const char* name() const override { return "cpu-remote"; }
  bool backed() const override { return true; }
  bool host_addressable() const override { return false; }
  void* allocate(int64_t bytes) const override { return tag(host_allocate(bytes)); }
  void release(void* p, int64_t bytes) const override { host_release(untag(p), bytes); }
  void zero(void* dst, int64_t bytes) const override {
    if (bytes > 0) std::memset(untag(dst), 0, static_cast<size_t>(bytes));
  }
  void upload(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0) std::memcpy(untag(dst), src, static_cast<size_t>(bytes));
  }
  void download(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, untag(src), static_cast<size_t>(bytes));
  }
  void copy(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0 && dst != src) std::memcpy(untag(dst), untag(src), static_cast<size_t>(bytes));
  }
  const OpTable& ops() const override { return kRemoteOps; }
};

}  // namespace

const Backend& cpu_remote_backend() {
  static const CpuRemoteBackend b;
  return b;
}

const Backend& cpu_backend() {
  static const CpuBackend b;
  return b;
}

const Backend& meta_backend() {
  static const MetaBackend b;
  return b;
}

// "cuda" is cuda:0; "cuda:N" the N-th GPU (digits only).
std::optional<int> cuda_index(const std::string& name) {
  if (name == "cuda") return 0;
  if (name.rfind("cuda:", 0) != 0 || name.size() == 5 || name.size() > 9) return std::nullopt;
  int i = 0;
  for (size_t k = 5; k < name.size(); ++k) {
    if (name[k] < '0' || name[k] > '9') return std::nullopt;
    i = i * 10 + (name[k] - '0');
  }
  return i;
}

std::unique_ptr<Device> make_device(const std::string& name) {
  auto dev = std::make_unique<Device>(backend_named(name));
  if (!dev->host_addressable()) dev->own_host(std::make_unique<Device>(cpu_backend()));
  return dev;
}

bool is_device_name(const std::string& name) {
  return name == "cpu" || name == "meta" || name == "cpu-remote" || cuda_index(name).has_value();
}

std::string cuda_alloc_mode() {
  const char* v = std::getenv("SNUG_CUDA_ALLOC");
  const std::string mode = v && *v ? v : "pages";
  SNUG_CHECK(mode == "pages" || mode == "async" || mode == "debug", "SNUG_CUDA_ALLOC='", mode,
             "': expected pages (the default), async or debug");
  return mode;
}

void keep_pages_of(Device& meta, const std::string& planned_device) {
  if (cuda_index(planned_device) && cuda_alloc_mode() == "pages") meta.pool().use_pages(nullptr);
}

const Backend& backend_named(const std::string& name) {
  if (name == "cpu") return cpu_backend();
  if (name == "meta") return meta_backend();
  if (name == "cpu-remote") return cpu_remote_backend();
  if (const std::optional<int> i = cuda_index(name)) return cuda_backend(*i);
  throw Error("unknown device '" + name + "' (expected cpu, cuda, cuda:N or meta)");
}

}  // namespace snug
