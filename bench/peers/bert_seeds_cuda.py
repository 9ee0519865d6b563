#!/usr/bin/env python3
"""bench/peers/bert_seeds_cuda.py: the seeds' bert-large table, measured with PyTorch on a CUDA GPU.

`snug bench seeds --model bert-large-uncased --device-memory v100-16gb --plan-only` predicts the
Hugging Face guide's table ("Efficient training on a single GPU": bert-large-uncased,
sequence classification with 2 labels, eager attention, 4 x 512 tokens per optimizer step) as
dry runs. The guide's own figures are nvidia-smi's on a V100 in 2022. This script measures the
same rows today with the allocator's own counters, so the plan can be compared with what PyTorch
allocates (max_memory_allocated), what its caching allocator reserves (max_memory_reserved) and
what the guide's zero_grad(set_to_none=False) kept, row by row.

Each row is a fresh model (random init from a config: no hub), two optimizer steps the Trainer's
way (model.train(), autocast + GradScaler for fp16, gradient checkpointing through
transformers, accumulation by scaling the loss), the peak counters reset before the model is
built. The optimizer is torch's AdamW (the Trainer's adamw_torch) or transformers' Adafactor
with the Trainer's settings (scale_parameter=False, relative_step=False).

Usage: python3 bench/peers/bert_seeds_cuda.py [--json OUT] [--steps 2]
"""
import argparse
import json
import sys

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification
from transformers.optimization import Adafactor

MB = 1024.0 * 1024.0

# (row, batch, accumulation, checkpointing, fp16, optimizer): the seeds' rows snug plans.
ROWS = [
    ("vanilla", 4, 1, False, False, "adamw"),
    ("grad_accum", 1, 4, False, False, "adamw"),
    ("grad_ckpt", 1, 4, True, False, "adamw"),
    ("fp16", 4, 1, False, True, "adamw"),
    ("combined", 1, 4, True, True, "adamw"),
    ("adafactor", 4, 1, False, False, "adafactor"),
    ("adafactor_combined", 1, 4, True, True, "adafactor"),
]


def bert_large():
    return BertConfig(vocab_size=30522, hidden_size=1024, num_hidden_layers=24,
                      num_attention_heads=16, intermediate_size=4096, max_position_embeddings=512,
                      num_labels=2, attn_implementation="eager")


def run_row(batch, accum, ckpt, fp16, optim, steps, set_to_none, seq=512):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    torch.manual_seed(42)
    with torch.device("cuda"):
        model = BertForSequenceClassification(bert_large())
    model.config.use_cache = False
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    if optim == "adamw":
        opt = torch.optim.AdamW(params, lr=5e-5, weight_decay=0.0, foreach=False)
    else:
        opt = Adafactor(params, lr=5e-5, scale_parameter=False, relative_step=False,
                        warmup_init=False)
    scaler = torch.amp.GradScaler("cuda", enabled=fp16)
    g = torch.Generator(device="cuda").manual_seed(0)
    for _ in range(steps):
        for _ in range(accum):
            ids = torch.randint(100, 30000, (batch, seq), device="cuda", generator=g)
            labels = torch.randint(0, 2, (batch,), device="cuda", generator=g)
            with torch.autocast("cuda", dtype=torch.float16, enabled=fp16):
                loss = model(input_ids=ids, labels=labels).loss / accum
            scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=set_to_none)
    torch.cuda.synchronize()
    out = {
        "allocated_mb": (torch.cuda.max_memory_allocated() - base) / MB,
        "reserved_mb": torch.cuda.max_memory_reserved() / MB,
        "loss": float(loss.item()) * accum,
    }
    del model, opt, scaler
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
    dev = torch.cuda.get_device_name(0)
    print(f"# {dev}, torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"{'row':20s} {'alloc MB':>9s} {'reserved MB':>12s} {'alloc, keep grads':>18s}")
    rows = []
    for name, b, acc, ckpt, fp16, opt in ROWS:
        r = run_row(b, acc, ckpt, fp16, opt, a.steps, set_to_none=True)
        k = run_row(b, acc, ckpt, fp16, opt, a.steps, set_to_none=False)
        rows.append({"row": name, "set_to_none": r, "keep_grads": k})
        print(f"{name:20s} {r['allocated_mb']:9.0f} {r['reserved_mb']:12.0f} "
              f"{k['allocated_mb']:18.0f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__,
                       "transformers": transformers.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
