#include "kernels/backends.h"

#include <cstring>

#include "core/error.h"
#include "kernels/op_table.h"

namespace snug {

namespace {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  bool backed() const override { return true; }
  bool host_addressable() const override { return true; }
  void* allocate(int64_t bytes) const override { return host_allocate(bytes); }
  void release(void* p, int64_t) const override { host_release(p); }
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

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend b;
  return b;
}

const Backend& meta_backend() {
  static const MetaBackend b;
  return b;
}

const Backend& backend_named(const std::string& name) {
  if (name == "cpu") return cpu_backend();
  if (name == "meta") return meta_backend();
  throw Error("unknown device '" + name + "' (expected cpu or meta)");
}

}  // namespace snug
