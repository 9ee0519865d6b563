// The optimizer-update ops (kernels/optim_ops.inc): the fast kernels against the plain
// references, through the fast and ref op tables, over several steps on sizes that cross the
// OpenMP chunks and the 8-bit blocks. Where both sides compute the same per-element arithmetic
// they must agree bit for bit; Adafactor's and AdaLomo's RMS(U) is a parallel sum in the fast
// kernel, so those compare to a relative 1e-6. The optimizers' values themselves are checked
// against PyTorch/bitsandbytes in tests/optim.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/op_table.h"
#include "optim/quant8.h"
#include "support/random.h"

namespace snug {
namespace {
namespace optim_ops_test {

using test::random_floats;
using Vec = std::vector<float>;

constexpr int64_t kN = 2 * 8192 + 77;  // crosses the fast kernels' 8192-element chunks

// Bitwise equality (NaN payloads included).
template <typename T>
void expect_same(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0) << what;
}

void expect_close(const Vec& a, const Vec& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], 1e-6 * (1e-3 + std::fabs(b[i]))) << what << " at " << i;
}

// Parameters, gradients per step and states, one copy per table.
struct Buffers {
  Vec p, m, v;
};

// Gradient of step t, with a NaN and an infinity for the bitsandbytes updates to skip.
Vec gradient(int64_t n, int t, bool non_finite) {
  Vec g = random_floats(n, 100 + static_cast<uint64_t>(t));
  if (non_finite) {
    g[3] = std::numeric_limits<float>::quiet_NaN();
    g[static_cast<size_t>(n) - 2] = std::numeric_limits<float>::infinity();
  }
  return g;
}

// Runs `step(table, run, g, t)` for t = 1..3 on both tables from the same start.
template <typename Step>
void run_both(int64_t n, bool non_finite, Step step, Buffers& fast, Buffers& ref) {
  fast = {random_floats(n, 1), Vec(static_cast<size_t>(n), 0.0f),
          Vec(static_cast<size_t>(n), 0.0f)};
  ref = fast;
  for (int t = 1; t <= 3; ++t) {
    const Vec g = gradient(n, t, non_finite);
    step(fast_op_table(), fast, g, t);
    step(ref_op_table(), ref, g, t);
  }
}

TEST(OptimOps, SgdFastEqualsRef) {
  for (float mu : {0.0f, 0.9f}) {
    Buffers fast, ref;
    run_both(
        kN, false,
        [mu](const OpTable& ops, Buffers& r, const Vec& g, int t) {
          ops.sgd_update(r.p.data(), g.data(), mu != 0.0f ? r.m.data() : nullptr, kN, 0.1f, mu,
                         0.01f, t == 1);
        },
        fast, ref);
    expect_same(fast.p, ref.p, "p");
    expect_same(fast.m, ref.m, "momentum buffer");
  }
}

TEST(OptimOps, LionFastEqualsRef) {
  Buffers fast, ref;
  run_both(
      kN, false,
      [](const OpTable& ops, Buffers& r, const Vec& g, int) {
        ops.lion_update(r.p.data(), g.data(), r.m.data(), kN, 1e-3f, 0.9f, 0.99f, 0.1f);
      },
      fast, ref);
  expect_same(fast.p, ref.p, "p");
  expect_same(fast.m, ref.m, "m");
}

TEST(OptimOps, LionBnbFastEqualsRefAndSkipsNonFiniteGradients) {
  Buffers fast, ref;
  run_both(
      kN, true,
      [](const OpTable& ops, Buffers& r, const Vec& g, int) {
        ops.lion_bnb_update(r.p.data(), g.data(), r.m.data(), kN, 1e-3f, 0.9f, 0.99f, 0.1f);
      },
      fast, ref);
  expect_same(fast.p, ref.p, "p");
  expect_same(fast.m, ref.m, "m");
  EXPECT_EQ(fast.m[3], 0.0f);
  EXPECT_EQ(fast.p[3], random_floats(kN, 1)[3]);  // never updated
}

TEST(OptimOps, AdamwBnbFastEqualsRef) {
  Buffers fast, ref;
  run_both(
      kN, true,
      [](const OpTable& ops, Buffers& r, const Vec& g, int t) {
        ops.adamw_bnb_update(r.p.data(), g.data(), r.m.data(), r.v.data(), kN, 1e-3f, 0.9f, 0.999f,
                             1e-8f, 0.01f, t);
      },
      fast, ref);
  expect_same(fast.p, ref.p, "p");
  expect_same(fast.m, ref.m, "m");
  expect_same(fast.v, ref.v, "v");
}

// 8-bit states: codes and block absmax per table.
struct State8 {
  std::vector<uint8_t> qm, qv;
  Vec am, av;
};

TEST(OptimOps, EightBitUpdatesFastEqualRef) {
  const int64_t n = 5 * quant8::kOptimizerBlock + 37;  // a short last block
  const int64_t nb = quant8::num_blocks(n, quant8::kOptimizerBlock);
  const quant8::Code* c1 = &quant8::signed_code();
  const quant8::Code* c2 = &quant8::unsigned_code();
  for (bool adam : {true, false}) {
    SCOPED_TRACE(adam ? "adamw" : "lion");
    Vec p[2] = {random_floats(n, 1), random_floats(n, 1)};
    State8 s[2];
    for (State8& st : s)
      st = {std::vector<uint8_t>(n, 127), std::vector<uint8_t>(n, 0), Vec(nb, 0.0f), Vec(nb, 0.0f)};
    const OpTable* tables[2] = {&fast_op_table(), &ref_op_table()};
    for (int t = 1; t <= 3; ++t) {
      Vec g = gradient(n, t, true);
      for (size_t k = 0; k < 8; ++k) g[k] = 0.0f;  // a block start with zero gradients
      for (int k = 0; k < 2; ++k) {
        if (adam)
          tables[k]->adamw_bnb_update_8bit(p[k].data(), g.data(), s[k].qm.data(), s[k].qv.data(),
                                           s[k].am.data(), s[k].av.data(), n, 1e-3f, 0.9f, 0.999f,
                                           1e-8f, 0.01f, t, c1, c2);
        else
          tables[k]->lion_bnb_update_8bit(p[k].data(), g.data(), s[k].qm.data(), s[k].am.data(), n,
                                          1e-3f, 0.9f, 0.99f, 0.1f, c1);
      }
    }
    expect_same(p[0], p[1], "p");
    expect_same(s[0].qm, s[1].qm, "m codes");
    expect_same(s[0].am, s[1].am, "m absmax");
    expect_same(s[0].qv, s[1].qv, "v codes");
    expect_same(s[0].av, s[1].av, "v absmax");
    EXPECT_GT(s[0].am[0], 0.0f);
  }
}

TEST(OptimOps, AdafactorFastMatchesRef) {
  // A batch of two (33, 17) matrices, and a vector.
  for (bool matrix : {true, false}) {
    SCOPED_TRACE(matrix ? "matrix" : "vector");
    const int64_t batch = matrix ? 2 : 1, rows = matrix ? 33 : 1, cols = matrix ? 17 : 1001;
    const int64_t n = batch * rows * cols;
    Vec w[2] = {random_floats(n, 1), random_floats(n, 1)};
    Vec R[2], C[2], V[2];
    for (int k = 0; k < 2; ++k) {
      R[k].assign(static_cast<size_t>(batch * rows), 0.0f);
      C[k].assign(static_cast<size_t>(batch * cols), 0.0f);
      V[k].assign(static_cast<size_t>(n), 0.0f);
    }
    const OpTable* tables[2] = {&fast_op_table(), &ref_op_table()};
    for (int t = 1; t <= 3; ++t) {
      const Vec g = gradient(n, t, false);
      const float beta2t = static_cast<float>(1.0 - std::pow(t, -0.8));
      for (int k = 0; k < 2; ++k)
        tables[k]->adafactor_update(w[k].data(), g.data(), matrix ? R[k].data() : nullptr,
                                    matrix ? C[k].data() : nullptr, matrix ? nullptr : V[k].data(),
                                    batch, rows, cols, beta2t, 1.0f - beta2t, 1e-2f, -1e-4f, true);
    }
    expect_close(w[0], w[1], "w");
    expect_same(R[0], R[1], "R");
    expect_same(C[0], C[1], "C");
    expect_same(V[0], V[1], "V");
  }
}

TEST(OptimOps, AdalomoFastMatchesRef) {
  for (bool matrix : {true, false}) {
    SCOPED_TRACE(matrix ? "matrix" : "vector");
    const int64_t rows = matrix ? 40 : 1, cols = matrix ? 23 : 777, n = rows * cols;
    Vec w[2] = {random_floats(n, 1), random_floats(n, 1)};
    Vec R[2], C[2], V[2], g[2];
    for (int k = 0; k < 2; ++k) {
      R[k].assign(static_cast<size_t>(rows), 0.0f);
      C[k].assign(static_cast<size_t>(cols), 0.0f);
      V[k].assign(static_cast<size_t>(n), 0.0f);
    }
    const OpTable* tables[2] = {&fast_op_table(), &ref_op_table()};
    for (int t = 1; t <= 3; ++t) {
      const float beta2t = static_cast<float>(1.0 - std::pow(t, -0.8));
      for (int k = 0; k < 2; ++k) {
        g[k] = gradient(n, t, false);
        tables[k]->adalomo_update(w[k].data(), g[k].data(), matrix ? R[k].data() : nullptr,
                                  matrix ? C[k].data() : nullptr, matrix ? nullptr : V[k].data(),
                                  rows, cols, beta2t, 1.0f - beta2t, 1e-2f, 0.999f, true);
      }
      expect_same(g[0], g[1], "U written over g");
    }
    expect_close(w[0], w[1], "w");
    expect_same(R[0], R[1], "R");
    expect_same(C[0], C[1], "C");
    expect_same(V[0], V[1], "V");
  }
}

TEST(OptimOps, LomoFastEqualsRef) {
  for (float coef : {1.0f, 0.25f}) {
    Buffers fast, ref;
    run_both(
        kN, false,
        [coef](const OpTable& ops, Buffers& r, const Vec& g, int) {
          ops.lomo_update(r.p.data(), g.data(), kN, 1e-2f, 0.1f, coef);
        },
        fast, ref);
    expect_same(fast.p, ref.p, "p");
  }
}

TEST(OptimOps, GaloreUpdatesFastEqualRef) {
  Buffers fast, ref;
  run_both(
      kN, false,
      [](const OpTable& ops, Buffers& r, const Vec& g, int) {
        ops.galore_adam_update(r.p.data(), g.data(), r.m.data(), r.v.data(), kN, 0.9f, 0.999f,
                               1e-8f, -1e-3f, -1e-5f, true);
      },
      fast, ref);
  expect_same(fast.p, ref.p, "p (plain)");
  expect_same(fast.m, ref.m, "m (plain)");
  expect_same(fast.v, ref.v, "v (plain)");
  run_both(
      kN, false,
      [](const OpTable& ops, Buffers& r, const Vec& g, int) {
        Vec low = g;
        ops.galore_adam_normalize(low.data(), r.m.data(), r.v.data(), kN, 0.9f, 0.999f, 1e-8f);
        ops.galore_apply(r.p.data(), low.data(), kN, -1e-3f, 0.25f, -1e-5f, true);
      },
      fast, ref);
  expect_same(fast.p, ref.p, "p (projected)");
  expect_same(fast.m, ref.m, "m (projected)");
  expect_same(fast.v, ref.v, "v (projected)");
}

TEST(OptimOps, GaloreProjectorFastMatchesRef) {
  // LAPACK's eigenvectors of the Gram matrix against Jacobi sweeps: same vectors, same order and
  // signs, to float rounding.
  for (bool right : {true, false}) {
    SCOPED_TRACE(right ? "right (m >= n)" : "left (m < n)");
    const int64_t m = right ? 24 : 9, n = right ? 11 : 30, r = 4;
    const Vec G = random_floats(m * n, 7);
    const int64_t size = right ? r * n : m * r;
    Vec fast(static_cast<size_t>(size)), ref(static_cast<size_t>(size));
    fast_op_table().galore_projector(fast.data(), G.data(), m, n, r, right);
    ref_op_table().galore_projector(ref.data(), G.data(), m, n, r, right);
    for (int64_t i = 0; i < size; ++i) EXPECT_NEAR(fast[i], ref[i], 1e-5) << i;
  }
}

}  // namespace optim_ops_test
}  // namespace
}  // namespace snug
