// The interface's defaults: what a model that cannot generate says when asked to.
#include "models/model.h"

#include "core/error.h"
#include "models/model_config.h"

namespace snug {

ModelTask Model::task() const {
  return ModelTask::causal_lm;
}

nn::KVCacheShape Model::kv_cache_shape() const {
  throw Error(detail::concat(summary().name, " (", summary().model_type,
                             ") cannot generate: it has no KV-cache forward"));
}

Tensor Model::forward_cached(const int32_t*, int64_t, int64_t, nn::KVCache&) {
  kv_cache_shape();  // throws
  return Tensor();
}

}  // namespace snug
