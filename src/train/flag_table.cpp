#include "train/flag_table.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/device.h"
#include "core/error.h"
#include "models/registry.h"
#include "optim/optimizer.h"
#include "optim/registry.h"

namespace snug {

namespace {

using TA = TrainingArguments;
using F = FlagForm;
using S = Shown;

// Declared ranges (train/number_range.h). The model shape's bounds keep the size products of a
// parameter or activation count far inside 64 bits.
constexpr int64_t kMaxCount = kMaxFlagCount;
constexpr int64_t kMaxThreads = kMaxFlagThreads;
NumberRange Int(int64_t lo, int64_t hi) {
  return NumberRange::integer(lo, hi);
}
// A real used as a double.
NumberRange Real(double lo, double hi, bool lo_open = false, bool hi_open = false) {
  return NumberRange::real(lo, hi, lo_open, hi_open);
}
// A real used as a 32-bit float (the optimizer's hyperparameters, LoRA's scale, ...).
NumberRange Float(double lo, double hi, bool lo_open = false, bool hi_open = false) {
  return NumberRange::real(lo, hi, lo_open, hi_open, true);
}

bool lora(const TA& a) {
  return a.lora_r > 0;
}
bool four_bit(const TA& a) {
  return a.load_in_4bit;
}
bool quantized_base(const TA& a) {
  return a.load_in_4bit || a.load_in_8bit;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::vector<TrainingFlag> make_table() {
  return {
      {.names = "--model",
       .key = "model",
       .help = "Model preset (" + joined(model_preset_names()) +
               "), a Hugging Face model folder (config.json and its weights, which the run starts "
               "from unless --init-from is given; its tokenizer.json for jsonl data) or a "
               "config.json (no weights, as a folder without them: initialized from --seed)",
       .target = &TA::model,
       .shown = S::always},
      // Shape overrides on top of --model: any GPT-2-shaped model from flags (7B: --n-layer 32
      // --n-embd 4096 --n-head 32 --n-positions 2048).
      {.names = "--n-layer",
       .key = "model_shape.n_layer",
       .help = "Transformer layers (overrides --model's)",
       .target = &ModelShapeOverrides::n_layer,
       .shown = S::changed,
       .range = Int(1, 1024)},
      {.names = "--n-embd",
       .key = "model_shape.n_embd",
       .help = "Hidden width (overrides --model's)",
       .target = &ModelShapeOverrides::n_embd,
       .shown = S::changed,
       .range = Int(1, 131072)},
      {.names = "--n-head",
       .key = "model_shape.n_head",
       .help = "Attention heads (overrides --model's)",
       .target = &ModelShapeOverrides::n_head,
       .shown = S::changed,
       .range = Int(1, 16384)},
      {.names = "--vocab-size",
       .key = "model_shape.vocab_size",
       .help = "Vocabulary size (overrides --model's)",
       .target = &ModelShapeOverrides::vocab_size,
       .shown = S::changed,
       .range = Int(1, 16777216)},
      {.names = "--n-positions",
       .key = "model_shape.n_positions",
       .help = "Maximum context (positions) (overrides --model's)",
       .target = &ModelShapeOverrides::n_positions,
       .shown = S::changed,
       .range = Int(1, 16777216)},
      // The generic form of the shape flags, for any config.json key of any family
      // (models/config_override.h).
      {.names = "--config-override",
       .key = "config_override",
       .help = "Set a config.json key of --model, KEY=VALUE (repeatable; VALUE as JSON, else a "
               "string), e.g. n_layer=4 or layer_norm_epsilon=1e-6; the five flags above are "
               "aliases of it",
       .target = &TA::config_override,
       .shown = S::changed},
      {.names = "--task",
       .key = "task",
       .help = "The model's head: causal-lm, masked-lm (15% of tokens masked by the collator) or "
               "sequence-classification (one label per sequence); default: the model's own "
               "(causal-lm for GPT-2, a BERT config.json's architectures)",
       .target = &TA::task,
       .shown = S::changed},
      {.names = "--num-labels",
       .key = "num_labels",
       .help = "Sequence classification: number of classes (0: the config.json's id2label, or 2)",
       .target = &TA::num_labels,
       .shown = S::changed,
       .range = Int(0, 1048576)},
      {.names = "--data",
       .key = "data",
       .help = "builtin (generated corpus), dummy (random tokens), a PATH to a text or token "
               "file, or jsonl records (a .jsonl file or a folder of them; docs/data.md)",
       .target = &TA::data,
       .shown = S::changed},
      {.names = "--tokenizer",
       .key = "tokenizer",
       .help = "jsonl data: a tokenizer.json or a folder holding one (with tokenizer_config.json: "
               "special tokens, chat template); default: the one beside a --model config.json",
       .target = &TA::tokenizer,
       .shown = S::changed},
      {.names = "--completion-only-loss",
       .key = "completion_only_loss",
       .help = "jsonl prompt-completion records: loss on the completion only (TRL's default); "
               "false trains on the prompt too",
       .target = &TA::completion_only_loss,
       .shown = S::changed},
      {.names = "--assistant-only-loss",
       .key = "assistant_only_loss",
       .help = "jsonl conversations: loss on the assistant turns only (their content and "
               "end-of-turn token; docs/data.md)",
       .target = &TA::assistant_only_loss,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--packing",
       .key = "packing",
       .help = "jsonl data: pack several examples into each --seq-len row (best-fit decreasing), "
               "attention kept within each example by position ids",
       .target = &TA::packing,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--group-by-length",
       .key = "group_by_length",
       .help = "jsonl data: batches of examples of similar length (less padding)",
       .target = &TA::group_by_length,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--seq-len,--max-length",
       .key = "seq_len",
       .help = "Tokens per sequence (jsonl examples are cut to it; --max-length is TRL's name)",
       .target = &TA::seq_len,
       .shown = S::always,
       .range = Int(1, 16777216)},
      {.names = "--eval-data",
       .key = "eval_data",
       .help = "Evaluation data, as --data (a token stream, text or jsonl)",
       .target = &TA::eval_data,
       .shown = S::changed},
      {.names = "--eval-split",
       .key = "eval_split",
       .help = "Evaluate on this share of --data (e.g. 0.05), left out of training",
       .target = &TA::eval_split,
       .shown = S::changed,
       .range = Real(0, 1, false, true)},
      {.names = "--per-device-eval-batch-size",
       .key = "per_device_eval_batch_size",
       .help = "Sequences per evaluation batch",
       .target = &TA::per_device_eval_batch_size,
       .shown = S::changed,
       .range = Int(1, kMaxCount)},
      {.names = "--eval-steps",
       .key = "eval_steps",
       .help = "Evaluate every N optimizer steps (0: at the end only); eval_loss and perplexity "
               "in the log and the report",
       .target = &TA::eval_steps,
       .shown = S::changed,
       .range = Int(0, kMaxCount)},
      {.names = "--load-best-model-at-end",
       .key = "load_best_model_at_end",
       .help = "At the end, load the saved checkpoint with the best --metric-for-best-model "
               "(needs --save-steps a multiple of --eval-steps)",
       .target = &TA::load_best_model_at_end,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--metric-for-best-model",
       .key = "metric_for_best_model",
       .help = "eval_loss (lower is better), or eval_accuracy (higher is better; "
               "--task sequence-classification)",
       .target = &TA::metric_for_best_model,
       .shown = S::changed,
       .when = [](const TA& a) { return a.load_best_model_at_end; }},
      {.names = "--per-device-train-batch-size",
       .key = "per_device_train_batch_size",
       .help = "Sequences per micro-batch",
       .target = &TA::per_device_train_batch_size,
       .shown = S::always,
       .range = Int(1, kMaxCount)},
      {.names = "--gradient-accumulation-steps",
       .key = "gradient_accumulation_steps",
       .help = "Micro-batches per optimizer step",
       .target = &TA::gradient_accumulation_steps,
       .shown = S::changed,
       .range = Int(1, 65536)},
      {.names = "--max-steps",
       .key = "max_steps",
       .help =
           "Optimizer steps; 0 or -1: train --num-train-epochs epochs (the Trainer's rule: only a "
           "positive value overrides the epochs)",
       .target = &TA::max_steps,
       .shown = S::always,
       .when = [](const TA& a) { return a.max_steps > 0; },
       .range = Int(-1, kMaxCount)},
      {.names = "--num-train-epochs",
       .key = "num_train_epochs",
       .help = "Epochs when --max-steps is not positive (at most 1e6)",
       .target = &TA::num_train_epochs,
       // Epochs become ceil(epochs x batches per epoch) steps in an int64: beyond 1e6 epochs
       // that conversion could overflow and wrap to a single step.
       .range = Real(0, 1e6)},
      {.names = "--learning-rate",
       .key = "learning_rate",
       .help = "Peak learning rate (Trainer's default is 5e-5; snug's 6e-4 suits training from "
               "scratch)",
       .target = &TA::learning_rate,
       .shown = S::changed,
       .range = Float(0, 1e6)},
      {.names = "--warmup-steps",
       .key = "warmup_steps",
       .help = "Linear warm-up steps",
       .target = &TA::warmup_steps,
       .range = Int(0, kMaxCount)},
      {.names = "--lr-scheduler-type",
       .key = "lr_scheduler_type",
       .help = "linear, cosine, constant or constant_with_warmup",
       .target = &TA::lr_scheduler_type},
      {.names = "--max-grad-norm",
       .key = "max_grad_norm",
       .help = "Gradient clipping norm (0: off)",
       .target = &TA::max_grad_norm,
       .range = Float(0, 1e30)},
      {.names = "--weight-decay",
       .key = "weight_decay",
       .help = "AdamW weight decay (not applied to biases and LayerNorm weights)",
       .target = &TA::weight_decay,
       .optimizer_record = true,
       .range = Float(0, 1e6)},
      {.names = "--adam-beta1",
       .key = "adam_beta1",
       .help = "AdamW beta1",
       .target = &TA::adam_beta1,
       .optimizer_record = true,
       .range = Float(0, 1, false, true)},
      {.names = "--adam-beta2",
       .key = "adam_beta2",
       .help = "AdamW beta2",
       .target = &TA::adam_beta2,
       .optimizer_record = true,
       .range = Float(0, 1, false, true)},
      {.names = "--adam-epsilon",
       .key = "adam_epsilon",
       .help = "AdamW epsilon",
       .target = &TA::adam_epsilon,
       .optimizer_record = true,
       .range = Float(0, 1, true, false)},
      {.names = "--optim",
       .key = "optim",
       .help = "Optimizer: " + joined(optimizer_names()) + " (docs/optimizers.md)",
       .target = &TA::optim,
       .shown = S::changed},
      {.names = "--momentum",
       .key = "momentum",
       .help = "SGD momentum (0: no momentum buffer)",
       .target = &TA::momentum,
       .shown = S::changed,
       .optimizer_record = true,
       .range = Float(0, 1, false, true)},
      {.names = "--optim-8bit-embeddings",
       .key = "optim_8bit_embeddings",
       .help =
           "adamw_bnb_8bit, lion_8bit: 8-bit states for the embeddings too (default: fp32, as HF)",
       .target = &TA::optim_8bit_embeddings,
       .form = F::presence,
       .optimizer_record = true},
      {.names = "--adafactor-relative-step",
       .key = "adafactor_relative_step",
       .help = "adafactor: the paper's relative step size instead of --learning-rate",
       .target = &TA::adafactor_relative_step,
       .form = F::presence,
       .optimizer_record = true},
      {.names = "--galore-rank",
       .key = "galore_rank",
       .help = "galore_adamw: rank of the gradient projection of attention/MLP matrices",
       .target = &TA::galore_rank,
       .optimizer_record = true,
       .range = Int(1, 65536)},
      {.names = "--galore-update-proj-gap",
       .key = "galore_update_proj_gap",
       .help = "galore_adamw: optimizer steps between recomputing the projection (SVD)",
       .target = &TA::galore_update_proj_gap,
       .optimizer_record = true,
       .range = Int(1, kMaxCount)},
      {.names = "--galore-scale",
       .key = "galore_scale",
       .help = "galore_adamw: scale of the projected-back update",
       .target = &TA::galore_scale,
       .optimizer_record = true,
       .range = Float(0, 1e6)},
      {.names = "--dataloader-num-workers",
       .key = "dataloader_num_workers",
       .help = "Prepare batches ahead on a background thread (queue of 2 per worker)",
       .target = &TA::dataloader_num_workers,
       .range = Int(0, 64)},
      {.names = "--ddp-timeout",
       .key = "ddp_timeout",
       .help = "Data parallelism (mpirun): seconds a collective waits for the other ranks before "
               "it ends the job naming the missing ones",
       .target = &TA::ddp_timeout,
       .range = Float(0, 1e9, true)},
      {.names = "--ddp-bucket-cap-mb",
       .key = "ddp_bucket_cap_mb",
       .help = "Data parallelism (mpirun): MiB of gradients summed across the ranks per "
               "all-reduce (PyTorch DDP's bucket_cap_mb)",
       .target = &TA::ddp_bucket_cap_mb,
       .range = Float(0, 1e6, true)},
      {.names = "--ddp-backend",
       .key = "ddp_backend",
       .help = "Data parallelism: the communicator, mpi (CPU ranks) or nccl (GPU ranks; without "
               "mpirun an NCCL world of one); default: by launcher and --device",
       .target = &TA::ddp_backend,
       .shown = S::changed},
      {.names = "--deepspeed",
       .key = "deepspeed",
       .help = "A DeepSpeed config (ds_config.json): its ZeRO stage and offload, bf16/fp16, "
               "accumulation, clipping, micro-batch and AdamW keys set these flags; any other key "
               "is refused by name (docs/distributed.md)",
       .target = &TA::deepspeed},
      {.names = "--zero-stage",
       .key = "zero_stage",
       .help =
           "ZeRO stage of the ranks (DeepSpeed's): 0 every rank holds everything (data "
           "parallel), 1 optimizer state sharded, 2 gradients too, 3 parameters too (each block "
           "gathered while it runs)",
       .target = &TA::zero_stage,
       .shown = S::changed,
       .range = Int(0, 3)},
      {.names = "--offload-optimizer",
       .key = "offload_optimizer",
       .help = "none, or cpu (DeepSpeed's offload_optimizer.device): the optimizer's state in the "
               "host pool and its update on the host, at any --zero-stage; shown beside the "
               "device's memory (memory.host). --device cpu so far; not with lomo/adalomo",
       .target = &TA::offload_optimizer,
       .shown = S::changed},
      {.names = "--offload-param",
       .key = "offload_param",
       .help = "none, or cpu (DeepSpeed's offload_param.device): at --zero-stage 3, the rank's "
               "parameter shards in the host pool (weights there); each block is gathered from "
               "them onto the device as it runs. --device cpu so far",
       .target = &TA::offload_param,
       .shown = S::changed},
      {.names = "--dataloader-pin-memory",
       .key = "dataloader_pin_memory",
       .help = "Accepted for compatibility; pinned host memory matters for CUDA only",
       .target = &TA::dataloader_pin_memory},
      {.names = "--attention",
       .key = "attention",
       .help =
           "flash (tiled, online softmax: memory linear in sequence length) or naive (materializes "
           "the T x T probabilities)",
       .target = &TA::attention,
       .shown = S::changed},
      {.names = "--logits",
       .key = "logits",
       .help = "chunked (LM head + cross-entropy a chunk of rows at a time, no B x T x V tensor) "
               "or full "
               "(materialize the logits)",
       .target = &TA::logits,
       .shown = S::changed},
      {.names = "--fp16",
       .key = "fp16",
       .help = "Mixed precision with fp16 compute copies and activations, fp32 master weights and "
               "gradients, dynamic loss scaling (GradScaler's defaults); generation stores the "
               "weights and KV cache in fp16",
       .target = &TA::fp16,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--bf16",
       .key = "bf16",
       .help = "Mixed precision with bf16 compute copies and activations, fp32 master weights and "
               "gradients (no loss scaling needed); generation stores the weights and KV cache in "
               "bf16",
       .target = &TA::bf16,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--bf16-full",
       .key = "bf16_full",
       .help =
           "bf16 weights, gradients and optimizer state (2+2+4 bytes per parameter with AdamW; no "
           "fp32 master), stochastic rounding of the updates; computes as --bf16. --optim " +
           bf16_optimizer_names(),
       .target = &TA::bf16_full,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--precision-layout",
       .key = "precision_layout",
       .help = "snug (the precision flags decide what is stored) or deepspeed: DeepSpeed's "
               "mixed-precision layout, bf16 weights and gradients with fp32 master weights and "
               "AdamW moments in the optimizer state (2+2+12 = 16 bytes per parameter, ZeRO's "
               "K = 12); computes as --bf16. --optim " +
               master_weight_optimizer_names(),
       .target = &TA::precision_layout,
       .shown = S::changed,
       .optimizer_record = true},
      {.names = "--torch-dtype",
       .key = "torch_dtype",
       .help = "Storage of the model's weights, as from_pretrained's torch_dtype: bfloat16, "
               "float16 or float32 (default: bf16 under --bf16-full, else fp32 in training; "
               "generation stores the weights in the dtype of --bf16/--fp16). A 16-bit storage "
               "computes in its dtype; LoRA adapters stay fp32 on a 16-bit base",
       .target = &TA::torch_dtype,
       .shown = S::changed},
      {.names = "--gemm-path",
       .key = "gemm_path",
       .help =
           "GEMM for the bf16 products of --bf16/--bf16-full/bf16-compute quantized bases: auto "
           "(oneDNN's bf16 matmul where the CPU has AVX512-BF16 or AMX, else widen), widen (bf16 "
           "widened to fp32, dnnl_sgemm) or onednn-bf16",
       .target = &TA::gemm_path},
      {.names = "--gradient-checkpointing",
       .key = "gradient_checkpointing",
       .help = "Recompute activations in backward instead of keeping them",
       .target = &TA::gradient_checkpointing,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--checkpoint-policy",
       .key = "checkpoint_policy",
       .help =
           "With --gradient-checkpointing: every-layer (as Hugging Face), every-k:K, sqrt (about "
           "sqrt(L) checkpoints) or selective (recompute norms, softmax, GELU)",
       .target = &TA::checkpoint_policy,
       .shown = S::changed,
       .when = [](const TA& a) { return a.gradient_checkpointing; }},
      {.names = "--seed",
       .key = "seed",
       .help = "Seed for initialization and data order",
       .target = &TA::seed,
       .range = NumberRange::unsigned_integer(UINT64_MAX)},
      {.names = "--device",
       .key = "device",
       .help = "cpu or cuda / cuda:N (a real run on the host or a GPU), or meta (shapes only, "
               "exact memory)",
       .target = &TA::device},
      // Shown by train_command_line as the user gave it (a preset name), not in bytes.
      {.names = "--device-memory",
       .key = "device_memory",
       .help = "Modelled device capacity: bytes (16GiB, 24GB, 1e9) or a GPU preset (" +
               device_memory_presets_help() + "); default: unlimited",
       .target = &TA::device_memory,
       .form = F::external},
      {.names = "--threads",
       .key = "threads",
       .help = "CPU threads (0: OMP_NUM_THREADS or all cores)",
       .target = &TA::threads,
       .range = Int(0, kMaxThreads)},
      {.names = "--log-every,--logging-steps",
       .key = "logging_steps",
       .help = "Log a line every N steps",
       .target = &TA::logging_steps,
       .range = Int(1, kMaxCount)},
      {.names = "--save-steps",
       .key = "save_steps",
       .help = "Save a checkpoint every N optimizer steps into --output-dir (0: never)",
       .target = &TA::save_steps,
       .range = Int(0, kMaxCount)},
      {.names = "--output-dir",
       .key = "output_dir",
       .help = "Where checkpoint-<step> folders are written",
       .target = &TA::output_dir},
      {.names = "--overwrite-output-dir",
       .key = "overwrite_output_dir",
       .help =
           "Remove the checkpoints another run left in --output-dir before step 1 (without it such "
           "a run stops: exit 2)",
       .target = &TA::overwrite_output_dir,
       .form = F::presence},
      {.names = "--save-total-limit",
       .key = "save_total_limit",
       .help = "Keep only the newest N checkpoints in --output-dir (0: keep all)",
       .target = &TA::save_total_limit,
       .range = Int(0, kMaxCount)},
      {.names = "--resume-from",
       .key = "resume_from",
       .help = "Resume from a checkpoint folder, or the latest complete one of an output dir",
       .target = &TA::resume_from},
      {.names = "--init-from",
       .key = "init_from",
       .help = "Start from these weights (a safetensors file or a model folder, Hugging Face "
               "names, e.g. from `snug export-init`) instead of the seeded initialization or the "
               "--model folder's weights",
       .target = &TA::init_from},
      {.names = "--freeze",
       .key = "freeze",
       .help =
           "Freeze the parameters matching PATTERN (repeatable): no gradient, no optimizer state. "
           "Hugging Face names; a glob (transformer.h.*, transformer.h.[0-5].*) matches the whole "
           "name, otherwise a substring (transformer.wte)",
       .target = &TA::freeze,
       .shown = S::changed},
      // PEFT / bitsandbytes (issue 6). --qlora first: CLI11 runs callbacks in definition order,
      // so the flags below it override the recipe's values.
      {.names = "--qlora",
       .key = "qlora",
       .help =
           "QLoRA recipe: --load-in-4bit --bnb-4bit-quant-type nf4 --bnb-4bit-use-double-quant "
           "--bnb-4bit-compute-dtype bf16 and LoRA on every linear layer (the paper's; all-linear "
           "unless --target-modules, rank 8 unless --lora-r)",
       .target = &TA::qlora,
       .form = F::recipe,
       .apply = [](TA& a) { a.apply_qlora_recipe(); }},
      {.names = "--lora-r",
       .key = "lora_r",
       .help = "LoRA rank (0: no LoRA); the base is frozen",
       .target = &TA::lora_r,
       .shown = S::changed,
       .range = Int(0, 65536)},
      {.names = "--lora-alpha",
       .key = "lora_alpha",
       .help = "LoRA alpha (scaling alpha/r)",
       .target = &TA::lora_alpha,
       .shown = S::changed,
       .when = lora,
       .range = Float(0, 1e6)},
      {.names = "--lora-dropout",
       .key = "lora_dropout",
       .help = "Dropout on the LoRA input while training",
       .target = &TA::lora_dropout,
       .shown = S::changed,
       .when = lora,
       .range = Float(0, 1, false, true)},
      {.names = "--target-modules",
       .key = "target_modules",
       .help = "Modules that get adapters, comma-separated, PEFT's suffix match "
               "(c_attn,c_proj,c_fc,mlp.c_proj) or all-linear; default: PEFT's for the model type",
       .target = &TA::target_modules,
       .shown = S::changed,
       .when = lora},
      {.names = "--use-rslora",
       .key = "use_rslora",
       .help = "rsLoRA scaling alpha/sqrt(r)",
       .target = &TA::use_rslora,
       .form = F::presence,
       .shown = S::changed,
       .when = lora},
      {.names = "--load-in-8bit",
       .key = "load_in_8bit",
       .help = "Store the blocks' Linear weights int8 (blockwise absmax), frozen",
       .target = &TA::load_in_8bit,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--load-in-4bit",
       .key = "load_in_4bit",
       .help = "Store the blocks' Linear weights 4-bit (blocks of 64), "
               "frozen",
       .target = &TA::load_in_4bit,
       .form = F::presence,
       .shown = S::changed},
      {.names = "--bnb-4bit-quant-type",
       .key = "bnb_4bit_quant_type",
       .help = "nf4 or fp4",
       .target = &TA::bnb_4bit_quant_type,
       .shown = S::always,
       .when = four_bit},
      {.names = "--bnb-4bit-use-double-quant",
       .key = "bnb_4bit_use_double_quant",
       .help = "Quantize the 4-bit absmax values again (8-bit, blocks of 256)",
       .target = &TA::bnb_4bit_use_double_quant,
       .form = F::presence,
       .shown = S::changed,
       .when = four_bit},
      {.names = "--bnb-4bit-compute-dtype",
       .key = "bnb_4bit_compute_dtype",
       .help = "fp32 or bf16: the precision dequantized weights are used in",
       .target = &TA::bnb_4bit_compute_dtype,
       .shown = S::changed,
       .when = quantized_base},
      {.names = "--neftune-noise-alpha",
       .key = "neftune_noise_alpha",
       .help = "NEFTune: uniform noise alpha/sqrt(L*d) on the embeddings while training",
       .target = &TA::neftune_noise_alpha,
       .shown = S::changed,
       .range = Float(0, 1e6)},
      // Where the command writes its report; not part of the run's config.
      {.names = "--report-json",
       .key = "",
       .help = "Write the run report as JSON to this path",
       .target = &TA::report_json},
  };
}

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace

std::string TrainingFlag::name() const {
  return names.substr(0, names.find(','));
}

nlohmann::json TrainingFlag::value(const TrainingArguments& a) const {
  auto optional = [](const std::optional<int64_t>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return std::visit(
      Overloaded{[&](std::optional<int64_t> ModelShapeOverrides::*m) {
                   return optional(a.model_shape.*m);
                 },
                 [&](std::optional<int64_t> TrainingArguments::*m) { return optional(a.*m); },
                 [&](auto m) { return nlohmann::json(a.*m); }},
      target);
}

bool TrainingFlag::is_default(const TrainingArguments& a) const {
  static const TrainingArguments defaults;
  return value(a) == value(defaults);
}

std::string TrainingFlag::render(const TrainingArguments& a) const {
  const std::string flag = name();
  const nlohmann::json v = value(a);
  if (form == FlagForm::presence || form == FlagForm::recipe) return v.get<bool>() ? flag : "";
  auto word = [](const nlohmann::json& x) -> std::string {
    if (x.is_string()) return shell_word(x.get<std::string>());
    if (x.is_boolean()) return x.get<bool>() ? "true" : "false";
    if (x.is_number_float()) return format_number(x.get<double>());
    return x.dump();  // integers
  };
  if (v.is_null()) return "";
  if (!v.is_array()) return flag + " " + word(v);
  std::string s;
  for (const nlohmann::json& x : v) s += (s.empty() ? "" : " ") + flag + " " + word(x);
  return s;
}

const std::vector<TrainingFlag>& training_flags() {
  static const std::vector<TrainingFlag> table = make_table();
  return table;
}

const TrainingFlag& flag_for_key(const std::string& key) {
  for (const TrainingFlag& f : training_flags())
    if (f.key == key) return f;
  throw Error(detail::concat("no training flag has the config key '", key, "'"));
}

std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t'\"$\\*?[]") == std::string::npos) return s;
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  if (std::strtod(buf, nullptr) == v || !std::isfinite(v)) return buf;
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace snug
