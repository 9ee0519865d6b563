"""Regenerates tests/fixtures/lomo_bf16_golden.safetensors: lomo and adalomo on bf16 parameters.

Oracle: the update functions of OpenLMLab/LOMO lomo_optim/lomo.py and adalomo.py (fuse_update),
written out with the same torch operations in the same order as gen_optim_golden_extra.py does
for fp32, applied here to bf16 parameters and bf16 gradients as the LOMO paper trains: the
arithmetic in float32 on the widened values, and p.data.copy_(p_fp32) rounding the result to
bf16, to nearest even. snug's --bf16-full rounds stochastically instead; the tests run its
kernels with round-to-nearest against these values (tests/train/lomo_bf16_test.cpp) and check
the stochastic results bracket the float32 values saved here before rounding ("*.f32.*").

Setup: a (37, 53) matrix W with weight decay and a (53,) vector b without, three steps with fixed
gradients, clipping coefficient none or 0.25.

Run: /work/venv/bin/python tests/golden/gen_lomo_bf16_golden.py  (needs torch, safetensors).
"""

import math
import os

import torch
from safetensors.torch import save_file

STEPS = 3


def f32(x):
    return float(torch.tensor(x, dtype=torch.float32))


def lomo_update(p, grad, lr, wd, clip_coef):
    grad_fp32 = grad.to(torch.float32)
    if clip_coef is not None:
        grad_fp32.mul_(clip_coef)
    p_fp32 = p.data.to(torch.float32)
    if wd > 0.0:
        p_fp32.mul_(1.0 - lr * wd)
    p_fp32.add_(grad_fp32, alpha=-lr)
    p.data.copy_(p_fp32)
    return p_fp32


def rms(t):
    return t.norm(2) / (t.numel() ** 0.5)


def adalomo_update(p, grad, state, step_num, lr, wd, clip_coef, eps=(1e-30, 1e-3),
                   clip_threshold=1.0, decay_rate=-0.8):
    grad_fp32 = grad.to(torch.float32)
    if clip_coef is not None:
        grad_fp32.mul_(clip_coef)
    beta2t = 1.0 - math.pow(step_num, decay_rate)
    update = (grad_fp32**2) + eps[0]
    if len(p.data.shape) > 1:
        state["row"].mul_(beta2t).add_(update.mean(dim=-1), alpha=1.0 - beta2t)
        state["col"].mul_(beta2t).add_(update.mean(dim=-2), alpha=1.0 - beta2t)
        r_factor = (state["row"] / state["row"].mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
        c_factor = state["col"].unsqueeze(-2).rsqrt()
        update = torch.mul(r_factor, c_factor)
        update.mul_(grad_fp32)
    else:
        state["full"].mul_(beta2t).add_(update, alpha=1.0 - beta2t)
        update = state["full"].rsqrt().mul_(grad_fp32)
    update.div_((rms(update) / clip_threshold).clamp_(min=1.0))
    p_fp32 = p.data.to(torch.float32)
    p_rms = torch.norm(p_fp32, 2.0) / math.sqrt(p.numel())
    lr = lr * max(eps[1], p_rms)
    if wd > 0.0:
        p_fp32.mul_(1.0 - lr * wd)
    p_fp32.add_(update, alpha=-lr)
    p.data.copy_(p_fp32)
    return p_fp32


def main():
    torch.manual_seed(2306)
    bf = torch.bfloat16
    w0 = (torch.randn(37, 53) * 0.5).to(bf)
    b0 = (torch.randn(53) * 0.5).to(bf)
    gw = [(torch.randn(37, 53) * (0.1 * (k + 1))).to(bf) for k in range(STEPS)]
    gb = [(torch.randn(53) * (0.1 * (k + 1))).to(bf) for k in range(STEPS)]
    out = {"w0": w0.float(), "b0": b0.float()}  # bf16 values, widened exactly
    for k in range(STEPS):
        out[f"grad_w.{k + 1}"] = gw[k].float()
        out[f"grad_b.{k + 1}"] = gb[k].float()
    # name -> (lr, wd, clip_coef); keep in sync with tests/train/lomo_bf16_test.cpp.
    configs = {
        "lomo": (f32(0.1), f32(0.01), None),
        "lomo_clip": (f32(0.1), f32(0.01), f32(0.25)),
        "adalomo": (f32(1e-2), f32(0.1), None),
        "adalomo_clip": (f32(1e-2), f32(0.1), f32(0.25)),
    }
    for name, (lr, wd, coef) in configs.items():
        w, b = w0.clone(), b0.clone()
        state_w = {"row": torch.zeros(37), "col": torch.zeros(53)}
        state_b = {"full": torch.zeros(53)}
        for k in range(STEPS):
            if name.startswith("adalomo"):
                wf = adalomo_update(w, gw[k].clone(), state_w, k + 1, lr, wd, coef)
                bf32 = adalomo_update(b, gb[k].clone(), state_b, k + 1, lr, 0.0, coef)
            else:
                wf = lomo_update(w, gw[k].clone(), lr, wd, coef)
                bf32 = lomo_update(b, gb[k].clone(), lr, 0.0, coef)
            assert w.dtype == bf and b.dtype == bf
            out[f"{name}.w.{k + 1}"] = w.float()
            out[f"{name}.b.{k + 1}"] = b.float()
            out[f"{name}.f32.w.{k + 1}"] = wf.clone()
            out[f"{name}.f32.b.{k + 1}"] = bf32.clone()
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "lomo_bf16_golden.safetensors")
    save_file({k: v.contiguous() for k, v in out.items()}, path)
    print(f"wrote {os.path.normpath(path)} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


if __name__ == "__main__":
    main()
