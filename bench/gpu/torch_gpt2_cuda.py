#!/usr/bin/env python3
"""The PyTorch peer of snug's GPU speed table (issue 27, acceptance 4): Hugging Face's
GPT2LMHeadModel (SDPA attention) trained on random tokens with torch.optim.AdamW(fused=True), in
fp32, in bf16 autocast, or in bf16 autocast under torch.compile, as a PyTorch user writes it.

Prints one JSON object: tokens/s (median over the timed steps, each timed with CUDA events after
--warmup untimed steps), the peak memory torch's allocator reports (max_memory_allocated and
max_memory_reserved), the GPU's name.

Usage: python3 bench/gpu/torch_gpt2_cuda.py --mode fp32|bf16|compile [--batch 16 --seq 1024
       --steps 12 --warmup 3] [--json OUT] [--profile]
"""
import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from torch_timing import report, time_steps  # bench/gpu/torch_timing.py


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("fp32", "bf16", "compile"), default="fp32")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--profile", action="store_true",
                    help="after timing, profile 2 steps and print the top CUDA kernels to stderr")
    a = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as snug computes it
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = torch.device("cuda")
    cfg = GPT2Config(n_positions=max(1024, a.seq), n_embd=768, n_layer=12, n_head=12,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    model = GPT2LMHeadModel(cfg).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.0, fused=True)
    step_model = torch.compile(model) if a.mode == "compile" else model
    autocast = a.mode in ("bf16", "compile")
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device=dev, generator=gen)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = step_model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    med, loss = time_steps(step, a.warmup, a.steps)
    if a.profile:
        import sys
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(2):
                step()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30,
                                        max_name_column_width=90), file=sys.stderr)
    report(a, med, loss,
           peer="torch " + torch.__version__ + " + transformers GPT2LMHeadModel (sdpa), fused AdamW",
           mode=a.mode)


if __name__ == "__main__":
    main()
