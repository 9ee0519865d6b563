#include "generate/logits_process.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace snug {

void apply_repetition_penalty(std::span<float> scores, std::span<const int32_t> seen,
                              double penalty) {
  if (penalty == 1.0) return;
  const std::set<int32_t> distinct(seen.begin(), seen.end());
  const auto p = static_cast<float>(penalty);
  for (const int32_t t : distinct) {
    float& s = scores[static_cast<size_t>(t)];
    s = s < 0 ? s * p : s / p;
  }
}

void apply_temperature(std::span<float> scores, double temperature) {
  const auto t = static_cast<float>(temperature);
  for (float& s : scores) s /= t;
}

void apply_top_k(std::span<float> scores, int64_t k) {
  if (k <= 0 || k >= static_cast<int64_t>(scores.size())) return;
  std::vector<float> sorted(scores.begin(), scores.end());
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
  const float kth = sorted[static_cast<size_t>(k - 1)];
  for (float& s : scores)
    if (s < kth) s = -std::numeric_limits<float>::infinity();
}

void apply_top_p(std::span<float> scores, double top_p) {
  if (top_p >= 1.0) return;
  const size_t V = scores.size();
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] < scores[b]; });  // ascending
  std::vector<double> probs(V);
  const float mx = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (size_t i = 0; i < V; ++i)
    sum += probs[i] = std::exp(static_cast<double>(scores[order[i]]) - mx);
  double cum = 0;
  for (size_t i = 0; i + 1 < V; ++i) {  // the last (most likely) token is always kept
    cum += probs[i] / sum;
    if (cum <= 1.0 - top_p) scores[order[i]] = -std::numeric_limits<float>::infinity();
  }
}

void log_softmax(std::span<float> scores) {
  const float mx = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (const float s : scores) sum += std::exp(static_cast<double>(s) - mx);
  const double lse = mx + std::log(sum);
  for (float& s : scores) s = static_cast<float>(s - lse);
}

int32_t argmax(std::span<const float> scores) {
  return static_cast<int32_t>(std::max_element(scores.begin(), scores.end()) - scores.begin());
}

int32_t sample_from(std::span<const float> scores, double u) {
  const float mx = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (const float s : scores) sum += std::exp(static_cast<double>(s) - mx);
  double cum = 0;
  const double target = u * sum;
  int32_t last = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double p = std::exp(static_cast<double>(scores[i]) - mx);
    if (p == 0) continue;
    last = static_cast<int32_t>(i);
    cum += p;
    if (cum > target) return last;
  }
  return last;
}

}  // namespace snug
