// gemm_bf16 on oneDNN's matmul primitive (bf16 x bf16 -> f32, fp32 accumulation).
//
// oneDNN's BLAS-like API has no bf16 GEMM (dnnl_gemm_bf16bf16f32 is internal), so this builds a
// matmul primitive per distinct call shape: transposes and leading dimensions become strides of
// the memory descriptors (no copies), alpha an output scale, beta a sum post-op (dW accumulates
// straight into the fp32 gradient). Primitives are created once per (shapes, strides, alpha,
// beta, threads) and reused: a training step has a handful of distinct GEMMs. The scratchpad is
// user-managed (a thread-local buffer, sized by the primitive: 0.1-3 MB measured at GPT-2
// shapes, like dnnl_sgemm's own packing buffers) so that creation allocates nothing.
// Weights stay in the plain layout: measured within 10% of the packed layout at M >= 256, and a
// reorder per step would cost a pass over every weight.
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/arg_checks.h"
#include "kernels/kernels.h"

namespace snug::kernels {

namespace {

using Key =
    std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float, int>;

struct Cached {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  size_t scratch_bytes = 0;
};

const dnnl::engine& cpu_engine() {
  static const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

std::shared_ptr<const Cached> primitive_for(const Key& key) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<const Cached>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const auto [ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, threads] = key;
  using dt = dnnl::memory::data_type;
  // A(M,K) is stored (K,M) with row stride lda when transposed; B(K,N) likewise (N,K).
  const dnnl::memory::desc a({M, K}, dt::bf16,
                             ta ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1});
  const dnnl::memory::desc b({K, N}, dt::bf16,
                             tb ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
  const dnnl::memory::desc c({M, N}, dt::f32, dnnl::memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  auto entry = std::make_shared<Cached>();
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
  entry->pd = pd;
  entry->prim = dnnl::matmul(pd);
  entry->scratch_bytes = pd.scratchpad_desc().get_size();
  cache.emplace(key, entry);
  return entry;
}

}  // namespace

void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
               const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  if (detail::gemm_without_products("gemm_bf16", M, N, K, beta, C, ldc)) return;
  SNUG_CHECK(lda >= (transA ? M : K) && ldb >= (transB ? K : N) && ldc >= N,
             "gemm_bf16: leading dimension too small (transA=", transA, " transB=", transB,
             " M=", M, " N=", N, " K=", K, " lda=", lda, " ldb=", ldb, " ldc=", ldc, ")");
  try {
    const Key key{transA, transB, M, N, K, lda, ldb, ldc, alpha, beta, num_threads()};
    const std::shared_ptr<const Cached> p = primitive_for(key);
    thread_local std::vector<uint8_t> scratch;
    if (scratch.size() < p->scratch_bytes) scratch.resize(p->scratch_bytes);
    const dnnl::engine& eng = cpu_engine();
    const dnnl::matmul::primitive_desc& pd = p->pd;
    // oneDNN's memory objects wrap the caller's buffers (no copy); const_cast because a memory
    // handle is mutable in its API, though matmul only reads src and weights.
    dnnl::memory am(pd.src_desc(), eng, const_cast<uint16_t*>(A));
    dnnl::memory bm(pd.weights_desc(), eng, const_cast<uint16_t*>(B));
    dnnl::memory cm(pd.dst_desc(), eng, C);
    dnnl::memory sm(pd.scratchpad_desc(), eng, scratch.data());
    thread_local dnnl::stream stream(eng);
    p->prim.execute(stream, {{DNNL_ARG_SRC, am},
                             {DNNL_ARG_WEIGHTS, bm},
                             {DNNL_ARG_DST, cm},
                             {DNNL_ARG_SCRATCHPAD, sm}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(snug::detail::concat(
        "gemm_bf16: oneDNN's bf16 matmul failed (", e.what(), ", status ",
        static_cast<int>(e.status), ") for transA=", transA, " transB=", transB, " M=", M, " N=", N,
        " K=", K, "; kernels/gemm_path.h says where it exists"));
  }
}

}  // namespace snug::kernels
