// The CUDA kernels of kernels/cuda/kv_cache.cu against snug::ref: cache writes and beam reorders
// bit for bit (fp32, f16, bf16), the cached attention within fp32 tolerance (causal, GQA, sliding
// window, fused-QKV row strides, a head size that is not a multiple of 32, prefill and decode).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "core/dtype.h"
#include "kernels/kv_cache_ops.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace kv_cache_cudatest {

using test::GpuBuffer;
using test::random_floats;
using test::rel_norm_error;

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

std::vector<uint16_t> random_halves(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& x : v) x = static_cast<uint16_t>(gen());
  return v;
}

std::vector<uint16_t> to_half(const std::vector<float>& f, bool fp16) {
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = fp16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
  return h;
}

TEST(CudaKvCache, WriteAndGatherBitExact) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  uint64_t seed = 900;
  struct Case {
    int64_t B, Tq, Tmax, past, W, lds;
  };
  for (const Case& c : {Case{1, 1, 1, 0, 1, 1}, Case{3, 5, 17, 4, 24, 40},
                        Case{4, 1, 64, 63, 512, 512}, Case{2, 128, 256, 0, 1024, 3072}}) {
    SCOPED_TRACE(testing::Message() << "B=" << c.B << " Tq=" << c.Tq << " Tmax=" << c.Tmax
                                    << " past=" << c.past << " W=" << c.W << " lds=" << c.lds);
    const int64_t cache_n = c.B * c.Tmax * c.W;
    // A source with inf, NaN and values that round to f16 subnormals or overflow.
    auto src = random_floats(c.B * c.Tq * c.lds, ++seed, -70000.0f, 70000.0f);
    for (size_t i = 0; i < src.size(); i += 5) src[i] *= 1e-9f;
    src[0] = std::numeric_limits<float>::infinity();
    if (src.size() > 2) src[2] = f32_from_bits(0x7fa5a5a5u);
    GpuBuffer<float> dsrc(gpu, src);

    const auto cache0 = random_floats(cache_n, ++seed);
    std::vector<float> cache = cache0;
    ref::kv_cache_write(cache.data(), src.data(), c.B, c.Tq, c.Tmax, c.past, c.W, c.lds);
    GpuBuffer<float> dcache(gpu, cache0);
    ops.kv_cache_write(dcache, dsrc, c.B, c.Tq, c.Tmax, c.past, c.W, c.lds);
    EXPECT_EQ(bits(dcache.host()), bits(cache));

    for (bool fp16 : {false, true}) {
      const auto hcache0 = random_halves(cache_n, ++seed);
      std::vector<uint16_t> hcache = hcache0;
      ref::kv_cache_write_half(hcache.data(), src.data(), c.B, c.Tq, c.Tmax, c.past, c.W, c.lds,
                               fp16);
      GpuBuffer<uint16_t> dh(gpu, hcache0);
      ops.kv_cache_write_half(dh, dsrc, c.B, c.Tq, c.Tmax, c.past, c.W, c.lds, fp16);
      EXPECT_EQ(dh.host(), hcache) << "fp16=" << fp16;
    }

    // Beam reorder of the first len rows: repeated and permuted sources; rows past len kept.
    const int64_t len = c.past + c.Tq;
    const auto from = test::random_ints(c.B, ++seed, 0, static_cast<int32_t>(c.B - 1));
    GpuBuffer<int32_t> dfrom(gpu, from);
    const auto dst0 = random_floats(cache_n, ++seed);
    std::vector<float> dst = dst0;
    ref::kv_cache_gather(dst.data(), cache.data(), from.data(), c.B, c.Tmax, len, c.W);
    GpuBuffer<float> ddst(gpu, dst0);
    ops.kv_cache_gather(ddst, dcache, dfrom, c.B, c.Tmax, len, c.W);
    EXPECT_EQ(bits(ddst.host()), bits(dst));

    const auto hsrc = random_halves(cache_n, ++seed), hdst0 = random_halves(cache_n, ++seed);
    std::vector<uint16_t> hdst = hdst0;
    ref::kv_cache_gather_half(hdst.data(), hsrc.data(), from.data(), c.B, c.Tmax, len, c.W);
    GpuBuffer<uint16_t> dhsrc(gpu, hsrc), dhdst(gpu, hdst0);
    ops.kv_cache_gather_half(dhdst, dhsrc, dfrom, c.B, c.Tmax, len, c.W);
    EXPECT_EQ(dhdst.host(), hdst);
  }
}

TEST(CudaKvCache, AttentionDecodeGqa) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  uint64_t seed = 1000;
  struct Case {
    int64_t B, Tq, past, Tmax, NH, NKV, hs, window;
    bool fused;  // q is the first NH*hs columns of a fused QKV row
  };
  for (const Case& c : {Case{1, 1, 0, 1, 1, 1, 1, 0, false},     // one key
                        Case{2, 1, 37, 64, 8, 2, 64, 0, true},   // decode, GQA
                        Case{3, 5, 20, 40, 4, 4, 32, 7, false},  // window inside the past
                        Case{2, 33, 0, 48, 6, 2, 80, 0, true},   // prefill, hs not a multiple of 32
                        Case{1, 3, 2, 8, 2, 1, 256, 4, false},   // the widest head
                        Case{4, 1, 1023, 2048, 32, 8, 128, 0, true}}) {  // Llama-3 8B decode
    SCOPED_TRACE(testing::Message()
                 << "B=" << c.B << " Tq=" << c.Tq << " past=" << c.past << " Tmax=" << c.Tmax
                 << " NH=" << c.NH << " NKV=" << c.NKV << " hs=" << c.hs << " window=" << c.window);
    const int64_t W = c.NKV * c.hs, C = c.NH * c.hs, ldq = c.fused ? C + 2 * W : C;
    const auto q = random_floats(c.B * c.Tq * ldq, ++seed, -2.0f, 2.0f);
    const auto k = random_floats(c.B * c.Tmax * W, ++seed, -2.0f, 2.0f);
    const auto v = random_floats(c.B * c.Tmax * W, ++seed);
    GpuBuffer<float> dq(gpu, q), dk(gpu, k), dv(gpu, v);
    std::vector<float> want(c.B * c.Tq * C);
    ref::attention_decode_gqa(want.data(), q.data(), k.data(), v.data(), c.B, c.Tq, c.past, c.Tmax,
                              c.NH, c.NKV, c.hs, ldq, c.window);
    GpuBuffer<float> out(gpu, c.B * c.Tq * C);
    ops.attention_decode_gqa(out, dq, dk, dv, c.B, c.Tq, c.past, c.Tmax, c.NH, c.NKV, c.hs, ldq,
                             c.window);
    const auto got = out.host();
    EXPECT_LT(rel_norm_error(got, want), test::kF32Tol);
    ops.attention_decode_gqa(out, dq, dk, dv, c.B, c.Tq, c.past, c.Tmax, c.NH, c.NKV, c.hs, ldq,
                             c.window);
    EXPECT_EQ(bits(out.host()), bits(got)) << "two runs differ";

    for (bool fp16 : {false, true}) {
      SCOPED_TRACE(testing::Message() << "fp16=" << fp16);
      const auto hk = to_half(k, fp16), hv = to_half(v, fp16);
      std::vector<float> hwant(want.size());
      ref::attention_decode_gqa_half(hwant.data(), q.data(), hk.data(), hv.data(), c.B, c.Tq,
                                     c.past, c.Tmax, c.NH, c.NKV, c.hs, ldq, c.window, fp16);
      GpuBuffer<uint16_t> dhk(gpu, hk), dhv(gpu, hv);
      GpuBuffer<float> hout(gpu, c.B * c.Tq * C);
      ops.attention_decode_gqa_half(hout, dq, dhk, dhv, c.B, c.Tq, c.past, c.Tmax, c.NH, c.NKV,
                                    c.hs, ldq, c.window, fp16);
      EXPECT_LT(rel_norm_error(hout.host(), hwant), test::kF32Tol);
    }
  }
}

}  // namespace kv_cache_cudatest
}  // namespace
}  // namespace snug
