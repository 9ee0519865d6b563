// Packed sequences (kernels/attention_dims.h): with position ids that restart at 0 per document,
// the attention kernels (naive and flash, fast and ref, GQA) let a query see only the earlier keys
// of its own document, and rope rotates each row by its position id. Checked: a packed batch gives
// each document's results computed alone; the backward passes finite differences; fast equals
// ref; position ids that do not describe documents are refused; no position ids is the plain
// causal mask (the other attention tests, unchanged).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/op_table.h"
#include "support/attention_case.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace snug {
namespace {
namespace packed_attention_test {

using test::all_close;
using test::AttnCase;
using test::AttnResult;
using test::run_attention;
using test::used_columns;
using Vec = std::vector<float>;
using Docs = std::vector<std::vector<int64_t>>;  // per batch row, the document lengths in order

// Position ids (B,T) of documents `docs` packed into rows of T.
std::vector<int32_t> positions(const Docs& docs, int64_t T) {
  std::vector<int32_t> pos;
  for (const auto& row : docs) {
    int64_t n = 0;
    for (int64_t len : row) {
      for (int64_t i = 0; i < len; ++i) pos.push_back(static_cast<int32_t>(i));
      n += len;
    }
    EXPECT_EQ(n, T);
  }
  return pos;
}

// Rows [t0, t0 + len) of batch row b of x (row stride ld, T rows per batch row).
Vec rows_of(const Vec& x, int64_t ld, int64_t T, int64_t b, int64_t t0, int64_t len) {
  const auto first = x.begin() + (b * T + t0) * ld;
  return Vec(first, first + len * ld);
}

// T = 70 crosses the naive row blocks (32) and the flash tiles (64): documents start inside a
// tile, at a tile boundary (64), and one spans two tiles.
const Docs kDocs = {{20, 45, 5}, {64, 6}};
constexpr int64_t kT = 70;

TEST(PackedAttention, EachDocumentGetsWhatItGetsAlone) {
  const std::vector<int32_t> pos = positions(kDocs, kT);
  for (int64_t NKV : {6, 2, 1}) {
    AttnCase packed(2, kT, 6, NKV, 8, true, 70 + static_cast<uint64_t>(NKV));
    packed.d.pos = pos.data();
    for (bool flash : {false, true})
      for (const OpTable* ops : {&fast_op_table(), &ref_op_table()}) {
        const AttnResult all = run_attention(*ops, packed, flash);
        for (int64_t b = 0; b < 2; ++b) {
          int64_t t0 = 0;
          for (int64_t len : kDocs[static_cast<size_t>(b)]) {
            AttnCase alone(1, len, 6, NKV, 8, true, 1);
            const AttentionDims& d = packed.d;
            alone.q = rows_of(packed.q, d.ldq, kT, b, t0, len);
            alone.k = rows_of(packed.k, d.ldk, kT, b, t0, len);
            alone.v = rows_of(packed.v, d.ldv, kT, b, t0, len);
            alone.dout = rows_of(packed.dout, d.ldo, kT, b, t0, len);
            const AttnResult one = run_attention(*ops, alone, flash);
            const std::string w = std::string(ops->impl) + (flash ? " flash" : " naive") +
                                  " NKV=" + std::to_string(NKV) + " batch " + std::to_string(b) +
                                  " document at " + std::to_string(t0);
            EXPECT_TRUE(all_close(rows_of(all.out, d.ldo, kT, b, t0, len), one.out, 1e-5, 1e-6))
                << w;
            EXPECT_TRUE(
                all_close(used_columns(rows_of(all.dq, d.ldq, kT, b, t0, len), len, d.ldq, 6 * 8),
                          used_columns(one.dq, len, d.ldq, 6 * 8), 1e-5, 1e-6))
                << w;
            EXPECT_TRUE(
                all_close(used_columns(rows_of(all.dk, d.ldk, kT, b, t0, len), len, d.ldk, NKV * 8),
                          used_columns(one.dk, len, d.ldk, NKV * 8), 1e-5, 1e-6))
                << w;
            EXPECT_TRUE(
                all_close(used_columns(rows_of(all.dv, d.ldv, kT, b, t0, len), len, d.ldv, NKV * 8),
                          used_columns(one.dv, len, d.ldv, NKV * 8), 1e-5, 1e-6))
                << w;
            t0 += len;
          }
        }
      }
  }
}

TEST(PackedAttention, FastEqualsRef) {
  const std::vector<int32_t> pos = positions(kDocs, kT);
  for (int64_t NKV : {6, 2, 1}) {
    AttnCase c(2, kT, 6, NKV, 8, true, 80 + static_cast<uint64_t>(NKV));
    c.d.pos = pos.data();
    for (bool flash : {false, true}) {
      const AttnResult f = run_attention(fast_op_table(), c, flash);
      const AttnResult r = run_attention(ref_op_table(), c, flash);
      const std::string w = std::string(flash ? "flash" : "naive") + " NKV=" + std::to_string(NKV);
      test::expect_same_attention(f, r, w);
    }
  }
}

// Central differences of L = sum(out * R), the forward on the reference naive kernel.
TEST(PackedAttention, BackwardMatchesFiniteDifferences) {
  const Docs docs = {{2, 4}, {3, 1, 2}};
  const std::vector<int32_t> pos = positions(docs, 6);
  for (int64_t NKV : {4, 2}) {
    AttnCase c(2, 6, 4, NKV, 3, true, 90 + static_cast<uint64_t>(NKV));
    c.d.pos = pos.data();
    test::expect_backward_matches_finite_differences(c);
  }
}

TEST(PackedAttention, PositionIdsThatAreNotDocumentsAreRefused) {
  AttnCase c(1, 4, 2, 2, 2, true, 95);
  for (const std::vector<int32_t>& bad :
       {std::vector<int32_t>{1, 2, 3, 4}, std::vector<int32_t>{0, 1, 3, 4},
        std::vector<int32_t>{0, 1, 1, 2}}) {
    c.d.pos = bad.data();
    for (bool flash : {false, true}) {
      EXPECT_THROW(run_attention(fast_op_table(), c, flash), Error);
      EXPECT_THROW(run_attention(ref_op_table(), c, flash), Error);
    }
  }
  const std::vector<int32_t> good = {0, 1, 0, 1};
  c.d.pos = good.data();
  c.d.causal = false;  // per-document masks are causal
  EXPECT_THROW(run_attention(fast_op_table(), c, true), Error);
  EXPECT_THROW(run_attention(ref_op_table(), c, false), Error);
}

// Rope with position ids rotates each packed document as if it started the sequence.
TEST(PackedAttention, RopeRotatesEachDocumentFromPositionZero) {
  const int64_t B = 2, T = 7, NH = 3, hs = 6, ld = NH * hs + 2, R = 4;
  const Docs docs = {{3, 4}, {7}};
  const std::vector<int32_t> pos = positions(docs, T);
  const Vec x = test::random_floats(B * T * ld, 97);
  for (bool backward : {false, true})
    for (const OpTable* ops : {&fast_op_table(), &ref_op_table()}) {
      const auto rope = backward ? ops->rope_backward : ops->rope_forward;
      Vec all = x;
      rope(all.data(), B, T, NH, hs, ld, R, 100.0f, pos.data(), nullptr);
      for (int64_t b = 0; b < B; ++b) {
        int64_t t0 = 0;
        for (int64_t len : docs[static_cast<size_t>(b)]) {
          Vec one = rows_of(x, ld, T, b, t0, len);
          rope(one.data(), 1, len, NH, hs, ld, R, 100.0f, nullptr, nullptr);
          EXPECT_EQ(rows_of(all, ld, T, b, t0, len), one)
              << ops->impl << (backward ? " backward" : " forward") << " batch " << b << " at "
              << t0;
          t0 += len;
        }
      }
    }
}

}  // namespace packed_attention_test
}  // namespace
}  // namespace snug
