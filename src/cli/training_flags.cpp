// The flags shared by `snug train` and `snug plan` (TrainingArguments, kebab-case).
#include <optional>

#include "cli/commands.h"
#include "core/device.h"
#include "optim/optimizer.h"
#include "optim/registry.h"
#include "train/training_args.h"

namespace snug::cli {

void add_training_flags(CLI::App* sub, TrainingArguments& a, std::string& device_memory) {
  sub->add_option("--model", a.model,
                  "Model preset (gpt2-tiny, gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1.5b) or a "
                  "Hugging Face config.json")
      ->capture_default_str();
  // Shape overrides on top of --model: any GPT-2-shaped model from flags (7B: --n-layer 32
  // --n-embd 4096 --n-head 32 --n-positions 2048).
  auto shape_flag = [&](const char* flag, std::optional<int64_t>& field, const char* what) {
    sub->add_option_function<int64_t>(
           flag, [&field](const int64_t& v) { field = v; },
           std::string(what) + " (overrides --model's)")
        ->type_name("INT");
  };
  shape_flag("--n-layer", a.model_shape.n_layer, "Transformer layers");
  shape_flag("--n-embd", a.model_shape.n_embd, "Hidden width");
  shape_flag("--n-head", a.model_shape.n_head, "Attention heads");
  shape_flag("--vocab-size", a.model_shape.vocab_size, "Vocabulary size");
  shape_flag("--n-positions", a.model_shape.n_positions, "Maximum context (positions)");
  sub->add_option("--data", a.data,
                  "builtin (generated corpus), dummy (random tokens) or a PATH to a text or "
                  "token file")
      ->capture_default_str();
  sub->add_option("--seq-len", a.seq_len, "Tokens per sequence")->capture_default_str();
  sub->add_option("--per-device-train-batch-size", a.per_device_train_batch_size,
                  "Sequences per micro-batch")
      ->capture_default_str();
  sub->add_option("--gradient-accumulation-steps", a.gradient_accumulation_steps,
                  "Micro-batches per optimizer step")
      ->capture_default_str();
  sub->add_option("--max-steps", a.max_steps,
                  "Optimizer steps; 0 or -1: train --num-train-epochs epochs (the Trainer's "
                  "rule: only a positive value overrides the epochs)")
      ->capture_default_str();
  sub->add_option("--num-train-epochs", a.num_train_epochs,
                  "Epochs when --max-steps is not positive (at most 1e6)")
      ->capture_default_str();
  sub->add_option("--learning-rate", a.learning_rate,
                  "Peak learning rate (Trainer's default is 5e-5; snug's 6e-4 suits training "
                  "from scratch)")
      ->capture_default_str();
  sub->add_option("--warmup-steps", a.warmup_steps, "Linear warm-up steps")->capture_default_str();
  sub->add_option("--lr-scheduler-type", a.lr_scheduler_type,
                  "linear, cosine, constant or constant_with_warmup")
      ->capture_default_str();
  sub->add_option("--max-grad-norm", a.max_grad_norm, "Gradient clipping norm (0: off)")
      ->capture_default_str();
  sub->add_option("--weight-decay", a.weight_decay,
                  "AdamW weight decay (not applied to biases and LayerNorm weights)")
      ->capture_default_str();
  sub->add_option("--adam-beta1", a.adam_beta1, "AdamW beta1")->capture_default_str();
  sub->add_option("--adam-beta2", a.adam_beta2, "AdamW beta2")->capture_default_str();
  sub->add_option("--adam-epsilon", a.adam_epsilon, "AdamW epsilon")->capture_default_str();
  std::string optims;
  for (const auto& n : optimizer_names()) {
    if (!optims.empty()) optims += ", ";
    optims += n;
  }
  sub->add_option("--optim", a.optim, "Optimizer: " + optims + " (docs/optimizers.md)")
      ->capture_default_str();
  sub->add_option("--momentum", a.momentum, "SGD momentum (0: no momentum buffer)")
      ->capture_default_str();
  sub->add_flag("--optim-8bit-embeddings", a.optim_8bit_embeddings,
                "adamw_bnb_8bit, lion_8bit: 8-bit states for the embeddings too (default: fp32, "
                "as HF)");
  sub->add_flag("--adafactor-relative-step", a.adafactor_relative_step,
                "adafactor: the paper's relative step size instead of --learning-rate");
  sub->add_option("--galore-rank", a.galore_rank,
                  "galore_adamw: rank of the gradient projection of attention/MLP matrices")
      ->capture_default_str();
  sub->add_option("--galore-update-proj-gap", a.galore_update_proj_gap,
                  "galore_adamw: optimizer steps between recomputing the projection (SVD)")
      ->capture_default_str();
  sub->add_option("--galore-scale", a.galore_scale,
                  "galore_adamw: scale of the projected-back update")
      ->capture_default_str();
  sub->add_option("--dataloader-num-workers", a.dataloader_num_workers,
                  "Prepare batches ahead on a background thread (queue of 2 per worker)")
      ->capture_default_str();
  sub->add_option("--dataloader-pin-memory", a.dataloader_pin_memory,
                  "Accepted for compatibility; pinned host memory matters for CUDA only")
      ->capture_default_str();
  sub->add_option("--attention", a.attention,
                  "flash (tiled, online softmax: memory linear in sequence length) or naive "
                  "(materializes the T x T probabilities)")
      ->capture_default_str();
  sub->add_option("--logits", a.logits,
                  "chunked (LM head + cross-entropy a chunk of rows at a time, no B x T x V "
                  "tensor) or full (materialize the logits)")
      ->capture_default_str();
  sub->add_flag("--fp16", a.fp16,
                "Mixed precision with fp16 compute copies and activations, fp32 master weights "
                "and gradients, dynamic loss scaling (GradScaler's defaults)");
  sub->add_flag("--bf16", a.bf16,
                "Mixed precision with bf16 compute copies and activations, fp32 master weights "
                "and gradients (no loss scaling needed)");
  sub->add_flag("--bf16-full", a.bf16_full,
                "bf16 weights, gradients and optimizer state (2+2+4 bytes per parameter with "
                "AdamW; no fp32 master), stochastic rounding of the updates; computes as --bf16. "
                "--optim " +
                    bf16_optimizer_names());
  sub->add_option("--gemm-path", a.gemm_path,
                  "GEMM for the bf16 products of --bf16/--bf16-full/bf16-compute quantized bases: "
                  "auto (oneDNN's bf16 matmul where the CPU has AVX512-BF16 or AMX, else "
                  "widen), widen (bf16 widened to fp32, dnnl_sgemm) or onednn-bf16")
      ->capture_default_str();
  sub->add_flag("--gradient-checkpointing", a.gradient_checkpointing,
                "Recompute activations in backward instead of keeping them");
  sub->add_option("--checkpoint-policy", a.checkpoint_policy,
                  "With --gradient-checkpointing: every-layer (as Hugging Face), every-k:K, sqrt "
                  "(about sqrt(L) checkpoints) or selective (recompute norms, softmax, GELU)")
      ->capture_default_str();
  sub->add_option("--seed", a.seed, "Seed for initialization and data order")
      ->capture_default_str();
  sub->add_option("--device", a.device, "cpu (real run) or meta (shapes only, exact memory)")
      ->capture_default_str();
  sub->add_option("--device-memory", device_memory,
                  "Modelled device capacity: bytes (16GiB, 24GB, 1e9) or a GPU preset (" +
                      device_memory_presets_help() + "); default: unlimited");
  sub->add_option("--threads", a.threads, "CPU threads (0: OMP_NUM_THREADS or all cores)")
      ->capture_default_str();
  sub->add_option("--log-every,--logging-steps", a.logging_steps, "Log a line every N steps")
      ->capture_default_str();
  sub->add_option("--save-steps", a.save_steps,
                  "Save a checkpoint every N optimizer steps into --output-dir (0: never)")
      ->capture_default_str();
  sub->add_option("--output-dir", a.output_dir, "Where checkpoint-<step> folders are written")
      ->capture_default_str();
  sub->add_flag("--overwrite-output-dir", a.overwrite_output_dir,
                "Remove the checkpoints another run left in --output-dir before step 1 (without "
                "it such a run stops: exit 2)");
  sub->add_option("--save-total-limit", a.save_total_limit,
                  "Keep only the newest N checkpoints in --output-dir (0: keep all)")
      ->capture_default_str();
  sub->add_option("--resume-from", a.resume_from,
                  "Resume from a checkpoint folder, or the latest complete one of an output dir");
  sub->add_option("--init-from", a.init_from,
                  "Start from these weights (safetensors, Hugging Face GPT-2 names, e.g. from "
                  "`snug export-init`) instead of the seeded initialization");
  sub->add_option("--freeze", a.freeze,
                  "Freeze the parameters matching PATTERN (repeatable): no gradient, no "
                  "optimizer state. Hugging Face names; a glob (transformer.h.*, "
                  "transformer.h.[0-5].*) matches the whole name, otherwise a substring "
                  "(transformer.wte)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // PEFT / bitsandbytes (issue 6). --qlora first: CLI11 runs callbacks in definition order, so
  // the flags below it override the recipe's values.
  sub->add_flag_callback(
      "--qlora", [&a] { a.apply_qlora_recipe(); },
      "QLoRA recipe: --load-in-4bit --bnb-4bit-quant-type nf4 --bnb-4bit-use-double-quant "
      "--bnb-4bit-compute-dtype bf16 and LoRA (rank 8 unless --lora-r)");
  sub->add_option("--lora-r", a.lora_r, "LoRA rank (0: no LoRA); the base is frozen")
      ->capture_default_str();
  sub->add_option("--lora-alpha", a.lora_alpha, "LoRA alpha (scaling alpha/r)")
      ->capture_default_str();
  sub->add_option("--lora-dropout", a.lora_dropout, "Dropout on the LoRA input while training")
      ->capture_default_str();
  sub->add_option("--target-modules", a.target_modules,
                  "Modules that get adapters, comma-separated, PEFT's suffix match "
                  "(c_attn,c_proj,c_fc,mlp.c_proj) or all-linear")
      ->capture_default_str();
  sub->add_flag("--use-rslora", a.use_rslora, "rsLoRA scaling alpha/sqrt(r)");
  sub->add_flag("--load-in-8bit", a.load_in_8bit,
                "Store the blocks' Linear weights int8 (blockwise absmax), frozen");
  sub->add_flag("--load-in-4bit", a.load_in_4bit,
                "Store the blocks' Linear weights 4-bit (blocks of 64), frozen");
  sub->add_option("--bnb-4bit-quant-type", a.bnb_4bit_quant_type, "nf4 or fp4")
      ->capture_default_str();
  sub->add_flag("--bnb-4bit-use-double-quant", a.bnb_4bit_use_double_quant,
                "Quantize the 4-bit absmax values again (8-bit, blocks of 256)");
  sub->add_option("--bnb-4bit-compute-dtype", a.bnb_4bit_compute_dtype,
                  "fp32 or bf16: the precision dequantized weights are used in")
      ->capture_default_str();
  sub->add_option("--neftune-noise-alpha", a.neftune_noise_alpha,
                  "NEFTune: uniform noise alpha/sqrt(L*d) on the embeddings while training")
      ->capture_default_str();
  sub->add_option("--report-json", a.report_json, "Write the run report as JSON to this path");
}

}  // namespace snug::cli
