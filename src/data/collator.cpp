#include "data/collator.h"

#include <vector>

#include "core/error.h"
#include "core/random.h"

namespace snug {

namespace {

// Uniform in [0, 1) from the 53 high bits of a hash.
double unit(uint64_t h) {
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

}  // namespace

void mask_tokens(int32_t* inputs, int32_t* targets, int64_t n, int64_t vocab, int32_t mask_id,
                 uint64_t key, int64_t offset) {
  SNUG_CHECK(vocab > 0 && mask_id >= 0 && mask_id < vocab, "masked-lm collator: mask id ", mask_id,
             " is outside the vocabulary [0, ", vocab, ")");
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h =
        splitmix64_mix(key + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(offset + i + 1));
    if (unit(h) >= kMlmProbability) {
      targets[i] = -100;
      continue;
    }
    targets[i] = inputs[i];
    const uint64_t h2 = splitmix64_mix(h ^ 0x6d61736bull);
    const double u = unit(h2);
    if (u < 0.8)
      inputs[i] = mask_id;
    else if (u < 0.9)
      inputs[i] = static_cast<int32_t>(splitmix64_mix(h2) % static_cast<uint64_t>(vocab));
  }
}

uint64_t collator_key(uint64_t seed, int64_t step, int64_t micro) {
  return splitmix64_mix(splitmix64_mix(seed ^ 0x636f6c6c61746full) ^
                        (static_cast<uint64_t>(step) << 16) ^ static_cast<uint64_t>(micro));
}

int32_t dummy_label(uint64_t seed, int64_t window, int64_t num_labels) {
  const uint64_t h =
      splitmix64_mix(splitmix64_mix(seed ^ 0x6c6162656cull) + static_cast<uint64_t>(window));
  return static_cast<int32_t>(h % static_cast<uint64_t>(num_labels));
}

namespace {
constexpr uint64_t kEvalSalt = 0x6576616c75617465ull;  // "evaluate"
}  // namespace

int32_t dummy_eval_label(uint64_t seed, int64_t row, int64_t num_labels) {
  return dummy_label(seed ^ kEvalSalt, row, num_labels);
}

uint64_t eval_collator_key(uint64_t seed, int64_t first_row) {
  return collator_key(seed ^ kEvalSalt, 0, first_row);
}

void row_labels(int32_t* targets, const int32_t* labels, int64_t B, int64_t T) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) targets[b * T + t] = t == 0 ? labels[b] : -100;
}

void dummy_row_labels(int32_t* targets, const BatchSource& source, uint64_t seed, int64_t epoch,
                      int64_t position, int64_t B, int64_t T, int64_t num_labels) {
  std::vector<int32_t> labels(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b)
    labels[static_cast<size_t>(b)] =
        dummy_label(seed, source.sample_at(epoch, position + b), num_labels);
  row_labels(targets, labels.data(), B, T);
}

}  // namespace snug
