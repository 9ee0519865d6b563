"""Regenerates tests/fixtures/optim_golden_extra.safetensors: lion_8bit, lomo, adalomo, galore_adamw.

Oracles, all float32 on the CPU:
- lion_8bit: bitsandbytes.optim.Lion8bit (bitsandbytes 0.50.x runs its 8-bit optimizers on the
  CPU backend). Three steps; before and after every step the parameters, the u8 codes of
  state1 (stored as I32) and its per-block absmax are saved, so the C++ test can start each
  step from bitsandbytes' own state and compare one step at a time (codes within one
  quantization code).
- lomo, adalomo: the update functions of OpenLMLab/LOMO lomo_optim/lomo.py and adalomo.py
  (fuse_update), written out below with the same torch operations in the same order (lomo-optim
  itself needs CUDA and a model); grad-norm clipping is exercised with a fixed clip_coef.
- galore_adamw: galore_torch/adamw.py + galore_projector.py (proj_type "std") written out
  with torch ops, the projector from numpy.linalg.svd in float64 cast to float32, each singular
  vector's sign fixed so that its largest-magnitude component is positive (the convention of
  src/kernels/top_singular.h; the update does not depend on signs within one projector, and the
  fixed convention makes refreshes comparable). Three steps with update_proj_gap 2 (refresh at
  steps 0 and 2), rank 8, on a (24, 40) matrix (left projector), a (40, 24) matrix (right
  projector) and a (40,) bias (plain AdamW, no decay).

Run: /tmp/tv/bin/python tests/golden/gen_optim_golden_extra.py (needs torch, numpy,
safetensors, bitsandbytes).
"""

import math
import os

import bitsandbytes as bnb
import numpy as np
import torch
from safetensors.torch import save_file

STEPS = 3


def f32(x):
    return float(np.float32(x))


# ---------------------------------------------------------------- lion_8bit (bitsandbytes)
def lion8bit(out):
    torch.manual_seed(77)
    w = torch.nn.Parameter((torch.randn(67, 77) * 0.5).float())  # 5159 = 20 blocks + 39
    b = torch.nn.Parameter((torch.randn(53) * 0.5).float())  # < 4096: fp32 state
    lr, wd = f32(1e-2), f32(0.1)
    opt = bnb.optim.Lion8bit(
        [{"params": [w], "weight_decay": wd}, {"params": [b], "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.99), min_8bit_size=4096)
    out["lion8.w.0"] = w.detach().clone()
    out["lion8.b.0"] = b.detach().clone()
    for k in range(1, STEPS + 1):
        st_w = opt.state[w] if w in opt.state else None
        if st_w:
            out[f"lion8.wq.{k - 1}"] = st_w["state1"].to(torch.int32)
            out[f"lion8.wabsmax.{k - 1}"] = st_w["absmax1"].clone()
            out[f"lion8.bm.{k - 1}"] = opt.state[b]["state1"].clone()
        w.grad = (torch.randn(67, 77) * (0.1 * k)).float()
        b.grad = (torch.randn(53) * (0.1 * k)).float()
        out[f"lion8.grad_w.{k}"] = w.grad.clone()
        out[f"lion8.grad_b.{k}"] = b.grad.clone()
        opt.step()
        out[f"lion8.w.{k}"] = w.detach().clone()
        out[f"lion8.b.{k}"] = b.detach().clone()
        out[f"lion8.wq.{k}"] = opt.state[w]["state1"].to(torch.int32)
        out[f"lion8.wabsmax.{k}"] = opt.state[w]["absmax1"].clone()
        out[f"lion8.bm.{k}"] = opt.state[b]["state1"].clone()
        assert opt.state[w]["state1"].dtype == torch.uint8
        assert opt.state[b]["state1"].dtype == torch.float32
    out["lion8.qmap1"] = opt.state[w]["qmap1"].clone()


# ---------------------------------------------------------------- lomo / adalomo (lomo_optim)
def lomo_update(p, grad, lr, wd, clip_coef):
    grad_fp32 = grad.to(torch.float32)
    if clip_coef is not None:
        grad_fp32.mul_(clip_coef)
    p_fp32 = p.data.to(torch.float32)
    if wd > 0.0:
        p_fp32.mul_(1.0 - lr * wd)
    p_fp32.add_(grad_fp32, alpha=-lr)
    p.data.copy_(p_fp32)


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


def lomo_family(out):
    torch.manual_seed(4321)
    w0 = (torch.randn(37, 53) * 0.5).float()
    b0 = (torch.randn(53) * 0.5).float()
    gw = [(torch.randn(37, 53) * (0.1 * (k + 1))).float() for k in range(STEPS)]
    gb = [(torch.randn(53) * (0.1 * (k + 1))).float() for k in range(STEPS)]
    out["lomo.w0"], out["lomo.b0"] = w0.clone(), b0.clone()
    for k in range(STEPS):
        out[f"lomo.grad_w.{k + 1}"] = gw[k].clone()
        out[f"lomo.grad_b.{k + 1}"] = gb[k].clone()
    # name -> (lr, wd, clip_coef); keep in sync with tests/optim/optim_golden_extra_test.cpp.
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
                adalomo_update(w, gw[k].clone(), state_w, k + 1, lr, wd, coef)
                adalomo_update(b, gb[k].clone(), state_b, k + 1, lr, 0.0, coef)
            else:
                lomo_update(w, gw[k].clone(), lr, wd, coef)
                lomo_update(b, gb[k].clone(), lr, 0.0, coef)
            out[f"{name}.w.{k + 1}"] = w.clone()
            out[f"{name}.b.{k + 1}"] = b.clone()


# ---------------------------------------------------------------- galore_adamw (galore_torch)
def top_vectors(g, rank, side):
    u, s, vh = np.linalg.svd(g.double().numpy(), full_matrices=False)
    vecs = u[:, :rank].T if side == "left" else vh[:rank, :]  # one vector per row
    for i in range(vecs.shape[0]):
        j = int(np.argmax(np.abs(vecs[i])))
        if vecs[i, j] < 0:
            vecs[i] = -vecs[i]
    vecs = torch.from_numpy(vecs).float()
    return vecs.t().contiguous() if side == "left" else vecs.contiguous()


def galore_step(p, grad, state, group):
    # galore_torch/adamw.py AdamW.step for one parameter.
    if "rank" in group:
        right = grad.shape[0] >= grad.shape[1]
        if "ortho" not in state or state["step"] % group["update_proj_gap"] == 0:
            state["ortho"] = top_vectors(grad, group["rank"], "right" if right else "left")
        grad = grad @ state["ortho"].t() if right else state["ortho"].t() @ grad
    if "exp_avg" not in state:
        state["exp_avg"] = torch.zeros_like(grad)
        state["exp_avg_sq"] = torch.zeros_like(grad)
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    beta1, beta2 = group["betas"]
    state["step"] += 1
    exp_avg.mul_(beta1).add_(grad, alpha=(1.0 - beta1))
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
    denom = exp_avg_sq.sqrt().add_(group["eps"])
    step_size = group["lr"]
    bias_correction1 = 1.0 - beta1 ** state["step"]
    bias_correction2 = 1.0 - beta2 ** state["step"]
    step_size = step_size * math.sqrt(bias_correction2) / bias_correction1
    norm_grad = exp_avg / denom
    if "rank" in group:
        low = norm_grad
        if low.shape[0] >= low.shape[1]:
            norm_grad = low @ state["ortho"]
        else:
            norm_grad = state["ortho"] @ low
        norm_grad = norm_grad * group["scale"]
    p.add_(norm_grad, alpha=-step_size)
    if group["weight_decay"] > 0.0:
        p.add_(p, alpha=(-group["lr"] * group["weight_decay"]))


def galore(out):
    torch.manual_seed(2024)
    shapes = {"left": (24, 40), "right": (40, 24), "bias": (40,)}
    lr, wd = f32(1e-2), f32(0.1)
    common = {"lr": lr, "betas": (0.9, 0.999), "eps": 1e-8}
    groups = {
        "left": dict(common, weight_decay=wd, rank=8, update_proj_gap=2, scale=0.25),
        "right": dict(common, weight_decay=wd, rank=8, update_proj_gap=2, scale=0.25),
        "bias": dict(common, weight_decay=0.0),
    }
    for key, shape in shapes.items():
        p = (torch.randn(*shape) * 0.5).float()
        out[f"galore.{key}.0"] = p.clone()
        state = {"step": 0}
        for k in range(1, STEPS + 1):
            g = (torch.randn(*shape) * (0.1 * k)).float()
            out[f"galore.{key}.grad.{k}"] = g.clone()
            galore_step(p, g, state, groups[key])
            out[f"galore.{key}.{k}"] = p.clone()
        if "ortho" in state:
            out[f"galore.{key}.projector"] = state["ortho"].clone()


def main():
    out = {}
    lion8bit(out)
    lomo_family(out)
    galore(out)
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "optim_golden_extra.safetensors")
    save_file({k: v.contiguous() for k, v in out.items()}, path)
    print(f"wrote {os.path.normpath(path)} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


if __name__ == "__main__":
    main()
