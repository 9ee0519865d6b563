// The knobs of a training run, named as Hugging Face TrainingArguments names them (snake_case in
// the report's "config", kebab-case on the command line) so that a Trainer user finds them where
// they expect. Flags, help and config keys come from one table, train/flag_table.h. Defaults are
// the Trainer's, with three documented exceptions:
//   - learning_rate 6e-4 (Trainer: 5e-5). snug's default job trains a small model from scratch,
//     where 5e-5 barely moves the loss in 200 steps; 6e-4 is the GPT-3 paper's rate for its
//     125M model and what nanoGPT/llm.c use for GPT-2 small. Fine-tuning runs pass their own.
//   - model/data/seq_len: snug defaults to the built-in job (gpt2-tiny on the built-in corpus,
//     128-token windows) so that `snug train` with no flags trains something in seconds.
//   - logging_steps 10 (Trainer: 500), for short runs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "data/batches.h"
#include "models/model_config.h"
#include "nn/lora.h"
#include "nn/run_options.h"
#include "quant/weight_quant.h"

namespace snug {

struct OptimizerOptions;

struct TrainingArguments {
  std::string model = "gpt2-tiny";
  // --n-layer/--n-embd/--n-head/--vocab-size/--n-positions on top of the --model preset or
  // config.json; model_config() applies them.
  ModelShapeOverrides model_shape;
  // --config-override KEY=VALUE (repeatable): config.json keys of the model by their Hugging
  // Face names, applied after model_shape (models/config_override.h).
  std::vector<std::string> config_override;
  // --task: the model's head (models/model_config.h): causal-lm, masked-lm or
  // sequence-classification; empty: the model's own (causal-lm for decoders; a BERT config's
  // architectures). --num-labels: sequence classification's classes (0: the config's).
  std::string task;
  int64_t num_labels = 0;
  std::string data = "builtin";
  // jsonl data (data/sft_data.h, docs/data.md): the tokenizer (a tokenizer.json or its folder;
  // "" = the one beside a --model config.json), TRL's loss masks, packing and length grouping.
  std::string tokenizer;
  bool completion_only_loss = true;  // prompt-completion records: loss on the completion only
  bool assistant_only_loss = false;  // conversations: loss on the assistant turns only
  bool packing = false;              // several examples per row, kept apart by position ids
  bool group_by_length = false;      // batches of similar lengths (less padding)
  int64_t seq_len = 128;             // --max-length (TRL's name) too: jsonl examples are cut to it
  // Evaluation: --eval-data, or the --eval-split share of --data; every eval_steps optimizer
  // steps (0: only at the end) and at the end, eval_loss and perplexity = exp(eval_loss).
  std::string eval_data;
  double eval_split = 0.0;
  int64_t per_device_eval_batch_size = 8;
  int64_t eval_steps = 0;
  // At the end, load the checkpoint with the best --metric-for-best-model (eval_loss, lower is
  // better; or eval_accuracy, higher is better, for sequence classification); needs
  // --save-steps a multiple of --eval-steps, as the Trainer does.
  bool load_best_model_at_end = false;
  std::string metric_for_best_model = "eval_loss";
  int64_t per_device_train_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  int64_t max_steps = -1;  // > 0 overrides num_train_epochs
  double num_train_epochs = 3.0;
  double learning_rate = 6e-4;
  int64_t warmup_steps = 0;
  std::string lr_scheduler_type = "linear";
  double max_grad_norm = 1.0;  // <= 0 disables clipping
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  uint64_t seed = 42;
  std::string optim = "adamw_torch";
  double momentum = 0.0;                 // sgd (torch.optim.SGD momentum)
  bool optim_8bit_embeddings = false;    // adamw_bnb_8bit: 8-bit states for embeddings too
  bool adafactor_relative_step = false;  // adafactor: the paper's relative step size
  int64_t galore_rank = 128;             // galore_adamw: projection rank (GaLore's defaults)
  int64_t galore_update_proj_gap = 200;  // galore_adamw: steps between projector refreshes
  double galore_scale = 0.25;            // galore_adamw: scale of the projected-back update
  int dataloader_num_workers = 0;
  // Data parallelism (docs/distributed.md): HF's ddp_timeout (seconds every collective may wait
  // for its peers; dist::kDefaultTimeoutSeconds) and ddp_bucket_cap_mb (PyTorch DDP's gradient
  // bucket, MiB; train/grad_sync.h's kDefaultBucketCapMb).
  double ddp_timeout = 1800.0;
  double ddp_bucket_cap_mb = 25.0;
  // HF's ddp_backend: "" (chosen by launcher and device, dist/make_communicator.h), "mpi" or
  // "nccl" (a GPU run of one process then gets an NCCL world of one); HF's other names are
  // refused by name.
  std::string ddp_backend;
  // HF's deepspeed: a DeepSpeed config file whose keys snug reads are applied to these arguments
  // when the command line is parsed (train/deepspeed_config.h); kept for the report's config.
  std::string deepspeed;
  // --zero-stage (DeepSpeed's zero_optimization.stage; docs/distributed.md): 0 = every rank holds
  // everything (DDP); 1 = optimizer state sharded over the ranks; 2 = gradients as well.
  int zero_stage = 0;
  // --offload-optimizer (DeepSpeed's zero_optimization.offload_optimizer.device; train/offload.h):
  // "none", or "cpu": the optimizer's state in the host pool, its update on the host.
  std::string offload_optimizer = "none";
  // --offload-param (DeepSpeed's zero_optimization.offload_param.device; train/offload.h):
  // "none", or "cpu": at --zero-stage 3 only, the rank's parameter shards in the host pool.
  std::string offload_param = "none";
  bool dataloader_pin_memory = true;  // accepted; a CUDA host-allocation mode (see data/prefetch.h)
  std::string attention = "flash";    // flash (memory linear in T) or naive (materialized T x T)
  std::string logits = "chunked";     // chunked (no B x T x V tensor) or full
  // Mixed precision (docs/mixed-precision.md): fp32 master weights and gradients, 16-bit compute
  // copies and saved activations; fp16 adds GradScaler's dynamic loss scaling.
  bool fp16 = false;
  bool bf16 = false;
  // --bf16-full (beyond the seeds): bf16 parameters, gradients and optimizer state, 2+2+4 bytes
  // per parameter with AdamW, weights updated with stochastic rounding; computes as --bf16 (which
  // it implies and may be given with it); --fp16 is an error. adamw_torch/adamw and sgd only.
  bool bf16_full = false;
  // --precision-layout (issue 30): "snug" (the precision flags above decide) or "deepspeed",
  // DeepSpeed's mixed-precision layout and ZeRO's K = 12: bf16 weights and gradients stored as
  // --bf16-full stores them (computes as --bf16), with an fp32 master copy of the weights and
  // fp32 AdamW moments in optimizer_state (2 + 2 + 12 = 16 bytes per parameter); the update
  // runs on the master, the weights are its rounding to nearest even. adamw_torch/adamw only;
  // --bf16-full (no master) and --fp16 (fp16 parameters do not train yet) are refused with it.
  std::string precision_layout = "snug";
  // --torch-dtype (from_pretrained's torch_dtype): the storage of the model's weights,
  // "bfloat16", "float16" or "float32"; "" follows the precision flags (param_dtype(),
  // generation_param_dtype()). A 16-bit storage computes in its dtype (compute_dtype()), as a
  // model loaded in it does. LoRA adapters stay fp32 on any base (PEFT's autocast_adapter_dtype).
  std::string torch_dtype;
  // Which GEMM runs the bf16 products (kernels/gemm_path.h): auto (oneDNN's bf16 matmul where
  // the CPU has bf16 hardware, else widen to fp32), widen, or onednn-bf16.
  std::string gemm_path = "auto";
  bool gradient_checkpointing = false;
  std::string checkpoint_policy = "every-layer";  // every-layer, every-k:K, sqrt, selective
  std::string device = "cpu";
  // Not a flag: the device whose kernel choices (the bf16 GEMM path, the LM head's chunks) a meta
  // dry run replays, set by plan/dry_run.cpp to the planned run's --device as it moves the run to
  // meta; "" means `device`. Read through kernels_device().
  std::string kernel_device;
  const std::string& kernels_device() const {
    return kernel_device.empty() ? device : kernel_device;
  }
  std::optional<int64_t> device_memory;  // bytes; the modelled accelerator's capacity
  int threads = 0;                       // 0: OMP_NUM_THREADS or all cores
  int64_t logging_steps = 10;
  std::string report_json;
  // Checkpoints (train/checkpoint.h): every save_steps optimizer steps (0: never) into
  // output_dir/checkpoint-<step>; resume_from a checkpoint or an output directory.
  int64_t save_steps = 0;
  std::string output_dir = "snug-output";
  // A run that saves into an output dir holding another run's checkpoints stops before step 1
  // unless overwrite_output_dir, which removes them (train/output_dir.h).
  bool overwrite_output_dir = false;
  int64_t save_total_limit = 0;  // keep the newest N checkpoints (0: all)
  std::string resume_from;
  // Start from these weights (safetensors, the family's Hugging Face names; models/registry.h)
  // instead of init_weights(seed), e.g. what `snug export-init` wrote or a Hub checkpoint.
  std::string init_from;
  // --freeze (repeatable): parameters matched by any pattern do not train: no gradient buffer,
  // no optimizer state, weights unchanged (train/freeze.h for the glob/substring rules).
  std::vector<std::string> freeze;
  // LoRA as PEFT's LoraConfig (nn/lora.h): lora_r > 0 adds adapters to the target modules and
  // freezes the base. target_modules is a comma list ("c_attn,c_proj,c_fc", "all-linear");
  // empty: PEFT's default for the model's type (Architecture::default_lora_targets).
  int64_t lora_r = 0;
  double lora_alpha = 8.0;
  double lora_dropout = 0.0;
  std::string target_modules;
  bool use_rslora = false;
  // Loading the base in low precision, as transformers' BitsAndBytesConfig (quant/
  // weight_quant.h): the blocks' Linear weights are stored quantized (frozen) and dequantized
  // per layer for each GEMM. Defaults are BitsAndBytesConfig's (fp4, no double quant, fp32
  // compute). --qlora applies the QLoRA recipe (apply_qlora_recipe()).
  bool load_in_8bit = false;
  bool load_in_4bit = false;
  std::string bnb_4bit_quant_type = "fp4";
  bool bnb_4bit_use_double_quant = false;
  std::string bnb_4bit_compute_dtype = "fp32";
  bool qlora = false;
  // NEFTune (Model::set_neftune_noise_alpha): embedding noise alpha while training; 0 = off.
  double neftune_noise_alpha = 0.0;

  // QLoRA (Dettmers et al. 2023): 4-bit NF4 base with double quantization, bf16 compute, and
  // LoRA on every linear layer (all-linear unless target_modules is set; rank 8 unless lora_r is
  // set), as the paper trains. Sets the fields; flags given after it override them.
  void apply_qlora_recipe();
  LoraConfig lora_config() const;
  // target_modules, or the model type's default when it is empty.
  std::string lora_targets() const;
  // The storage of the quantized base (--load-in-8bit: int8 blockwise absmax; --load-in-4bit:
  // --bnb-4bit-quant-type, --bnb-4bit-use-double-quant), or nullopt.
  std::optional<WeightQuantConfig> weight_quant() const;

  // Throws snug::Error naming the flag for values that cannot work.
  void validate() const;
  // The model's shapes: resolve_model(model) with model_shape and config_override applied.
  ModelConfig model_config() const;
  // The compute precision: fp16 under --fp16 or --torch-dtype float16; bf16 under --bf16,
  // --bf16-full, --precision-layout deepspeed or --torch-dtype bfloat16; else fp32 (validate()
  // refuses the contradictions).
  ComputeDType compute_dtype() const;
  // The parameters' storage dtype in training (create_model's argument): --torch-dtype, else bf16
  // under --bf16-full or --precision-layout deepspeed, else f32 (--bf16/--fp16 keep fp32 masters
  // beside 16-bit compute copies).
  DType param_dtype() const;
  // --precision-layout deepspeed: 16-bit parameters with fp32 master weights in the optimizer.
  bool master_weights() const { return precision_layout == "deepspeed"; }
  // The trainable parameters are stored in 16 bits: --bf16-full or --precision-layout deepspeed
  // (a 16-bit --torch-dtype alone trains only LoRA adapters on a frozen base).
  bool sixteen_bit_training() const { return bf16_full || master_weights(); }
  // The parameters' storage dtype in generation (`snug generate`, `snug plan --inference`):
  // --torch-dtype, else the 16-bit compute dtype of --bf16/--bf16-full/--fp16, else f32. As
  // transformers loads a model for generation in the dtype asked: no fp32 master to update.
  DType generation_param_dtype() const;
  // The report's "config": every flag of train/flag_table.h under its key.
  nlohmann::json to_json() const;
  // What open_data() (data/batches.h) needs: the data flags, with the model's vocabulary.
  DataOptions data_options(int64_t vocab_size) const;
  // metric_for_best_model with the eval_ prefix the Trainer adds ("loss" -> "eval_loss",
  // "accuracy" -> "eval_accuracy").
  std::string best_metric_key() const;
  // The Trainer's default greater_is_better: false for a metric that ends in "loss".
  bool greater_is_better() const;
  // An evaluation is configured (--eval-data or --eval-split).
  bool has_eval() const { return !eval_data.empty() || eval_split > 0; }
  // The optimizer's hyperparameters from these flags (Trainer and estimate share them).
  OptimizerOptions optimizer_options() const;
};

}  // namespace snug
