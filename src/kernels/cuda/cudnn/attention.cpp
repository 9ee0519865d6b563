// cuDNN's SDPA for --bf16 attention on a GPU (kernels/cuda/cudnn_attention.h says what and why).
// Built with SNUG_CUDNN: an object library of its own, the only files that see cudnn.h and the
// cudnn-frontend headers (as system headers; their JSON support off, so nlohmann::json stays
// snug's). libcudnn.so.9 is opened on the first call (dlopen through the frontend's shim).
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/cudnn_attention.h"

namespace cudnn_frontend {
// The frontend's shim resolves every cuDNN call through this handle (dynamic loading).
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace snug::cuda {

namespace {

namespace fe = cudnn_frontend;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

std::mutex& mu() {
  static std::mutex m;
  return m;
}

int64_t& scratch_high() {
  static int64_t h = 0;
  return h;
}

// Opens libcudnn.so.9 (or SNUG_CUDNN_LIBRARY) and makes the handle on the backend's stream, once;
// nullptr when that fails (said once on stderr).
cudnnHandle_t handle() {
  static cudnnHandle_t h = []() -> cudnnHandle_t {
    const char* env = std::getenv("SNUG_CUDNN_LIBRARY");
    const std::string lib = env && *env ? env : "libcudnn.so.9";
    fe::cudnn_dlhandle = dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (fe::cudnn_dlhandle == nullptr) {
      const char* why = dlerror();
      std::fprintf(stderr,
                   "snug: cuDNN not loaded (%s: %s); --bf16 attention runs on snug's own fp32 "
                   "kernels (set SNUG_CUDNN_LIBRARY or LD_LIBRARY_PATH)\n",
                   lib.c_str(), why ? why : "unknown error");
      return nullptr;
    }
    cudnnHandle_t x = nullptr;
    try {
      if (fe::detail::create_handle(&x) != CUDNN_STATUS_SUCCESS ||
          fe::detail::set_stream(x, stream()) != CUDNN_STATUS_SUCCESS) {
        std::fprintf(stderr,
                     "snug: cudnnCreate failed; --bf16 attention runs on snug's own "
                     "fp32 kernels\n");
        return nullptr;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "snug: cuDNN: %s; --bf16 attention runs on snug's own fp32 kernels\n",
                   e.what());
      return nullptr;
    }
    return x;
  }();
  return h;
}

using Key = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;

struct Entry {
  std::shared_ptr<fe::graph::Graph> graph;  // null: cuDNN refused this shape
  int64_t workspace = 0;
};

// Packed bf16 (B,T,heads,hs) as cuDNN's (b, h, s, d) dims and strides.
fe::graph::Tensor_attributes packed(const char* name, int64_t uid, int64_t B, int64_t T,
                                    int64_t heads, int64_t hs) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({B, heads, T, hs})
      .set_stride({T * heads * hs, hs, heads * hs, 1})
      .set_data_type(fe::DataType_t::BFLOAT16);
}

template <typename Attributes>
void set_mask(Attributes& a, const AttentionDims& d) {
  if (d.causal)
    a.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

float attn_scale(const AttentionDims& d) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hs)));
}

std::shared_ptr<fe::graph::Graph> build(const AttentionDims& d, bool backward) {
  auto g = new_graph();
  const int64_t B = d.B, T = d.T, H = d.NH, KH = d.NKV, D = d.hs;
  auto q = g->tensor(packed("Q", kQ, B, T, H, D));
  auto k = g->tensor(packed("K", kK, B, T, KH, D));
  auto v = g->tensor(packed("V", kV, B, T, KH, D));
  if (!backward) {
    auto a = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(
        attn_scale(d));
    set_mask(a, d);
    auto [o, stats] = g->sdpa(q, k, v, a);
    o->set_output(true).set_uid(kO).set_dim({B, H, T, D}).set_stride({T * H * D, D, H * D, 1});
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({B, H, T, 1})
        .set_stride({H * T, T, 1, 1});
  } else {
    auto o = g->tensor(packed("O", kO, B, T, H, D));
    auto dO = g->tensor(packed("dO", kDO, B, T, H, D));
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(kStats)
                               .set_dim({B, H, T, 1})
                               .set_stride({H * T, T, 1, 1})
                               .set_data_type(fe::DataType_t::FLOAT));
    auto a = fe::graph::SDPA_backward_attributes()
                 .set_name("sdpa_backward")
                 .set_attn_scale(attn_scale(d))
                 .set_deterministic_algorithm(true);
    set_mask(a, d);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dO, stats, a);
    dq->set_output(true).set_uid(kDQ).set_dim({B, H, T, D}).set_stride({T * H * D, D, H * D, 1});
    dk->set_output(true).set_uid(kDK).set_dim({B, KH, T, D}).set_stride({T * KH * D, D, KH * D, 1});
    dv->set_output(true).set_uid(kDV).set_dim({B, KH, T, D}).set_stride({T * KH * D, D, KH * D, 1});
  }
  fe::error_t err = g->build(handle(), {fe::HeurMode_t::A});
  if (!err.is_good()) {
    std::fprintf(stderr,
                 "snug: cuDNN declines the %s attention graph (B=%lld T=%lld heads %lld/%lld "
                 "hs=%lld): %s; snug's own fp32 kernels run it\n",
                 backward ? "backward" : "forward", static_cast<long long>(B),
                 static_cast<long long>(T), static_cast<long long>(H), static_cast<long long>(KH),
                 static_cast<long long>(D), err.get_message().c_str());
    return nullptr;
  }
  return g;
}

// The cached graph for this call, or nullptr when cuDNN does not take it.
const Entry* entry(const AttentionDims& d, bool backward) {
  if (!cudnn_attention_enabled() || !d.bf16_operands || d.pos != nullptr || d.window > 0 ||
      d.dropout_p > 0.0 || d.hs % 8 != 0 || d.hs > 128 || handle() == nullptr)
    return nullptr;
  static std::map<Key, Entry> cache;
  const Key key{backward, d.B, d.T, d.NH, d.NKV, d.hs, d.causal};
  auto it = cache.find(key);
  if (it == cache.end()) {
    Entry e;
    try {
      e.graph = build(d, backward);
      if (e.graph) {
        int64_t ws = 0;
        if (!e.graph->get_workspace_size(ws).is_good()) e.graph = nullptr;
        e.workspace = ws;
      }
    } catch (const std::exception& x) {
      std::fprintf(stderr, "snug: cuDNN attention: %s; snug's own fp32 kernels run it\n", x.what());
      e.graph = nullptr;
    }
    it = cache.emplace(key, e).first;
  }
  return it->second.graph ? &it->second : nullptr;
}

int64_t aligned(int64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Carves the call's scratch into bf16 buffers of the given element counts, then the workspace.
struct Carve {
  explicit Carve(char* base) : p(base) {}
  uint16_t* take(int64_t elements) {
    auto* r = reinterpret_cast<uint16_t*>(p);
    p += aligned(elements * 2);
    return r;
  }
  char* p;
};

void note_scratch(int64_t bytes) {
  if (bytes > scratch_high()) scratch_high() = bytes;
}

void run(const Entry& e, std::unordered_map<int64_t, void*>& pack, void* workspace,
         const char* what) {
  fe::error_t err = e.graph->execute(handle(), pack, workspace);
  SNUG_CHECK(err.is_good(), "cuDNN attention ", what, ": ", err.get_message());
  check(cudaGetLastError(), what);
}

}  // namespace

bool cudnn_attention_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("SNUG_CUDA_CUDNN");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

bool cudnn_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttentionDims& d) {
  std::lock_guard<std::mutex> lock(mu());
  const Entry* e = entry(d, false);
  if (e == nullptr) return false;
  const int64_t rows = d.B * d.T, nq = rows * d.NH * d.hs, nk = rows * d.NKV * d.hs;
  const int64_t bytes = 2 * aligned(nq * 2) + 2 * aligned(nk * 2) + aligned(e->workspace);
  const Scratch s(static_cast<size_t>(bytes));
  note_scratch(bytes);
  Carve c(s.as<char>());
  uint16_t *q16 = c.take(nq), *k16 = c.take(nk), *v16 = c.take(nk), *o16 = c.take(nq);
  pack_rows_bf16(q16, q, rows, d.NH * d.hs, d.ldq);
  pack_rows_bf16(k16, k, rows, d.NKV * d.hs, d.ldk);
  pack_rows_bf16(v16, v, rows, d.NKV * d.hs, d.ldv);
  std::unordered_map<int64_t, void*> pack{
      {kQ, q16}, {kK, k16}, {kV, v16}, {kO, o16}, {kStats, lse}};
  run(*e, pack, e->workspace > 0 ? c.p : nullptr, "forward");
  unpack_rows_bf16(out, d.ldo, o16, rows, d.NH * d.hs);
  return true;
}

bool cudnn_attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                              const float* k, const float* v, const float* out, const float* lse,
                              const AttentionDims& d) {
  std::lock_guard<std::mutex> lock(mu());
  const Entry* e = entry(d, true);
  if (e == nullptr) return false;
  const int64_t rows = d.B * d.T, nq = rows * d.NH * d.hs, nk = rows * d.NKV * d.hs;
  const int64_t bytes = 4 * aligned(nq * 2) + 4 * aligned(nk * 2) + aligned(e->workspace);
  const Scratch s(static_cast<size_t>(bytes));
  note_scratch(bytes);
  Carve c(s.as<char>());
  uint16_t *q16 = c.take(nq), *o16 = c.take(nq), *do16 = c.take(nq), *dq16 = c.take(nq);
  uint16_t *k16 = c.take(nk), *v16 = c.take(nk), *dk16 = c.take(nk), *dv16 = c.take(nk);
  pack_rows_bf16(q16, q, rows, d.NH * d.hs, d.ldq);
  pack_rows_bf16(k16, k, rows, d.NKV * d.hs, d.ldk);
  pack_rows_bf16(v16, v, rows, d.NKV * d.hs, d.ldv);
  pack_rows_bf16(o16, out, rows, d.NH * d.hs, d.ldo);
  pack_rows_bf16(do16, dout, rows, d.NH * d.hs, d.ldo);
  std::unordered_map<int64_t, void*> pack{
      {kQ, q16},   {kK, k16},   {kV, v16},
      {kO, o16},   {kDO, do16}, {kDQ, dq16},
      {kDK, dk16}, {kDV, dv16}, {kStats, const_cast<float*>(lse)}};
  run(*e, pack, e->workspace > 0 ? c.p : nullptr, "backward");
  unpack_rows_bf16(dq, d.ldq, dq16, rows, d.NH * d.hs);
  unpack_rows_bf16(dk, d.ldk, dk16, rows, d.NKV * d.hs);
  unpack_rows_bf16(dv, d.ldv, dv16, rows, d.NKV * d.hs);
  return true;
}

int64_t cudnn_attention_scratch_high() {
  std::lock_guard<std::mutex> lock(mu());
  return scratch_high();
}

}  // namespace snug::cuda
