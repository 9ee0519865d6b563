// The techniques x families matrix of issue 17 ("tested pairwise, not as a full product"): a
// strength-2 covering array of five 4-level factors, the 16-row orthogonal array over GF(4)
// with rows (a, b, a+b, a+2b, a+3b), so that every pair of levels of every two factors appears
// exactly once. Factor 0 is the model (family or head), then precision, checkpointing,
// optimizer and one extra technique. Level 3 of precision is --bf16-full, which needs AdamW
// (optimizer level 0) and no LoRA (extra level 3 is the LoRA one): such a row trains with
// AdamW and extra level 0, and a copy of it in fp32 keeps the other pairs of its optimizer and
// extra. 20 rows in all.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace snug::test {

struct TechniqueRow {
  int model, precision, checkpoint, optim, extra;  // each a level 0..3
};

inline std::vector<TechniqueRow> techniques_covering_array() {
  // GF(4) = {0, 1, x, x+1} as 0..3: addition is xor, multiplication by table.
  static const int mul[4][4] = {{0, 0, 0, 0}, {0, 1, 2, 3}, {0, 2, 3, 1}, {0, 3, 1, 2}};
  std::vector<TechniqueRow> rows;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      TechniqueRow r{a, b, a ^ b, a ^ mul[2][b], a ^ mul[3][b]};
      if (r.precision == 3 && (r.optim != 0 || r.extra == 3)) {
        rows.push_back({r.model, 0, r.checkpoint, r.optim, r.extra});
        r.optim = 0;
        if (r.extra == 3) r.extra = 0;
      }
      rows.push_back(r);
    }
  return rows;
}

// The flags of factors 1 to 3, the same for every model: precision, checkpointing, optimizer.
inline std::string shared_technique_flags(const TechniqueRow& r) {
  static const std::array<const char*, 4> precision = {"", " --bf16", " --fp16", " --bf16-full"};
  static const std::array<const char*, 4> checkpoint = {
      "", " --gradient-checkpointing", " --gradient-checkpointing --checkpoint-policy selective",
      " --gradient-checkpointing --checkpoint-policy every-k:2"};
  static const std::array<const char*, 4> optim = {"", " --optim adafactor",
                                                   " --optim adamw_bnb_8bit", " --optim lion"};
  return std::string(precision[static_cast<size_t>(r.precision)]) +
         checkpoint[static_cast<size_t>(r.checkpoint)] + optim[static_cast<size_t>(r.optim)];
}

}  // namespace snug::test
