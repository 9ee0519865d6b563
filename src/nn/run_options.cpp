#include "nn/run_options.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug {

CheckpointConfig parse_checkpoint_policy(const std::string& text, int64_t n_layer) {
  CheckpointConfig c;
  if (text == "none") return c;
  if (text == "every-layer") {
    c.policy = CheckpointPolicy::every_layer;
    return c;
  }
  if (text == "selective") {
    c.policy = CheckpointPolicy::selective;
    return c;
  }
  if (text == "sqrt") {
    c.policy = CheckpointPolicy::every_k;
    c.every_k = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n_layer))));
    return c;
  }
  const std::string prefix = "every-k:";
  if (text.rfind(prefix, 0) == 0) {
    const std::string num = text.substr(prefix.size());
    char* end = nullptr;
    const long k = std::strtol(num.c_str(), &end, 10);
    SNUG_CHECK(!num.empty() && end && *end == '\0' && k >= 1, "--checkpoint-policy '",
               excerpt(text), "': K must be a positive integer");
    c.policy = CheckpointPolicy::every_k;
    c.every_k = k;
    return c;
  }
  throw Error(detail::concat("--checkpoint-policy: unknown policy '", excerpt(text),
                             "' (known: every-layer, every-k:K, sqrt, selective)"));
}

LogitsMode parse_logits_mode(const std::string& text) {
  if (text == "chunked") return LogitsMode::chunked;
  if (text == "full") return LogitsMode::full;
  throw Error(
      detail::concat("--logits: unknown mode '", excerpt(text), "' (known: chunked, full)"));
}

AttentionImpl parse_attention_impl(const std::string& text) {
  if (text == "flash") return AttentionImpl::flash;
  if (text == "naive") return AttentionImpl::naive;
  throw Error(detail::concat("--attention: unknown implementation '", excerpt(text),
                             "' (known: flash, naive)"));
}

ComputeDType parse_compute_dtype(bool fp16, bool bf16) {
  SNUG_CHECK(!(fp16 && bf16), "--fp16 and --bf16 are exclusive: pick one");
  return fp16 ? ComputeDType::f16 : bf16 ? ComputeDType::bf16 : ComputeDType::f32;
}

}  // namespace snug
