#!/usr/bin/env python3
"""The PyTorch peer of the LoRA row of snug's GPU speed table (issue 27, acceptance 4): a
Qwen2-0.5B shape (transformers' Qwen2ForCausalLM, SDPA attention, random weights) with its base in
bf16, PEFT LoRA r=16 (alpha 32, no dropout) on every linear layer, trained under bf16 autocast
with torch.optim.AdamW(fused=True) over the adapters, on random tokens: what a PEFT user's
training step does (the HF Trainer with bf16=True runs the same autocast).

The snug side of the row is
  snug train --device cuda --model qwen2-0.5b --torch-dtype bfloat16 --bf16 --lora-r 16
             --lora-alpha 32 --target-modules all-linear --seq-len 512
             --per-device-train-batch-size 4
(bench/gpu/check.py part `lora`). Prints one JSON object: tokens/s (median over the timed steps,
CUDA events, after --warmup untimed steps), torch's peak allocated and reserved bytes, the GPU.

Usage: python3 bench/gpu/torch_lora_cuda.py [--batch 4 --seq 512 --steps 12 --warmup 3]
       [--json OUT]
"""
import argparse

import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen2Config, Qwen2ForCausalLM

from torch_timing import report, time_steps  # bench/gpu/torch_timing.py


def qwen2_05b():
    # Qwen/Qwen2-0.5B's config.json (../shared/research/model-families.md).
    return Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                       num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                       max_position_embeddings=131072, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True, attention_dropout=0.0,
                       attn_implementation="sdpa")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = torch.device("cuda")
    cfg = qwen2_05b()
    model = Qwen2ForCausalLM(cfg).to(device=dev, dtype=torch.bfloat16)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                             target_modules="all-linear", task_type="CAUSAL_LM"))
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=2e-4, weight_decay=0.0, fused=True)
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device=dev, generator=gen)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    med, loss = time_steps(step, a.warmup, a.steps)
    import peft
    import transformers
    report(a, med, loss,
           peer=f"torch {torch.__version__} + transformers {transformers.__version__} "
           f"Qwen2ForCausalLM (sdpa, bf16 base) + peft {peft.__version__} LoRA r=16 "
           "all-linear, bf16 autocast, fused AdamW",
           trainable_params=sum(p.numel() for p in trainable))


if __name__ == "__main__":
    main()
