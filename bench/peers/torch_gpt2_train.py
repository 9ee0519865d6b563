"""The PyTorch side of bench/peers/run: the same GPT-2 training as `snug train`, on the same initial
weights and the same token batches (both written by `snug export-init`), with the same threads and
optimizer settings, in one of two ways a PyTorch user would write it:

  --impl torch  plain torch: an nn.Module (nn.Linear, F.scaled_dot_product_attention, fused
                cross-entropy over materialized logits), a hand-written loop (forward, backward,
                clip_grad_norm_, optimizer.step, LambdaLR, zero_grad(set_to_none=True)),
                torch.autocast for --bf16, torch.utils.checkpoint per block for
                --gradient-checkpointing.
  --impl hf     transformers: GPT2LMHeadModel trained by Trainer (TrainingArguments with the same
                values; bf16=True, gradient_checkpointing=True, optim="adafactor" /
                "adamw_bnb_8bit" as a Trainer user sets them); --lora-adapter trains a PEFT
                adapter folder on the frozen base (PeftModel.from_pretrained); --load-in-4bit
                loads the base through from_pretrained(quantization_config=BitsAndBytesConfig)
                (QLoRA). --stop-after K stops a slow peer after K of the --steps steps.

The work matches snug's step for step: window k of the batch file is row k of micro-batch
k // B; inputs are its first T tokens, targets its last T; the loss of a step is the mean over all
target tokens of its micro-batches; the learning rate is lr * (N - s) / N at step s (linear, no
warm-up); AdamW with weight decay only on matrices (the Trainer's groups); gradients clipped to a
global norm of --max-grad-norm.

Prints (and with --json writes) one JSON object: tokens_per_second over all steps but the first
(the warm-up step: allocator, optimizer state; snug's "step_end_s" gives the runner the same
figure for snug), losses per step, peak RSS (getrusage), and allocator figures where torch keeps
them (CUDA only; null on the CPU). A configuration that cannot run here (e.g. bitsandbytes
missing) gives {"not_available": "why"} and exit status 0.

Example (after `snug export-init --model gpt2-tiny --max-steps 20 --per-device-train-batch-size 4
--seq-len 128 -o init.safetensors --batches-out batches.tok`):
  python bench/peers/torch_gpt2_train.py --impl torch --init init.safetensors \
      --batches batches.tok --batch 4 --seq 128 --steps 20 --threads 2
"""
import argparse
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------
# Inputs written by snug
# ---------------------------------------------------------------------------------------------

def read_token_file(path):
    """A snug token file (src/data/dataset.h): "SNUGTOK1", u32 version 1, u32 width, u64 count."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) != 24 or head[:8] != b"SNUGTOK1":
            raise SystemExit(f"{path}: not a snug token file (magic SNUGTOK1)")
        version, width, count = struct.unpack("<IIQ", head[8:])
        if version != 1 or width not in (2, 4):
            raise SystemExit(f"{path}: version {version}, width {width} not supported")
        data = np.frombuffer(f.read(), dtype="<u2" if width == 2 else "<u4")
    if data.size != count:
        raise SystemExit(f"{path}: header says {count} tokens, file holds {data.size}")
    return data.astype(np.int64)


def read_batches(path, steps, accum, B, T):
    """(steps * accum) micro-batches of (inputs, targets), each (B, T) int64, in snug's order."""
    tokens = read_token_file(path)
    need = steps * accum * B * (T + 1)
    if tokens.size != need:
        raise SystemExit(f"{path}: {tokens.size} tokens, expected {need} = steps {steps} x accum "
                         f"{accum} x batch {B} x (seq {T} + 1); export it with the same flags")
    w = torch.from_numpy(tokens.reshape(steps * accum, B, T + 1))
    return [(w[i, :, :T].contiguous(), w[i, :, 1:].contiguous()) for i in range(steps * accum)]


def read_init(path, tensors=True):
    """The state dict (Hugging Face GPT2LMHeadModel names; None unless `tensors`) and the shape
    from the metadata."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(path, "pt") as f:
        meta = f.metadata() or {}
    need = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")
    missing = [k for k in need if k not in meta]
    if missing:
        raise SystemExit(f"{path}: metadata lacks {missing} (write it with `snug export-init`)")
    shape = {k: int(meta[k]) for k in need}
    shape["layer_norm_epsilon"] = float(meta.get("layer_norm_epsilon", "1e-5"))
    return (load_file(path) if tensors else None), shape, meta.get("model", "?")


# ---------------------------------------------------------------------------------------------
# Plain torch GPT-2
# ---------------------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, C, NH, eps):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=eps), nn.LayerNorm(C, eps=eps)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.NH = NH

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, s, checkpointing):
        super().__init__()
        V, P, C = s["vocab_size"], s["n_positions"], s["n_embd"]
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(P, C)
        self.h = nn.ModuleList(Block(C, s["n_head"], s["layer_norm_epsilon"])
                               for _ in range(s["n_layer"]))
        self.ln_f = nn.LayerNorm(C, eps=s["layer_norm_epsilon"])
        self.checkpointing = checkpointing

    def forward(self, ids, targets):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.h:
            if self.checkpointing:
                x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
            else:
                x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # tied LM head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))

    def load_hf(self, sd):
        """Hugging Face names and Conv1D (in, out) layout -> this module (nn.Linear: (out, in))."""
        own = {"transformer.wte.weight": (self.wte.weight, False),
               "transformer.wpe.weight": (self.wpe.weight, False),
               "transformer.ln_f.weight": (self.ln_f.weight, False),
               "transformer.ln_f.bias": (self.ln_f.bias, False)}
        for i, b in enumerate(self.h):
            p = f"transformer.h.{i}."
            for hf, mod in (("ln_1", b.ln_1), ("ln_2", b.ln_2), ("attn.c_attn", b.c_attn),
                            ("attn.c_proj", b.c_proj), ("mlp.c_fc", b.c_fc),
                            ("mlp.c_proj", b.mlp_proj)):
                own[p + hf + ".weight"] = (mod.weight, isinstance(mod, nn.Linear))
                own[p + hf + ".bias"] = (mod.bias, False)
        if set(sd) != set(own):
            raise SystemExit(f"init weights: names differ: missing "
                             f"{sorted(set(own) - set(sd))[:3]}, "
                             f"unexpected {sorted(set(sd) - set(own))[:3]}")
        with torch.no_grad():
            for name, (param, transpose) in own.items():
                src = sd[name].t() if transpose else sd[name]
                if src.shape != param.shape:
                    raise SystemExit(f"init weights: {name} has shape {tuple(src.shape)}, "
                                     f"expected {tuple(param.shape)}")
                param.copy_(src)


def decay_groups(named, wd):
    """The Trainer's groups: weight decay on matrices, none on biases and LayerNorm weights."""
    decay = [p for n, p in named if p.dim() >= 2]
    rest = [p for n, p in named if p.dim() < 2]
    return [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]


def make_optimizer(a, model):
    """Optimizer as the Trainer builds it for --optim (transformers trainer_optimizer.py)."""
    groups = decay_groups(list(model.named_parameters()), a.weight_decay)
    betas = (a.adam_beta1, a.adam_beta2)
    if a.optim == "adamw_torch":
        return torch.optim.AdamW(groups, lr=a.learning_rate, betas=betas, eps=a.adam_epsilon)
    if a.optim == "adafactor":
        from transformers.optimization import Adafactor
        return Adafactor(groups, lr=a.learning_rate, scale_parameter=False, relative_step=False)
    if a.optim == "adamw_bnb_8bit":
        import bitsandbytes as bnb
        opt = bnb.optim.AdamW(groups, lr=a.learning_rate, betas=betas, eps=a.adam_epsilon,
                              optim_bits=8, is_paged=False)
        manager = bnb.optim.GlobalOptimManager.get_instance()
        for m in model.modules():  # the Trainer keeps embedding states in fp32
            if isinstance(m, nn.Embedding):
                manager.register_module_override(m, "weight", {"optim_bits": 32})
        return opt
    raise SystemExit(f"--optim {a.optim}: not supported by this peer")


def train_torch(a, sd, shape, batches):
    model = GPT2(shape, a.gradient_checkpointing)
    model.load_hf(sd)
    del sd
    model.train()
    opt = make_optimizer(a, model)
    N = a.steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, (N - s) / N))
    losses, norms, ends = [], [], []
    k = 0
    t0 = time.perf_counter()
    for _ in range(min(N, a.stop_after or N)):
        step_loss = 0.0
        for _ in range(a.accum):
            x, y = batches[k]
            k += 1
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                loss = model(x, y)
            (loss / a.accum).backward()
            step_loss += loss.item() / a.accum
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(step_loss)
        norms.append(float(norm))
        ends.append(time.perf_counter() - t0)
    n_params = sum(p.numel() for p in model.parameters())
    return losses, norms, ends, n_params


# ---------------------------------------------------------------------------------------------
# transformers: GPT2LMHeadModel + Trainer
# ---------------------------------------------------------------------------------------------

def load_4bit(a, cfg):
    """GPT2LMHeadModel.from_pretrained with a BitsAndBytesConfig, as a QLoRA user loads a base:
    the init file becomes a checkpoint folder (config.json and a link to the safetensors), and
    transformers quantizes each Conv1D weight while loading, so the fp32 model never exists here.
    lm_head (tied to wte) and the embeddings stay fp32, as in snug."""
    from transformers import BitsAndBytesConfig, GPT2LMHeadModel

    folder = os.path.join(a.workdir, "init-checkpoint")
    os.makedirs(folder, exist_ok=True)
    cfg.save_pretrained(folder)
    link = os.path.join(folder, "model.safetensors")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.abspath(a.init), link)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=a.bnb_4bit_quant_type,
                           bnb_4bit_use_double_quant=a.bnb_4bit_use_double_quant,
                           bnb_4bit_compute_dtype=dtypes[a.bnb_4bit_compute_dtype])
    model = GPT2LMHeadModel.from_pretrained(folder, quantization_config=q, device_map="cpu",
                                            dtype=torch.float32)
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        model.tie_weights()
    return model


def train_hf(a, sd, shape, batches):
    import transformers
    from torch.utils.data import Dataset, SequentialSampler
    from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback,
                              TrainingArguments)

    transformers.logging.set_verbosity_error()
    cfg = GPT2Config(vocab_size=shape["vocab_size"], n_positions=shape["n_positions"],
                     n_embd=shape["n_embd"], n_layer=shape["n_layer"], n_head=shape["n_head"],
                     layer_norm_epsilon=shape["layer_norm_epsilon"],
                     activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, use_cache=False, tie_word_embeddings=True)
    if a.load_in_4bit:
        model = load_4bit(a, cfg)
    else:
        model = GPT2LMHeadModel(cfg)
        missing, unexpected = model.load_state_dict(sd, strict=False)
        missing = [m for m in missing if m != "lm_head.weight" and not m.endswith(".attn.bias")]
        if missing or unexpected:
            raise SystemExit(f"init weights: missing {missing[:3]}, unexpected {unexpected[:3]}")
    del sd
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        raise SystemExit("GPT2LMHeadModel did not tie lm_head to wte")
    if a.lora_adapter:
        from peft import PeftModel  # the base frozen, the adapters trainable, as get_peft_model

        model = PeftModel.from_pretrained(model, a.lora_adapter, is_trainable=True)

    class Windows(Dataset):
        """Rows in snug's order; shift_labels = the targets (no shifting inside the model)."""

        def __init__(self):
            self.rows = [(x[i], y[i]) for x, y in batches for i in range(x.shape[0])]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            x, y = self.rows[i]
            return {"input_ids": x, "labels": y, "shift_labels": y}

    class InOrder(Trainer):
        def _get_train_sampler(self, *args, **kwargs):
            return SequentialSampler(self.train_dataset)

    record = {"loss": [], "grad_norm": [], "ends": []}

    class Clock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            record["t0"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            record["ends"].append(time.perf_counter() - record["t0"])
            if a.stop_after and state.global_step >= a.stop_after:
                control.should_training_stop = True

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                record["loss"].append(float(logs["loss"]))
                record["grad_norm"].append(float(logs.get("grad_norm", float("nan"))))

    targs = TrainingArguments(
        output_dir=a.workdir, use_cpu=True, max_steps=a.steps,
        per_device_train_batch_size=a.batch, gradient_accumulation_steps=a.accum,
        learning_rate=a.learning_rate, lr_scheduler_type="linear", warmup_steps=0,
        weight_decay=a.weight_decay, adam_beta1=a.adam_beta1, adam_beta2=a.adam_beta2,
        adam_epsilon=a.adam_epsilon, max_grad_norm=a.max_grad_norm, optim=a.optim,
        bf16=a.bf16, gradient_checkpointing=a.gradient_checkpointing, logging_strategy="steps",
        logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True,
        dataloader_num_workers=0, remove_unused_columns=False, seed=a.seed)
    trainer = InOrder(model=model, args=targs, train_dataset=Windows(), callbacks=[Clock()])
    trainer.remove_callback(transformers.trainer_callback.PrinterCallback)  # no per-step prints
    trainer.train()
    n_params = sum(p.numel() for p in model.parameters())
    return record["loss"], record["grad_norm"], record["ends"], n_params


# ---------------------------------------------------------------------------------------------

def versions():
    v = {"torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}
    for mod in ("transformers", "safetensors", "bitsandbytes", "accelerate", "peft"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - absent or broken: report it absent
            v[mod] = None
    cfg = torch.__config__.show()
    for line in cfg.splitlines():
        line = line.strip()
        if "MKL-DNN" in line or "oneDNN" in line:
            v["onednn"] = line.lstrip("- ")
        elif "Math Kernel Library" in line:
            v["mkl"] = line.lstrip("- ")
    return v


def current_rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def import_libraries(a):
    """Imports what the run will use up front, so that rss_at_start_bytes includes them."""
    for mod, needed in (("transformers", a.impl == "hf" or a.optim == "adafactor"),
                        ("accelerate", a.impl == "hf"),
                        ("bitsandbytes", a.optim == "adamw_bnb_8bit" or a.load_in_4bit),
                        ("peft", bool(a.lora_adapter))):
        if needed:
            try:
                __import__(mod)
            except Exception:  # noqa: BLE001 - unavailable() says why
                pass


def unavailable(a):
    """Why this configuration cannot run here, or None."""
    if a.optim == "adamw_bnb_8bit":
        try:
            import bitsandbytes as bnb
            p = torch.nn.Parameter(torch.zeros(8192))
            p.grad = torch.ones_like(p)
            bnb.optim.AdamW([p], optim_bits=8).step()
        except Exception as e:  # noqa: BLE001 - any failure means the row cannot run
            return f"bitsandbytes 8-bit AdamW does not run on this CPU: {type(e).__name__}: {e}"
    if a.bf16 and not torch.backends.mkldnn.is_available():
        return "torch was built without oneDNN: no bf16 autocast on the CPU"
    if a.impl == "hf":
        try:
            import accelerate  # noqa: F401 - Trainer needs it
        except ImportError:
            return "transformers' Trainer needs accelerate (pip install accelerate)"
    if a.load_in_4bit:
        if a.impl != "hf":
            return ("a 4-bit base loads through transformers' BitsAndBytesConfig (the hf peer); "
                    "plain torch has none")
        if not a.lora_adapter:
            return "a 4-bit base trains adapters only (add --lora-adapter)"
        try:
            import bitsandbytes as bnb
            w = bnb.nn.Params4bit(torch.randn(64, 64), requires_grad=False,
                                  quant_type=a.bnb_4bit_quant_type)
            lin = bnb.nn.Linear4bit(64, 64, bias=False, compute_dtype=torch.float32)
            lin.weight = w.to("cpu")
            x = torch.randn(2, 64, requires_grad=True)
            lin(x).sum().backward()
        except Exception as e:  # noqa: BLE001 - any failure means the row cannot run
            return f"bitsandbytes 4-bit Linear does not run on this CPU: {type(e).__name__}: {e}"
    if a.lora_adapter:
        if a.impl != "hf":
            return "LoRA runs through PEFT on GPT2LMHeadModel (the hf peer); plain torch has none"
        try:
            import peft  # noqa: F401
        except ImportError:
            return "the LoRA row needs peft (pip install peft)"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", choices=("torch", "hf"), default="torch")
    ap.add_argument("--init", required=True, help="initial weights from snug export-init")
    ap.add_argument("--batches", required=True, help="token batches from snug export-init")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop after this many of the --steps steps (the learning-rate schedule "
                         "still spans --steps): a slow peer's first steps; 0 = all")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--optim", default="adamw_torch",
                    choices=("adamw_torch", "adafactor", "adamw_bnb_8bit"))
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--lora-adapter", help="a PEFT adapter folder to train on the frozen base "
                    "(snug export --adapter writes snug's initial adapters)")
    # A 4-bit base (hf peer only), named as snug's flags and transformers' BitsAndBytesConfig
    ap.add_argument("--load-in-4bit", action="store_true")
    ap.add_argument("--bnb-4bit-quant-type", default="fp4", choices=("nf4", "fp4"))
    ap.add_argument("--bnb-4bit-use-double-quant", action="store_true")
    ap.add_argument("--bnb-4bit-compute-dtype", default="fp32", choices=("fp32", "bf16"))
    # snug's defaults (src/train/training_args.h)
    ap.add_argument("--learning-rate", type=float, default=6e-4)
    ap.add_argument("--adam-beta1", type=float, default=0.9)
    ap.add_argument("--adam-beta2", type=float, default=0.999)
    ap.add_argument("--adam-epsilon", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--workdir", default="/tmp/snug-peer-hf", help="Trainer output_dir (unused)")
    ap.add_argument("--json", help="also write the result here")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    import_libraries(a)
    out = {"engine": a.impl, "threads": a.threads, "versions": versions(),
           # Python, torch and the libraries, before any tensor of the run: the floor of the
           # peak RSS (a CUDA build of torch maps more than a CPU-only one).
           "rss_at_start_bytes": current_rss_bytes()}
    why = unavailable(a)
    if why is None:
        # A 4-bit base is loaded from the file by transformers, tensor by tensor.
        sd, shape, model_name = read_init(a.init, tensors=not a.load_in_4bit)
        batches = read_batches(a.batches, a.steps, a.accum, a.batch, a.seq)
        train = train_torch if a.impl == "torch" else train_hf
        losses, norms, ends, n_params = train(a, sd, shape, batches)
        tokens_per_step = a.batch * a.seq * a.accum
        steady = (tokens_per_step * (len(ends) - 1) / (ends[-1] - ends[0])
                  if len(ends) > 1 else float("nan"))
        out.update({
            "model": model_name, "n_params": n_params, "steps": len(ends),
            "tokens_per_step": tokens_per_step, "step_end_s": ends,
            "train_runtime": ends[-1] if ends else None,
            "tokens_per_second": steady,
            "loss": losses, "grad_norm": norms,
            "final_loss": losses[-1] if losses else None,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            # torch keeps allocator statistics for CUDA only; CPU tensors come from malloc.
            "allocator": ({"max_memory_allocated": torch.cuda.max_memory_allocated(),
                           "max_memory_reserved": torch.cuda.max_memory_reserved()}
                          if torch.cuda.is_initialized() else None),
            "threads_used": torch.get_num_threads(),
        })
        if any(not math.isfinite(x) for x in losses):
            out["error"] = "non-finite loss"
    else:
        out["not_available"] = why
    text = json.dumps(out)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
