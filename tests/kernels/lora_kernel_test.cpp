// The LoRA bypass kernels: finite-difference gradients of reference and fast, and the two held
// together (tests/kernels/gradcheck_test.cpp explains the checked scalar L = sum(out * R)).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace snug {
namespace {
namespace lora_kernel_test {

using Vec = std::vector<float>;
using test::random_floats;

using test::dot;

constexpr int64_t N = 6, IC = 5, OC = 7, r = 3;
constexpr float kScale = 1.5f;

TEST(LoraKernel, BackwardMatchesFiniteDifferences) {
  Vec h = random_floats(N * IC, 1), A = random_floats(r * IC, 2), B = random_floats(OC * r, 3);
  const Vec base = random_floats(N * OC, 4), R = random_floats(N * OC, 5);
  Vec out, u(N * r);
  auto loss = [&] {
    out = base;
    ref::lora_forward(out.data(), u.data(), h.data(), A.data(), B.data(), N, IC, OC, r, kScale);
    return dot(out, R);
  };
  const auto nh = test::numerical_grad(h, loss);
  const auto nA = test::numerical_grad(A, loss);
  const auto nB = test::numerical_grad(B, loss);
  loss();  // u for backward
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "ref");
    Vec dh(N * IC, 9.0f), dA(r * IC, 0.0f), dB(OC * r, 0.0f), du(N * r);
    auto bwd = fast ? kernels::lora_backward : ref::lora_backward;
    bwd(dh.data(), dA.data(), dB.data(), du.data(), R.data(), h.data(), u.data(), A.data(),
        B.data(), N, IC, OC, r, kScale, false);
    test::expect_grad_close(dh, nh, "dh");
    test::expect_grad_close(dA, nA, "dA");
    test::expect_grad_close(dB, nB, "dB");
    // accumulate_dh adds onto what dh held; null dA/dB are skipped.
    Vec dh2(N * IC, 1.0f);
    bwd(dh2.data(), nullptr, nullptr, du.data(), R.data(), h.data(), u.data(), A.data(), B.data(),
        N, IC, OC, r, kScale, true);
    for (int64_t i = 0; i < N * IC; ++i) EXPECT_NEAR(dh2[i], 1.0f + dh[i], 1e-5f);
  }
}

TEST(LoraKernel, FastMatchesReference) {
  const int64_t n = 37, ic = 48, oc = 144, rr = 8;
  const Vec h = random_floats(n * ic, 11), A = random_floats(rr * ic, 12),
            B = random_floats(oc * rr, 13), base = random_floats(n * oc, 14),
            g = random_floats(n * oc, 15);
  Vec out_r = base, out_f = base, u_r(n * rr), u_f(n * rr);
  ref::lora_forward(out_r.data(), u_r.data(), h.data(), A.data(), B.data(), n, ic, oc, rr, 0.5f);
  kernels::lora_forward(out_f.data(), u_f.data(), h.data(), A.data(), B.data(), n, ic, oc, rr,
                        0.5f);
  for (size_t i = 0; i < out_r.size(); ++i) EXPECT_NEAR(out_f[i], out_r[i], 1e-4f) << i;
  Vec dh_r(n * ic), dh_f(n * ic), dA_r(rr * ic, 0.f), dA_f(rr * ic, 0.f), dB_r(oc * rr, 0.f),
      dB_f(oc * rr, 0.f), du(n * rr);
  ref::lora_backward(dh_r.data(), dA_r.data(), dB_r.data(), du.data(), g.data(), h.data(),
                     u_r.data(), A.data(), B.data(), n, ic, oc, rr, 0.5f, false);
  kernels::lora_backward(dh_f.data(), dA_f.data(), dB_f.data(), du.data(), g.data(), h.data(),
                         u_r.data(), A.data(), B.data(), n, ic, oc, rr, 0.5f, false);
  for (size_t i = 0; i < dh_r.size(); ++i) EXPECT_NEAR(dh_f[i], dh_r[i], 1e-4f) << i;
  for (size_t i = 0; i < dA_r.size(); ++i) EXPECT_NEAR(dA_f[i], dA_r[i], 1e-3f) << i;
  for (size_t i = 0; i < dB_r.size(); ++i) EXPECT_NEAR(dB_f[i], dB_r[i], 1e-3f) << i;
}

}  // namespace lora_kernel_test
}  // namespace
}  // namespace snug
