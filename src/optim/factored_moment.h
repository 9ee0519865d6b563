// The factored second moment that Adafactor (optim/adafactor.h) and AdaLomo (optim/lomo.h) keep
// per parameter, in one place: its shapes, bytes, allocation and checkpoint names, the step's
// decay beta2_t = 1 - t^-0.8, and the relative step size. A matrix (ndim >= 2: the last two dims,
// rows x cols, with the leading dims as a batch) keeps the row and column statistics R (.., rows)
// and C (.., cols); a vector keeps the full V. State: 4 * batch * (rows + cols) bytes per matrix,
// 4 * n per vector.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/op_table.h"

namespace snug {

inline constexpr double kAdafactorEps2 = 1e-3;       // floor of RMS(p) in the relative step
inline constexpr double kAdafactorDecayRate = -0.8;  // beta2_t = 1 - t^decay_rate

struct FactoredMoment {
  Tensor row, col;  // matrices
  Tensor full;      // vectors

  // The update op's view of a parameter of this shape: (batch, rows, cols); a vector is
  // (1, 1, n).
  struct Dims {
    int64_t batch, rows, cols;
  };
  static Dims dims(const Shape& shape);
  static int64_t state_bytes(const Shape& shape);

  bool allocated() const { return row.defined() || full.defined(); }
  // Zeroed optimizer_state tensors on `dev` for a parameter value of value's shape (once).
  void allocate(const Tensor& value, Device& dev);
  // "<name>.exp_avg_sq" (vectors), or "<name>.exp_avg_sq_row" and "<name>.exp_avg_sq_col".
  void append_state(const std::string& name, std::vector<std::pair<std::string, Tensor*>>& out);
};

// beta2_t = 1 - t^-0.8 at step t >= 1, and 1 - beta2_t, both rounded from double.
struct Beta2t {
  float beta2t, one_minus_beta2t;
};
Beta2t adafactor_beta2t(double t);

// RMS(x) of n floats from the device's sum of squares (thread-count independent).
double rms_of(const OpTable& ops, const float* x, int64_t n);
// The relative step max(1e-3, RMS(p)) * scale, rounded to float.
float relative_lr(float rms_p, double scale);

}  // namespace snug
