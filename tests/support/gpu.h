// For the CUDA op tests (tests/cuda/*_cudatest.cpp, label cuda): the GPU's backend or a skip
// naming why there is none, host vectors to and from its memory, and the relative norm error
// the tolerances are stated in.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/op_table.h"

namespace snug::test {

// In a TEST body: the GPU's backend as `gpu`, or skip naming why there is none.
#define SNUG_REQUIRE_GPU(gpu)                                                  \
  if (const std::string why = ::snug::cuda_unavailable_reason(); !why.empty()) \
    GTEST_SKIP() << "no GPU: " << why;                                         \
  [[maybe_unused]] const ::snug::Backend& gpu = ::snug::cuda_backend(0)

// n elements of T in a backend's memory, freed with the buffer. Made from a host vector (uploaded)
// or poisoned (every byte 0xFF: NaN for floats) so unwritten outputs show.
template <typename T>
class GpuBuffer {
 public:
  GpuBuffer(const Backend& b, const std::vector<T>& host)
      : b_(&b), n_(static_cast<int64_t>(host.size())) {
    p_ = static_cast<T*>(b.allocate(bytes()));
    b.upload(p_, host.data(), bytes());
  }
  GpuBuffer(const Backend& b, int64_t n) : b_(&b), n_(n) {
    p_ = static_cast<T*>(b.allocate(bytes()));
    const std::vector<unsigned char> poison(static_cast<size_t>(bytes()), 0xFF);
    b.upload(p_, poison.data(), bytes());
  }
  ~GpuBuffer() { b_->release(p_, bytes()); }
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;

  T* get() const { return p_; }
  operator T*() const { return p_; }  // NOLINT: passes as the op's pointer argument
  int64_t size() const { return n_; }
  std::vector<T> host() const {
    std::vector<T> h(static_cast<size_t>(n_));
    b_->download(h.data(), p_, bytes());
    return h;
  }

 private:
  int64_t bytes() const { return n_ * static_cast<int64_t>(sizeof(T)); }
  const Backend* b_;
  int64_t n_;
  T* p_ = nullptr;
};

// ||got - want|| / ||want|| in double (0 when both are zero; NaN anywhere gives NaN).
template <typename A, typename B>
double rel_norm_error(const std::vector<A>& got, const std::vector<B>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    num += d * d;
    den += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  if (got.size() != want.size()) return INFINITY;
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

// The tolerances against the reference: fp32 results, bf16 results.
constexpr double kF32Tol = 1e-5;
constexpr double kBf16Tol = 1e-2;

}  // namespace snug::test
