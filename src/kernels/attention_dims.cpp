#include "kernels/attention_dims.h"

#include "core/error.h"

namespace snug {

void check_attention_dims(const AttentionDims& d, const char* what) {
  SNUG_CHECK(d.B >= 0 && d.T >= 0 && d.hs > 0, what, ": batch ", d.B, ", length ", d.T,
             " must not be negative and head size ", d.hs, " must be positive");
  SNUG_CHECK(d.NH > 0 && d.NKV > 0 && d.NH % d.NKV == 0, what, ": ", d.NH,
             " query heads are not a multiple of ", d.NKV, " key/value heads");
  SNUG_CHECK(d.ldq >= d.NH * d.hs && d.ldo >= d.NH * d.hs && d.ldk >= d.NKV * d.hs &&
                 d.ldv >= d.NKV * d.hs,
             what, ": row strides (q ", d.ldq, ", k ", d.ldk, ", v ", d.ldv, ", out ", d.ldo,
             ") do not hold ", d.NH, " query and ", d.NKV, " key/value heads of ", d.hs);
  SNUG_CHECK(d.dropout_p >= 0.0 && d.dropout_p < 1.0, what, ": dropout probability ", d.dropout_p,
             " must be in [0, 1)");
  if (!d.pos) return;
  SNUG_CHECK(d.causal, what, ": position ids (per-document masks) need the causal mask");
  check_position_ids(d.pos, d.B, d.T, what);
}

void check_position_ids(const int32_t* pos, int64_t B, int64_t T, const char* what) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int32_t p = pos[b * T + t];
      SNUG_CHECK(p == 0 || (t > 0 && p == pos[b * T + t - 1] + 1), what, ": position id ", p,
                 " at batch ", b, ", row ", t,
                 " neither starts a document (0) nor follows the previous row's by one");
    }
}

}  // namespace snug
