// The interface's defaults: what a model that cannot generate says when asked to.
#include "models/causal_lm.h"

#include "core/error.h"
#include "models/model_config.h"

namespace snug {

ModelTask CausalLM::task() const {
  return ModelTask::causal_lm;
}

nn::KVCacheShape CausalLM::kv_cache_shape() const {
  throw Error(detail::concat(summary().name, " (", summary().model_type,
                             ") cannot generate: it has no KV-cache forward"));
}

Tensor CausalLM::forward_cached(const int32_t*, int64_t, int64_t, nn::KVCache&) {
  kv_cache_shape();  // throws
  return Tensor();
}

}  // namespace snug
