// The encoder ops (kernels/ops.inc, "Encoder ops": dropout with a uint8 mask, tanh, row bias) and
// attention-probability dropout (kernels/attention_dims.h): fast against reference, the masks'
// rate and determinism, naive and flash dropping the same probabilities, and finite differences
// through the dropped attention (the mask is a function of the key, fixed under perturbation).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/dropout_mask.h"
#include "kernels/op_table.h"
#include "support/attention_case.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace snug {
namespace {
namespace encoder_ops_test {

using test::all_close;
using Vec = std::vector<float>;

TEST(EncoderOps, DropoutFastEqualsRefAndKeepsTheMask) {
  const int64_t n = 100003;
  const Vec in = test::random_floats(n, 1);
  Vec a(n), b(n);
  std::vector<uint8_t> ma(n), mb(n);
  fast_op_table().dropout_forward(a.data(), ma.data(), in.data(), n, 0.1, 77);
  ref_op_table().dropout_forward(b.data(), mb.data(), in.data(), n, 0.1, 77);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ma, mb);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    dropped += ma[i] ? 0 : 1;
    EXPECT_EQ(a[i], ma[i] ? in[i] * static_cast<float>(1.0 / 0.9) : 0.0f);
    EXPECT_EQ(ma[i] != 0, kernels::dropout_keep(77, i, 0.1));
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.1, 0.004);
  const Vec dout = test::random_floats(n, 2);
  Vec da(n), db(n);
  fast_op_table().dropout_backward(da.data(), dout.data(), ma.data(), n, 0.1);
  ref_op_table().dropout_backward(db.data(), dout.data(), ma.data(), n, 0.1);
  EXPECT_EQ(da, db);
  // Another key, another mask; LoRA's mask is the same definition.
  fast_op_table().dropout_forward(b.data(), mb.data(), in.data(), n, 0.1, 78);
  EXPECT_NE(ma, mb);
  EXPECT_EQ(kernels::lora_keep(5, 9, 0.3), kernels::dropout_keep(5, 9, 0.3));
}

// kernels/dropout_mask.h's counter_key_at: element i under the moved key draws what element
// first + i draws under the key, for the masks and for add_uniform_noise's stream (NEFTune), so
// a rank's rows draw one process's masks and noise for those rows (nn/run_context.h).
TEST(EncoderOps, AMovedKeyDrawsTheElementsFromFirstOn) {
  const int64_t n = 4096, first = 3 * n;
  const uint64_t key = 0x1234abcd;
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(kernels::dropout_keep(kernels::counter_key_at(key, first), i, 0.1),
              kernels::dropout_keep(key, first + i, 0.1))
        << i;
  Vec whole(static_cast<size_t>(first + n), 0.0f), part(static_cast<size_t>(n), 0.0f);
  fast_op_table().add_uniform_noise(whole.data(), first + n, key, 0.5);
  fast_op_table().add_uniform_noise(part.data(), n, kernels::counter_key_at(key, first), 0.5);
  EXPECT_EQ(part, Vec(whole.begin() + first, whole.end()));
  Vec part_ref(static_cast<size_t>(n), 0.0f);
  ref_op_table().add_uniform_noise(part_ref.data(), n, kernels::counter_key_at(key, first), 0.5);
  EXPECT_EQ(part_ref, part);
  EXPECT_EQ(kernels::counter_key_at(key, 0), key);
}

TEST(EncoderOps, TanhAndRowBiasFastEqualRefAndFiniteDifferences) {
  const int64_t N = 37, C = 300;
  const Vec x = test::random_floats(N * C, 3, -3.0f, 3.0f);
  Vec ya(N * C), yb(N * C);
  fast_op_table().tanh_forward(ya.data(), x.data(), N * C);
  ref_op_table().tanh_forward(yb.data(), x.data(), N * C);
  EXPECT_TRUE(all_close(ya, yb, 1e-6, 1e-7));
  const Vec dy = test::random_floats(N * C, 4);
  Vec ga(N * C), gb(N * C);
  fast_op_table().tanh_backward(ga.data(), ya.data(), dy.data(), N * C);
  ref_op_table().tanh_backward(gb.data(), yb.data(), dy.data(), N * C);
  EXPECT_TRUE(all_close(ga, gb, 1e-5, 1e-6));
  // d/dx sum(dy * tanh(x)) by central differences (first 200 elements).
  Vec xs(x.begin(), x.begin() + 200);
  const auto num = test::numerical_grad(xs, [&] {
    double s = 0;
    for (size_t i = 0; i < xs.size(); ++i) s += dy[i] * std::tanh(static_cast<double>(xs[i]));
    return s;
  });
  test::expect_grad_close(Vec(ga.begin(), ga.begin() + 200), num, "tanh");

  const Vec bias = test::random_floats(C, 5);
  Vec xa = x, xb = x;
  fast_op_table().add_bias_rows(xa.data(), bias.data(), N, C);
  ref_op_table().add_bias_rows(xb.data(), bias.data(), N, C);
  EXPECT_EQ(xa, xb);
  Vec dba(C, 0.5f), dbb(C, 0.5f);  // accumulates
  fast_op_table().bias_grad_rows(dba.data(), dy.data(), N, C);
  ref_op_table().bias_grad_rows(dbb.data(), dy.data(), N, C);
  EXPECT_TRUE(all_close(dba, dbb, 1e-5, 1e-5));
  double col0 = 0.5;
  for (int64_t r = 0; r < N; ++r) col0 += dy[r * C];
  EXPECT_NEAR(dba[0], col0, 1e-5);
}

// One forward + backward with probability dropout; naive keeps the mask and the dropped
// probabilities, flash regenerates them.
test::AttnResult dropped_attention(const OpTable& ops, test::AttnCase c, bool flash, double p,
                                   std::vector<uint8_t>* mask_out = nullptr) {
  c.d.dropout_p = p;
  c.d.dropout_key = 1234;
  const AttentionDims& d = c.d;
  const int64_t scores = d.B * d.NH * d.T * d.T;
  std::vector<uint8_t> mask(static_cast<size_t>(scores));
  std::vector<float> dropped(static_cast<size_t>(scores));
  if (!flash) {
    c.d.drop_mask = mask.data();
    c.d.att_dropped = dropped.data();
  }
  test::AttnResult r = test::run_attention(ops, c, flash);
  if (mask_out) *mask_out = mask;
  return r;
}

void expect_same(const test::AttnResult& a, const test::AttnResult& b, double tol) {
  test::expect_same_attention(a, b, "", tol, tol);
}

TEST(AttentionDropout, FastEqualsRefAndNaiveEqualsFlash) {
  // Bidirectional (BERT) and causal, GQA, T across flash tiles.
  for (bool causal : {false, true})
    for (int64_t T : {7, 70}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "bidirectional") + " T=" + std::to_string(T));
      const test::AttnCase c(2, T, 4, 2, 8, causal, 9);
      std::vector<uint8_t> mask;
      const auto nf = dropped_attention(fast_op_table(), c, false, 0.25, &mask);
      const auto nr = dropped_attention(ref_op_table(), c, false, 0.25);
      const auto ff = dropped_attention(fast_op_table(), c, true, 0.25);
      const auto fr = dropped_attention(ref_op_table(), c, true, 0.25);
      expect_same(nf, nr, 2e-5);
      expect_same(ff, fr, 2e-5);
      expect_same(nf, ff, 2e-5);
      // The naive mask is the counter's, and it drops about p of the scores.
      int64_t kept = 0;
      for (size_t i = 0; i < mask.size(); ++i) {
        EXPECT_EQ(mask[i] != 0, kernels::dropout_keep(1234, static_cast<int64_t>(i), 0.25));
        kept += mask[i];
      }
      EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(mask.size()), 0.75, 0.05);
      // Dropout changes the result (the test would not see a kernel that ignored it).
      const auto none = dropped_attention(fast_op_table(), c, true, 0.0);
      EXPECT_FALSE(all_close(none.out, ff.out, 1e-3, 1e-3));
    }
}

TEST(AttentionDropout, FiniteDifferences) {
  for (bool flash : {false, true}) {
    SCOPED_TRACE(flash ? "flash" : "naive");
    test::AttnCase c(1, 5, 2, 1, 4, false, 21);
    const auto r = dropped_attention(ref_op_table(), c, flash, 0.3);
    auto loss = [&] {
      const auto o = dropped_attention(ref_op_table(), c, flash, 0.3).out;
      double s = 0;
      for (size_t i = 0; i < o.size(); ++i) s += static_cast<double>(o[i]) * c.dout[i];
      return s;
    };
    for (auto [x, g, what] : {std::tuple{&c.q, &r.dq, "q"}, std::tuple{&c.k, &r.dk, "k"},
                              std::tuple{&c.v, &r.dv, "v"}}) {
      const auto num = test::numerical_grad(*x, loss);
      test::expect_grad_close(*g, num, what);
    }
  }
}

}  // namespace encoder_ops_test
}  // namespace
}  // namespace snug
