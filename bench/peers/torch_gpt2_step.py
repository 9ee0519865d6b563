"""PyTorch peer for bench/train_step_bench.cpp: one GPT-2 training step (forward, backward,
clip_grad_norm_, AdamW) in fp32 on the CPU, the way a PyTorch user writes it (nn.Module,
F.scaled_dot_product_attention, fused cross-entropy over materialized logits).

Run (torch from PyPI):  python bench/peers/torch_gpt2_step.py --model gpt2-124m --batch 4 --seq 256
Prints tokens/s; compare with build/release/bench/train_step_bench run in the same session.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {"gpt2-tiny": (256, 256, 128, 4, 4), "gpt2-124m": (50257, 1024, 768, 12, 12)}


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
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
    def __init__(self, V, P, C, L, NH):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(P, C)
        self.h = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, ids, targets):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2-124m", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    V = SHAPES[a.model][0]
    model = GPT2(*SHAPES[a.model])
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4)
    ids = torch.randint(0, V, (a.batch, a.seq))
    tgt = torch.randint(0, V, (a.batch, a.seq))

    def step():
        loss = model(ids, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up: optimizer state, allocator
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    best = min(times)
    print(f"torch {torch.__version__} {a.model} B={a.batch} T={a.seq} threads={a.threads}: "
          f"best {best:.3f} s/step, {a.batch * a.seq / best:.1f} tokens/s "
          f"(median {sorted(times)[len(times) // 2]:.3f} s)")


if __name__ == "__main__":
    main()
