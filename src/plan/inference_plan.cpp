#include "plan/inference_plan.h"

#include <cstdio>

#include "core/device.h"
#include "core/error.h"
#include "generate/generate.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "train/model_setup.h"

namespace snug {

namespace {

double millions(int64_t n) {
  return static_cast<double>(n) / 1e6;
}

// As the plan speaks of precisions: fp32, bf16, fp16.
std::string precision_name(DType d) {
  return d == DType::f32 ? "fp32" : d == DType::f16 ? "fp16" : "bf16";
}

}  // namespace

InferenceShape inference_shape(const TrainingArguments& args, int64_t max_new_tokens,
                               int64_t num_beams) {
  SNUG_CHECK(max_new_tokens >= 1, "--max-new-tokens must be >= 1, got ", max_new_tokens);
  SNUG_CHECK(num_beams >= 1, "--num-beams must be >= 1, got ", num_beams);
  SNUG_CHECK(args.per_device_eval_batch_size >= 1,
             "--per-device-eval-batch-size (the prompts of plan --inference) must be >= 1, got ",
             args.per_device_eval_batch_size);
  const int64_t prompt = args.seq_len - max_new_tokens;
  SNUG_CHECK(prompt > 0, "plan --inference: --seq-len ", args.seq_len,
             " is the whole context, prompt and new tokens; with --max-new-tokens ", max_new_tokens,
             " it leaves the prompt ", prompt,
             " tokens (it needs at least 1: raise --seq-len or lower --max-new-tokens)");
  return {.batch = args.per_device_eval_batch_size,
          .prompt_tokens = prompt,
          .max_new_tokens = max_new_tokens,
          .num_beams = num_beams};
}

InferencePlan inference_dry_run(const TrainingArguments& args, const InferenceShape& shape,
                                std::vector<MemoryEvent>* timeline) {
  const ModelConfig cfg = args.model_config();
  Device dev(meta_backend());
  keep_pages_of(dev, args.kernels_device());
  dev.pool().enable_timeline(timeline != nullptr);
  // As `snug generate` builds it (cli/generate_command.cpp).
  const auto model = create_model(cfg, dev, args.generation_param_dtype(), args.weight_quant());
  InferencePlan p;
  try {
    p.kv = model->kv_cache_shape();
  } catch (const Error& e) {
    throw Error(
        detail::concat("plan --inference: ", e.what(), " (plan its training without --inference)"));
  }
  load_initial_weights(*model, args, cfg);
  prepare_generation(*model, args);
  p.params = count_params(model->parameters());
  p.trainable_params = count_params(model->parameters(), true);
  for (const Parameter* q : model->parameters()) {
    if (q->quantized()) continue;
    if (q->value.dtype() == DType::f32) {
      p.f32_params += q->numel();
    } else {
      p.half_params += q->numel();
      p.half_dtype = q->value.dtype();
    }
  }
  p.compute_copy_params =
      args.compute_dtype() != ComputeDType::f32 ? model->num_compute_copy_params() : 0;
  p.kv = model->kv_cache_shape();  // in the compute dtype prepare_generation set

  GenerationConfig g;  // no eos: the dry run goes to max_new_tokens (generate/generate.h)
  g.max_new_tokens = shape.max_new_tokens;
  g.num_beams = shape.num_beams;
  const std::vector<std::vector<int32_t>> prompts(
      static_cast<size_t>(shape.batch),
      std::vector<int32_t>(static_cast<size_t>(shape.prompt_tokens), 0));
  const BatchGenerationResult r = generate_batch(*model, prompts, g);
  p.kv_cache_bytes = r.kv_cache_bytes;
  p.forwards = r.forwards;
  p.memory = dev.pool().stats();
  if (timeline) *timeline = dev.pool().timeline();
  return p;
}

std::string kv_cache_formula(const InferenceShape& s, const nn::KVCacheShape& kv) {
  const auto e = static_cast<int64_t>(dtype_size(kv.dtype));
  const int64_t bytes = 2 * s.rows() * kv.layers * kv.kv_heads * kv.head_dim * s.context() * e;
  const std::string rows =
      s.num_beams > 1 ? detail::concat(s.rows(), " (batch ", s.batch, " x ", s.num_beams, " beams)")
                      : detail::concat(s.rows(), " (batch)");
  return detail::concat("2 x ", rows, " x ", kv.layers, " (layers) x ", kv.kv_heads,
                        " (kv heads) x ", kv.head_dim, " (head_dim) x ", s.context(),
                        " (context) x ", e, " (bytes, ", precision_name(kv.dtype), ") = ", bytes,
                        " bytes");
}

std::string weights_formula(const TrainingArguments& args, const InferencePlan& p) {
  const int64_t bytes = p.memory.max_by_category[static_cast<size_t>(Category::weights)];
  char per[64];
  std::snprintf(per, sizeof per, "%.2f bytes per parameter",
                static_cast<double>(bytes) / static_cast<double>(p.params));
  char buf[320];
  if (args.weight_quant()) {
    std::snprintf(buf, sizeof buf, "%lld bytes for %.2fM parameters, a quantized base (%s)",
                  static_cast<long long>(bytes), millions(p.params),
                  args.weight_quant()->resolved().describe().c_str());
    return detail::concat(buf, ", ", per);
  }
  // Each storage's term: the 16-bit parameters, the fp32 ones (all of them, or a 16-bit base's
  // LoRA adapters), the 16-bit compute copies of fp32 GEMM weights (--torch-dtype float32 --bf16).
  std::string terms;
  const auto term = [&](int64_t size, int64_t n, const std::string& what) {
    if (n == 0) return;
    std::snprintf(buf, sizeof buf, "%lld x %.2fM (%s)", static_cast<long long>(size), millions(n),
                  what.c_str());
    terms += (terms.empty() ? "" : " + ") + std::string(buf);
  };
  const std::string half = precision_name(p.half_dtype);
  term(2, p.half_params, half);
  term(4, p.f32_params,
       p.half_params > 0           ? "fp32 LoRA adapters"
       : p.compute_copy_params > 0 ? "fp32 master"
                                   : "fp32");
  const std::string copies =
      args.compute_dtype() == ComputeDType::f16 ? "fp16" : std::string("bf16");
  term(2, p.compute_copy_params, copies + " compute copies of the GEMM weights");
  return detail::concat(terms, " = ", bytes, " bytes, ", per);
}

nlohmann::json inference_json(const InferenceShape& s, const InferencePlan& p) {
  return {{"batch", s.batch},
          {"prompt_tokens", s.prompt_tokens},
          {"max_new_tokens", s.max_new_tokens},
          {"num_beams", s.num_beams},
          {"context", s.context()},
          {"kv_cache_bytes", p.kv_cache_bytes},
          {"kv_cache",
           {{"layers", p.kv.layers},
            {"kv_heads", p.kv.kv_heads},
            {"head_dim", p.kv.head_dim},
            {"bytes_per_element", dtype_size(p.kv.dtype)},
            {"dtype", dtype_name(p.kv.dtype)}}},
          {"forwards", p.forwards},
          {"params", p.params},
          {"param_dtype", dtype_name(p.half_params > 0 ? p.half_dtype : DType::f32)},
          {"compute_copy_params", p.compute_copy_params}};
}

}  // namespace snug
