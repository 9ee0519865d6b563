#include "optim/factored_moment.h"

#include <algorithm>
#include <cmath>

namespace snug {

FactoredMoment::Dims FactoredMoment::dims(const Shape& shape) {
  if (shape.size() < 2) return {1, 1, shape_numel(shape)};
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) batch *= shape[i];
  return {batch, shape[shape.size() - 2], shape.back()};
}

int64_t FactoredMoment::state_bytes(const Shape& shape) {
  if (shape.size() < 2) return 4 * shape_numel(shape);
  const Dims d = dims(shape);
  return 4 * d.batch * (d.rows + d.cols);
}

void FactoredMoment::allocate(const Tensor& value, Device& dev) {
  if (allocated()) return;
  const Shape& sh = value.shape();
  if (sh.size() >= 2) {
    const Shape row_shape(sh.begin(), sh.end() - 1);
    Shape col_shape(sh.begin(), sh.end() - 2);
    col_shape.push_back(sh.back());
    row = Tensor::zeros(row_shape, DType::f32, Category::optimizer_state, dev);
    col = Tensor::zeros(col_shape, DType::f32, Category::optimizer_state, dev);
  } else {
    full = Tensor::zeros(sh, DType::f32, Category::optimizer_state, dev);
  }
}

void FactoredMoment::append_state(const std::string& name,
                                  std::vector<std::pair<std::string, Tensor*>>& out) {
  if (full.defined()) {
    out.emplace_back(name + ".exp_avg_sq", &full);
  } else {
    out.emplace_back(name + ".exp_avg_sq_row", &row);
    out.emplace_back(name + ".exp_avg_sq_col", &col);
  }
}

Beta2t adafactor_beta2t(double t) {
  const double beta2t = 1.0 - std::pow(t, kAdafactorDecayRate);
  return {static_cast<float>(beta2t), static_cast<float>(1.0 - beta2t)};
}

double rms_of(const OpTable& ops, const float* x, int64_t n) {
  return std::sqrt(ops.sum_squares(x, n)) / std::sqrt(static_cast<double>(n));
}

float relative_lr(float rms_p, double scale) {
  return static_cast<float>(std::max(kAdafactorEps2, static_cast<double>(rms_p)) * scale);
}

}  // namespace snug
