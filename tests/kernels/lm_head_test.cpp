// The chunked LM head + cross-entropy (kernels/lm_head.h), fast and reference, against the
// unchunked path it replaces (gemm_f32 + softmax_xent_forward/backward + the two backward
// GEMMs) and against finite differences.
#include "kernels/lm_head.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace snug {
namespace {
namespace lm_head_test {

using test::all_close;
using test::expect_grad_close;
using test::max_abs;
using test::numerical_grad;
using test::random_floats;
using test::random_ints;
using Vec = std::vector<float>;

enum class Impl { kRef, kFast };
const char* name_of(Impl impl) {
  return impl == Impl::kRef ? "ref" : "fast";
}

// Calls lm_head_xent of impl with a scratch sized by lm_head_scratch_floats.
double call(Impl impl, float* losses, float* dlnf, float* dwte, const Vec& lnf, const Vec& wte,
            const std::vector<int32_t>& targets, int64_t N, int64_t C, int64_t V, float scale,
            int64_t chunk, const float* lnf_override = nullptr) {
  Vec scratch(static_cast<size_t>(kernels::lm_head_scratch_floats(N, V, chunk)), NAN);
  const float* in = lnf_override ? lnf_override : lnf.data();
  return impl == Impl::kRef
             ? ref::lm_head_xent(losses, dlnf, dwte, in, wte.data(), targets.data(), N, C, V, scale,
                                 scratch.data(), chunk)
             : kernels::lm_head_xent(losses, dlnf, dwte, in, wte.data(), targets.data(), N, C, V,
                                     scale, scratch.data(), chunk);
}

struct Result {
  double total = 0.0;
  Vec losses, dlnf, dwte;
};

// The unchunked path of the model before this kernel: materialized logits(N,V).
Result unchunked(const Vec& lnf, const Vec& wte, const std::vector<int32_t>& targets, int64_t N,
                 int64_t C, int64_t V, float scale) {
  Result r;
  Vec logits(static_cast<size_t>(N * V));
  r.losses.resize(static_cast<size_t>(N));
  r.dlnf.resize(static_cast<size_t>(N * C));
  r.dwte.assign(static_cast<size_t>(V * C), 0.0f);
  kernels::gemm_f32(false, true, N, V, C, 1.0f, lnf.data(), C, wte.data(), C, 0.0f, logits.data(),
                    V);
  r.total = kernels::softmax_xent_forward(r.losses.data(), logits.data(), logits.data(),
                                          targets.data(), N, V);
  kernels::softmax_xent_backward(logits.data(), logits.data(), targets.data(), scale, N, V);
  kernels::gemm_f32(false, false, N, C, V, 1.0f, logits.data(), V, wte.data(), C, 0.0f,
                    r.dlnf.data(), C);
  kernels::gemm_f32(true, false, V, C, N, 1.0f, logits.data(), V, lnf.data(), C, 1.0f,
                    r.dwte.data(), C);
  return r;
}

// Every element within rel * max|want| of want.
::testing::AssertionResult close_rel_max(const Vec& got, const Vec& want, double rel) {
  return all_close(got, want, 0.0, rel * std::max(max_abs(want), 1e-30));
}

// Shared problem: N=12 rows, ignored targets at rows 3..5 (a whole chunk of 3) and 10.
struct Problem {
  int64_t N = 12, C = 24, V = 203;
  Vec lnf, wte;
  std::vector<int32_t> targets;
  float scale = 0.0f;
  explicit Problem(float wte_range = 1.0f, uint64_t seed = 100) {
    lnf = random_floats(N * C, seed, -2.0f, 2.0f);
    wte = random_floats(V * C, seed + 1, -wte_range, wte_range);
    targets = random_ints(N, seed + 2, 0, static_cast<int32_t>(V - 1));
    targets[3] = targets[4] = targets[5] = targets[10] = -100;
    targets[0] = static_cast<int32_t>(V - 1);  // the last vocabulary entry is a target too
    int64_t valid = 0;
    for (int32_t t : targets) valid += t >= 0 ? 1 : 0;
    scale = 0.5f / static_cast<float>(valid);
  }
};

TEST(LmHead, DefaultChunkAndScratchSize) {
  // GPT-2 124M, B=4, T=512: 13 chunks of 158 rows, at most 32 MiB of scratch.
  const int64_t chunk = kernels::lm_head_default_chunk(2048, 50257);
  EXPECT_EQ(chunk, 158);
  EXPECT_LE(kernels::lm_head_scratch_floats(2048, 50257, chunk) * 4, int64_t{32} << 20);
  EXPECT_EQ(kernels::lm_head_scratch_floats(2048, 50257, chunk), 158 * 50257);
  // Small problems fit in one chunk; a huge vocabulary still gets one row; N=0 is harmless.
  EXPECT_EQ(kernels::lm_head_default_chunk(12, 203), 12);
  EXPECT_EQ(kernels::lm_head_default_chunk(5, int64_t{1} << 30), 1);
  EXPECT_EQ(kernels::lm_head_default_chunk(0, 50257), 1);
  EXPECT_EQ(kernels::lm_head_scratch_floats(0, 50257, 1), 0);
  // chunk larger than N: scratch for N rows only.
  EXPECT_EQ(kernels::lm_head_scratch_floats(12, 203, 100), 12 * 203);
  // Every default chunk is within budget and covers N evenly (no small remainder chunk).
  for (int64_t N : {1, 2, 7, 100, 167, 1000, 2048, 4096, 8192})
    for (int64_t V : {2, 1000, 50257, 100000}) {
      const int64_t c = kernels::lm_head_default_chunk(N, V);
      ASSERT_GE(c, 1);
      ASSERT_LE(c, N);
      ASSERT_TRUE(c == 1 || c * V <= kernels::kLmHeadScratchBudgetFloats) << N << " " << V;
      const int64_t chunks = (N + c - 1) / c;
      ASSERT_GT(N - (chunks - 1) * c, c - chunks) << N << " " << V;  // last chunk ~ as big
    }
  // The GPU's budget (512 MiB): gpt2-124m at B=16, T=1024 in 7 chunks of 2341 rows.
  EXPECT_EQ(kernels::lm_head_default_chunk(16384, 50257, kernels::kLmHeadGpuScratchBudgetFloats),
            2341);
  EXPECT_LE(kernels::lm_head_scratch_floats(16384, 50257, 2341),
            kernels::kLmHeadGpuScratchBudgetFloats);
}

TEST(LmHead, MatchesUnchunked) {
  const Problem p;
  const int64_t N = p.N, C = p.C, V = p.V;
  const Result want = unchunked(p.lnf, p.wte, p.targets, N, C, V, p.scale);
  for (Impl impl : {Impl::kRef, Impl::kFast})
    for (int64_t chunk : {int64_t{1}, int64_t{3}, N, int64_t{5}, int64_t{7}, int64_t{100}}) {
      SCOPED_TRACE(std::string(name_of(impl)) + " chunk " + std::to_string(chunk));
      // forward only
      Vec losses(N, NAN);
      const double fwd = call(impl, losses.data(), nullptr, nullptr, p.lnf, p.wte, p.targets, N, C,
                              V, p.scale, chunk);
      EXPECT_TRUE(close_rel_max(losses, want.losses, 1e-5));
      EXPECT_NEAR(fwd, want.total, 1e-5 * std::abs(want.total));
      for (int64_t i : {3, 4, 5, 10}) EXPECT_EQ(losses[i], 0.0f);
      // forward without per-row losses: same sum
      const double fwd2 =
          call(impl, nullptr, nullptr, nullptr, p.lnf, p.wte, p.targets, N, C, V, p.scale, chunk);
      EXPECT_EQ(fwd2, fwd);
      // forward + backward
      Vec losses_b(N, NAN), dlnf(N * C, NAN), dwte(V * C, 0.0f);
      const double both = call(impl, losses_b.data(), dlnf.data(), dwte.data(), p.lnf, p.wte,
                               p.targets, N, C, V, p.scale, chunk);
      EXPECT_NEAR(both, fwd, 1e-6 * std::abs(fwd));
      EXPECT_TRUE(close_rel_max(losses_b, losses, 1e-6));
      EXPECT_TRUE(close_rel_max(dlnf, want.dlnf, 1e-4));
      EXPECT_TRUE(close_rel_max(dwte, want.dwte, 1e-4));
      for (int64_t i : {3, 4, 5, 10})
        for (int64_t c = 0; c < C; ++c) ASSERT_EQ(dlnf[i * C + c], 0.0f) << i << " " << c;
    }
}

TEST(LmHead, ForwardVocabSlicedMatchesUnchunked) {
  // chunk*V/N >= 256: the fast forward-only path slices the vocabulary (V=3001 in slices of
  // 600 or 1200 columns, the last one partial); the backward still goes by row chunks.
  for (float wte_range : {1.0f, 40.0f}) {
    const int64_t N = 40, C = 16, V = 3001;
    const Vec lnf = random_floats(N * C, 600, -2.0f, 2.0f);
    const Vec wte = random_floats(V * C, 601, -wte_range, wte_range);
    std::vector<int32_t> targets = random_ints(N, 602, 0, static_cast<int32_t>(V - 1));
    targets[1] = targets[17] = targets[18] = -100;
    targets[2] = 0;
    targets[3] = static_cast<int32_t>(V - 1);
    targets[4] = 600;  // first column of the second slice
    const Result want = unchunked(lnf, wte, targets, N, C, V, 1.0f / 37);
    for (Impl impl : {Impl::kRef, Impl::kFast})
      for (int64_t chunk : {int64_t{8}, int64_t{16}}) {
        SCOPED_TRACE(std::string(name_of(impl)) + " chunk " + std::to_string(chunk) + " range " +
                     std::to_string(wte_range));
        Vec losses(N, NAN);
        const double total = call(impl, losses.data(), nullptr, nullptr, lnf, wte, targets, N, C, V,
                                  1.0f / 37, chunk);
        EXPECT_NEAR(total, want.total, 1e-5 * std::abs(want.total));
        EXPECT_TRUE(close_rel_max(losses, want.losses, 1e-5));
        EXPECT_EQ(losses[1], 0.0f);
        EXPECT_EQ(
            call(impl, nullptr, nullptr, nullptr, lnf, wte, targets, N, C, V, 1.0f / 37, chunk),
            total);
        Vec losses_b(N), dlnf(N * C), dwte(V * C, 0.0f);
        call(impl, losses_b.data(), dlnf.data(), dwte.data(), lnf, wte, targets, N, C, V, 1.0f / 37,
             chunk);
        EXPECT_TRUE(close_rel_max(losses_b, want.losses, 1e-5));
        EXPECT_TRUE(close_rel_max(dlnf, want.dlnf, 1e-4));
        EXPECT_TRUE(close_rel_max(dwte, want.dwte, 1e-4));
      }
  }
}

TEST(LmHead, LargeLogitsAreStable) {
  // Logits in the hundreds: a naive exp would overflow.
  const Problem p(/*wte_range=*/40.0f, /*seed=*/200);
  const int64_t N = p.N, C = p.C, V = p.V;
  const Result want = unchunked(p.lnf, p.wte, p.targets, N, C, V, p.scale);
  EXPECT_TRUE(std::isfinite(want.total));
  EXPECT_GT(want.total, 10.0);  // confident and often wrong: large losses
  for (Impl impl : {Impl::kRef, Impl::kFast}) {
    SCOPED_TRACE(name_of(impl));
    Vec losses(N), dlnf(N * C), dwte(V * C, 0.0f);
    const double total = call(impl, losses.data(), dlnf.data(), dwte.data(), p.lnf, p.wte,
                              p.targets, N, C, V, p.scale, 5);
    EXPECT_NEAR(total, want.total, 1e-5 * std::abs(want.total));
    EXPECT_TRUE(close_rel_max(losses, want.losses, 1e-5));
    EXPECT_TRUE(close_rel_max(dlnf, want.dlnf, 1e-4));
    EXPECT_TRUE(close_rel_max(dwte, want.dwte, 1e-4));
  }
}

TEST(LmHead, DwteAccumulates) {
  const Problem p;
  const int64_t N = p.N, C = p.C, V = p.V;
  const Vec d0 = random_floats(V * C, 300);
  for (Impl impl : {Impl::kRef, Impl::kFast}) {
    SCOPED_TRACE(name_of(impl));
    Vec dlnf(N * C), fresh(V * C, 0.0f), acc = d0;
    call(impl, nullptr, dlnf.data(), fresh.data(), p.lnf, p.wte, p.targets, N, C, V, p.scale, 5);
    call(impl, nullptr, dlnf.data(), acc.data(), p.lnf, p.wte, p.targets, N, C, V, p.scale, 5);
    Vec want(V * C);
    for (size_t i = 0; i < want.size(); ++i) want[i] = d0[i] + fresh[i];
    EXPECT_TRUE(all_close(acc, want, 0.0, 1e-6));
    // A second call adds the same gradient again.
    call(impl, nullptr, dlnf.data(), acc.data(), p.lnf, p.wte, p.targets, N, C, V, p.scale, 5);
    for (size_t i = 0; i < want.size(); ++i) want[i] += fresh[i];
    EXPECT_TRUE(all_close(acc, want, 0.0, 1e-6));
  }
}

TEST(LmHead, NullGradientsAreSkipped) {
  const Problem p;
  const int64_t N = p.N, C = p.C, V = p.V;
  for (Impl impl : {Impl::kRef, Impl::kFast}) {
    SCOPED_TRACE(name_of(impl));
    Vec dlnf_full(N * C), dwte_full(V * C, 0.0f);
    const double t0 = call(impl, nullptr, dlnf_full.data(), dwte_full.data(), p.lnf, p.wte,
                           p.targets, N, C, V, p.scale, 5);
    Vec dlnf(N * C, NAN);
    const double t1 =
        call(impl, nullptr, dlnf.data(), nullptr, p.lnf, p.wte, p.targets, N, C, V, p.scale, 5);
    EXPECT_EQ(t1, t0);
    EXPECT_EQ(dlnf, dlnf_full);
    Vec dwte(V * C, 0.0f);
    const double t2 =
        call(impl, nullptr, nullptr, dwte.data(), p.lnf, p.wte, p.targets, N, C, V, p.scale, 5);
    EXPECT_EQ(t2, t0);
    EXPECT_EQ(dwte, dwte_full);
  }
}

TEST(LmHead, DlnfMayAliasLnf) {
  const Problem p;
  const int64_t N = p.N, C = p.C, V = p.V;
  for (Impl impl : {Impl::kRef, Impl::kFast}) {
    SCOPED_TRACE(name_of(impl));
    Vec dlnf(N * C), dwte(V * C, 0.0f);
    const double t0 =
        call(impl, nullptr, dlnf.data(), dwte.data(), p.lnf, p.wte, p.targets, N, C, V, p.scale, 5);
    Vec inout = p.lnf, dwte2(V * C, 0.0f);
    const double t1 = call(impl, nullptr, inout.data(), dwte2.data(), p.lnf, p.wte, p.targets, N, C,
                           V, p.scale, 5, /*lnf_override=*/inout.data());
    EXPECT_EQ(t1, t0);
    EXPECT_EQ(inout, dlnf);
    EXPECT_EQ(dwte2, dwte);
  }
}

TEST(LmHead, AllTargetsIgnored) {
  Problem p;
  const int64_t N = p.N, C = p.C, V = p.V;
  std::fill(p.targets.begin(), p.targets.end(), -100);
  const Vec d0 = random_floats(V * C, 400);
  for (Impl impl : {Impl::kRef, Impl::kFast}) {
    SCOPED_TRACE(name_of(impl));
    Vec losses(N, NAN), dlnf(N * C, NAN), dwte = d0;
    EXPECT_EQ(call(impl, losses.data(), dlnf.data(), dwte.data(), p.lnf, p.wte, p.targets, N, C, V,
                   1.0f, 5),
              0.0);
    EXPECT_EQ(losses, Vec(N, 0.0f));
    EXPECT_EQ(dlnf, Vec(N * C, 0.0f));
    EXPECT_EQ(dwte, d0);
  }
}

TEST(LmHead, RejectsBadArguments) {
  const Problem p;
  const int64_t N = p.N, C = p.C, V = p.V;
  std::vector<int32_t> bad = p.targets;
  bad[7] = static_cast<int32_t>(V);
  for (Impl impl : {Impl::kRef, Impl::kFast}) {
    SCOPED_TRACE(name_of(impl));
    EXPECT_THROW(call(impl, nullptr, nullptr, nullptr, p.lnf, p.wte, bad, N, C, V, 1.0f, 5), Error);
    Vec scratch(N * V);
    const auto f = impl == Impl::kRef ? ref::lm_head_xent : kernels::lm_head_xent;
    EXPECT_THROW(f(nullptr, nullptr, nullptr, p.lnf.data(), p.wte.data(), p.targets.data(), N, C, V,
                   1.0f, scratch.data(), 0),
                 Error);
  }
}

TEST(LmHead, GradCheck) {
  const int64_t N = 4, C = 5, V = 7, chunk = 3;
  const float scale = 0.7f;
  Vec lnf = random_floats(N * C, 500, -1.5f, 1.5f);
  Vec wte = random_floats(V * C, 501);
  const std::vector<int32_t> targets = {3, -100, 6, 0};
  auto loss = [&] {
    Vec scratch(static_cast<size_t>(kernels::lm_head_scratch_floats(N, V, chunk)));
    return scale * ref::lm_head_xent(nullptr, nullptr, nullptr, lnf.data(), wte.data(),
                                     targets.data(), N, C, V, scale, scratch.data(), chunk);
  };
  const auto n_lnf = numerical_grad(lnf, loss);
  const auto n_wte = numerical_grad(wte, loss);
  for (Impl impl : {Impl::kRef, Impl::kFast}) {
    const std::string name = name_of(impl);
    Vec dlnf(N * C, NAN), dwte(V * C, 0.0f);
    call(impl, nullptr, dlnf.data(), dwte.data(), lnf, wte, targets, N, C, V, scale, chunk);
    expect_grad_close(dlnf, n_lnf, name + " dlnf");
    expect_grad_close(dwte, n_wte, name + " dwte");
  }
}

}  // namespace lm_head_test
}  // namespace
}  // namespace snug
