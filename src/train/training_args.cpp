#include "train/training_args.h"

#include "core/device.h"
#include "core/error.h"
#include "io/excerpt.h"
#include "kernels/backends.h"
#include "kernels/gemm_path.h"
#include "models/registry.h"
#include "nn/run_options.h"
#include "optim/optimizer.h"
#include "optim/registry.h"
#include "train/flag_table.h"
#include "train/number_range.h"
#include "train/schedule.h"

namespace snug {

namespace {

// --torch-dtype's value as a DType; nullopt for "" (follow the precision flags).
std::optional<DType> torch_storage(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name == "bfloat16") return DType::bf16;
  if (name == "float16") return DType::f16;
  if (name == "float32") return DType::f32;
  throw Error(detail::concat("--torch-dtype: unknown dtype '", excerpt(name),
                             "' (known: bfloat16, float16, float32)"));
}

}  // namespace

DataOptions TrainingArguments::data_options(int64_t vocab_size) const {
  DataOptions o;
  o.data = data;
  o.eval_data = eval_data;
  o.eval_split = eval_split;
  o.tokenizer = tokenizer;
  o.model = model;
  o.sft.completion_only_loss = completion_only_loss;
  o.sft.assistant_only_loss = assistant_only_loss;
  o.packing = packing;
  o.group_by_length = group_by_length;
  o.seq_len = seq_len;
  o.vocab_size = vocab_size;
  o.seed = seed;
  return o;
}

void TrainingArguments::validate() const {
  // Every numeric flag within its declared range (train/number_range.h): the CLI refuses a value
  // out of range where it parses it; this holds arguments built in code (and adopted from an
  // adapter's config) to the same ranges.
  for (const TrainingFlag& f : training_flags()) {
    if (!f.range) continue;
    const nlohmann::json v = f.value(*this);
    if (v.is_null()) continue;
    NumberValue n;
    if (f.range->kind == NumberKind::integer) n.i = v.get<int64_t>();
    if (f.range->kind == NumberKind::unsigned_integer) n.u = v.get<uint64_t>();
    if (f.range->kind == NumberKind::real) n.d = v.get<double>();
    SNUG_CHECK(in_range(n, *f.range), f.name(), " ",
               v.is_number_float() ? format_number(n.d) : v.dump(), " is out of range: ", f.name(),
               " takes ", f.range->describe());
  }
  // Sizes beyond these overflow 64-bit counts further on (tokens, steps); no run comes near them.
  constexpr int64_t kMaxTokens = (int64_t{1} << 31) - 1;
  SNUG_CHECK(per_device_train_batch_size <= kMaxTokens / seq_len, "--per-device-train-batch-size ",
             per_device_train_batch_size, " is out of range: with --seq-len ", seq_len,
             " a micro-batch may hold at most ", kMaxTokens, " tokens");
  SNUG_CHECK(max_steps > 0 || num_train_epochs > 0,
             "--max-steps or --num-train-epochs must be positive");
  SNUG_CHECK(save_steps == 0 || !output_dir.empty(), "--output-dir must not be empty");
  SNUG_CHECK(eval_split == 0 || eval_data.empty(),
             "--eval-split and --eval-data are exclusive: give one");
  SNUG_CHECK(per_device_eval_batch_size <= kMaxTokens / seq_len, "--per-device-eval-batch-size ",
             per_device_eval_batch_size, " is out of range");
  SNUG_CHECK(eval_steps == 0 || has_eval(),
             "--eval-steps needs evaluation data: --eval-data or --eval-split");
  SNUG_CHECK(best_metric_key() == "eval_loss" || best_metric_key() == "eval_accuracy",
             "--metric-for-best-model ", metric_for_best_model,
             ": snug evaluates eval_loss, and eval_accuracy for --task sequence-classification "
             "(\"loss\" and \"accuracy\" are accepted for them, as the Trainer prefixes eval_)");
  if (load_best_model_at_end) {
    SNUG_CHECK(has_eval() && eval_steps > 0,
               "--load-best-model-at-end needs evaluations: --eval-steps N with --eval-data or "
               "--eval-split");
    SNUG_CHECK(save_steps > 0 && save_steps % eval_steps == 0,
               "--load-best-model-at-end requires --save-steps (", save_steps,
               ") to be a round multiple of --eval-steps (", eval_steps, ")");
  }
  SNUG_CHECK(init_from.empty() || resume_from.empty(),
             "--init-from and --resume-from cannot be combined (a checkpoint has its own weights)");
  for (const std::string& f : freeze) SNUG_CHECK(!f.empty(), "--freeze: empty pattern");
  if (lora_r > 0) lora_config().validate();
  SNUG_CHECK(!(load_in_8bit && load_in_4bit), "--load-in-8bit and --load-in-4bit are exclusive");
  SNUG_CHECK(bnb_4bit_quant_type == "nf4" || bnb_4bit_quant_type == "fp4",
             "--bnb-4bit-quant-type: unknown type '", excerpt(bnb_4bit_quant_type),
             "' (known: nf4, fp4)");
  SNUG_CHECK(bnb_4bit_compute_dtype == "fp32" || bnb_4bit_compute_dtype == "bf16",
             "--bnb-4bit-compute-dtype: unknown dtype '", excerpt(bnb_4bit_compute_dtype),
             "' (known: fp32, bf16)");
  SNUG_CHECK(!qlora || (load_in_4bit && lora_r > 0),
             "--qlora needs a 4-bit base with LoRA adapters (--load-in-4bit and --lora-r > 0)");
  validate_scheduler(lr_scheduler_type);
  parse_checkpoint_policy(checkpoint_policy, 1);
  parse_attention_impl(attention);
  parse_logits_mode(logits);
  parse_compute_dtype(fp16, bf16);
  kernels::resolve_gemm_path(gemm_path, device);  // known, and available on this CPU or GPU
  // Known by name; whether it can be used here (a GPU, a CUDA build) is asked where the run
  // makes it: `plan --device cuda` needs no GPU.
  SNUG_CHECK(is_device_name(device), "--device: unknown device '", excerpt(device),
             "' (expected cpu, cuda, cuda:N or meta)");
  SNUG_CHECK(ddp_backend.empty() || ddp_backend == "mpi" || ddp_backend == "nccl",
             "--ddp-backend: '", excerpt(ddp_backend),
             "' is not a backend snug has (known: mpi for CPU ranks, nccl for GPU ranks; HF's "
             "gloo, ccl, hccl, cncl and mccl are not built)");
  optimizer_entry(optim);  // throws the message listing the known names
  SNUG_CHECK(!(bf16_full && fp16),
             "--fp16 and --bf16-full are exclusive: --bf16-full stores and computes in bf16");
  const std::optional<DType> storage = torch_storage(torch_dtype);  // known, or it throws
  SNUG_CHECK(!bf16_full || !storage || *storage == DType::bf16,
             "--bf16-full stores bf16; "
             "--torch-dtype ",
             torch_dtype, " contradicts it");
  SNUG_CHECK(!(fp16 && storage == DType::bf16),
             "--fp16 computes in fp16; --torch-dtype bfloat16 stores bf16 (use --bf16)");
  SNUG_CHECK(!(bf16 && storage == DType::f16),
             "--bf16 computes in bf16; --torch-dtype float16 stores fp16 (use --fp16)");
  SNUG_CHECK(offload_optimizer == "none" || offload_optimizer == "cpu",
             "--offload-optimizer: unknown device '", excerpt(offload_optimizer),
             "' (known: none, cpu)");
  SNUG_CHECK(offload_param == "none" || offload_param == "cpu", "--offload-param: unknown device '",
             excerpt(offload_param), "' (known: none, cpu)");
  SNUG_CHECK(offload_param == "none" || zero_stage == 3, "--offload-param ", offload_param,
             " with --zero-stage ", zero_stage,
             ": parameters are offloaded at ZeRO stage 3 only (DeepSpeed's offload_param), where "
             "each rank keeps its shards of them; add --zero-stage 3 or drop --offload-param");
  SNUG_CHECK(precision_layout == "snug" || precision_layout == "deepspeed",
             "--precision-layout: unknown layout '", excerpt(precision_layout),
             "' (known: snug, deepspeed)");
  if (master_weights()) {
    SNUG_CHECK(!bf16_full,
               "--precision-layout deepspeed keeps fp32 master weights; --bf16-full keeps none: "
               "give one of them");
    SNUG_CHECK(!fp16 && storage != DType::f16,
               "--precision-layout deepspeed stores bf16 weights and gradients; its fp16 form "
               "(--fp16) is not built yet (fp16 parameters do not train): use --bf16 or drop "
               "--fp16");
    SNUG_CHECK(!storage || *storage == DType::bf16,
               "--precision-layout deepspeed stores bf16; "
               "--torch-dtype ",
               torch_dtype, " contradicts it");
    SNUG_CHECK(optimizer_entry(optim).master_weights, "--precision-layout deepspeed: --optim ",
               optim, " keeps no fp32 master weights; use --optim ",
               master_weight_optimizer_names(), " (or --precision-layout snug)");
  }
  SNUG_CHECK(!bf16_full || supports_bf16_params(optim), "--bf16-full: --optim ", optim,
             " cannot update bf16 parameters (it keeps fp32 state of the parameters' size); "
             "use --optim ",
             bf16_optimizer_names(), ", or drop --bf16-full");
}

ComputeDType TrainingArguments::compute_dtype() const {
  const std::optional<DType> t = torch_storage(torch_dtype);
  if (fp16 || t == DType::f16) return ComputeDType::f16;
  if (bf16 || bf16_full || master_weights() || t == DType::bf16) return ComputeDType::bf16;
  return ComputeDType::f32;
}

DType TrainingArguments::param_dtype() const {
  if (const std::optional<DType> t = torch_storage(torch_dtype)) return *t;
  return sixteen_bit_training() ? DType::bf16 : DType::f32;
}

DType TrainingArguments::generation_param_dtype() const {
  if (const std::optional<DType> t = torch_storage(torch_dtype)) return *t;
  switch (compute_dtype()) {
    case ComputeDType::f16:
      return DType::f16;
    case ComputeDType::bf16:
      return DType::bf16;
    case ComputeDType::f32:
      break;
  }
  return DType::f32;
}

std::string TrainingArguments::best_metric_key() const {
  if (metric_for_best_model.rfind("eval_", 0) == 0) return metric_for_best_model;
  return "eval_" + metric_for_best_model;
}

bool TrainingArguments::greater_is_better() const {
  const std::string m = best_metric_key();
  const std::string loss = "loss";
  return m.size() < loss.size() || m.compare(m.size() - loss.size(), loss.size(), loss) != 0;
}

void TrainingArguments::apply_qlora_recipe() {
  qlora = true;
  load_in_4bit = true;
  load_in_8bit = false;
  bnb_4bit_quant_type = "nf4";
  bnb_4bit_use_double_quant = true;
  bnb_4bit_compute_dtype = "bf16";
  if (lora_r == 0) lora_r = 8;
  // The QLoRA paper puts adapters on every linear layer (adapters on q/v alone did not match
  // full fine-tuning there); PEFT's all-linear leaves the output head out, as the paper does.
  if (target_modules.empty()) target_modules = "all-linear";
}

std::string TrainingArguments::lora_targets() const {
  if (!target_modules.empty()) return target_modules;
  return architecture(model_config().shape.model_type).default_lora_targets;
}

LoraConfig TrainingArguments::lora_config() const {
  LoraConfig c;
  c.r = lora_r;
  c.alpha = lora_alpha;
  c.dropout = lora_dropout;
  c.target_modules = parse_target_modules(lora_targets());
  c.use_rslora = use_rslora;
  return c;
}

std::optional<WeightQuantConfig> TrainingArguments::weight_quant() const {
  WeightQuantConfig c;
  if (load_in_4bit) {
    c.format = parse_4bit_quant_type(bnb_4bit_quant_type);
    c.double_quant = bnb_4bit_use_double_quant;
    return c;
  }
  if (load_in_8bit) {
    c.format = quant::Format::int8_blockwise;
    return c;
  }
  return std::nullopt;
}

ModelConfig TrainingArguments::model_config() const {
  const ModelConfig c = resolve_model(model, model_shape, config_override);
  if (task.empty() && num_labels == 0) return c;
  return with_task(c, task.empty() ? c.task : parse_task(task, "--task"), num_labels);
}

OptimizerOptions TrainingArguments::optimizer_options() const {
  OptimizerOptions o;
  o.beta1 = static_cast<float>(adam_beta1);
  o.beta2 = static_cast<float>(adam_beta2);
  o.eps = static_cast<float>(adam_epsilon);
  o.weight_decay = static_cast<float>(weight_decay);
  o.momentum = static_cast<float>(momentum);
  o.optim_8bit_embeddings = optim_8bit_embeddings;
  o.adafactor_relative_step = adafactor_relative_step;
  o.galore_rank = galore_rank;
  o.galore_update_proj_gap = galore_update_proj_gap;
  o.galore_scale = static_cast<float>(galore_scale);
  o.rounding_seed = seed;
  o.master_weights = master_weights();
  return o;
}

// Every flag's value under its key (train/flag_table.h).
nlohmann::json TrainingArguments::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const TrainingFlag& f : training_flags())
    if (!f.key.empty()) {
      nlohmann::json* at = &j;  // a dotted key ("model_shape.n_layer") nests
      std::string key = f.key;
      for (size_t dot; (dot = key.find('.')) != std::string::npos; key = key.substr(dot + 1))
        at = &(*at)[key.substr(0, dot)];
      (*at)[key] = f.value(*this);
    }
  return j;
}

}  // namespace snug
