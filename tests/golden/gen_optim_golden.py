"""Regenerates tests/fixtures/optim_golden.safetensors: three optimizer steps on fixed tensors.

Oracles: torch.optim.SGD and torch.optim.AdamW (torch 2.x), transformers.optimization.Adafactor
(transformers 5.x) and lion_pytorch.Lion (lion-pytorch 0.2.x), all float32 on the CPU. The
bitsandbytes dynamic quantization maps are built here with bitsandbytes' own
functional.py::create_dynamic_map code (bitsandbytes is not installed here; the function is pure
torch and copied verbatim in behaviour).

Setup: a (37, 53) matrix W with weight decay and a (53,) vector b without (as the HF Trainer's
"no decay" group treats biases), three steps with fixed gradients. Learning rates and weight
decays are float32-representable so that the C++ side passes the same numbers.

Run: /tmp/tv/bin/python tests/golden/gen_optim_golden.py  (needs torch, safetensors,
transformers, lion-pytorch).
"""

import os

import numpy as np
import torch
from lion_pytorch import Lion
from safetensors.torch import save_file
from transformers.optimization import Adafactor

STEPS = 3


def f32(x):
    return float(np.float32(x))


# name -> (factory(params_with_groups) , lr, wd). Keep in sync with tests/optim/optim_golden_test.cpp.
CONFIGS = {
    "sgd": dict(lr=f32(0.1), wd=f32(0.01), momentum=0.0),
    "sgd_momentum": dict(lr=f32(0.1), wd=f32(0.01), momentum=f32(0.9)),
    "adamw_torch": dict(lr=f32(1e-2), wd=f32(0.1)),
    "lion": dict(lr=f32(1e-2), wd=f32(0.1)),
    "adafactor": dict(lr=f32(1e-2), wd=f32(0.1)),
    "adafactor_relative_step": dict(lr=None, wd=f32(0.1)),
}


def make(name, w, b, cfg):
    wd, lr = cfg["wd"], cfg["lr"]
    groups = [{"params": [w], "weight_decay": wd}, {"params": [b], "weight_decay": 0.0}]
    if name.startswith("sgd"):
        return torch.optim.SGD(groups, lr=lr, momentum=cfg["momentum"], foreach=False)
    if name == "adamw_torch":
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    if name == "lion":
        return Lion(groups, lr=lr, betas=(0.9, 0.99))
    if name == "adafactor":
        # The HF Trainer's optim="adafactor": Adafactor(lr=..., scale_parameter=False,
        # relative_step=False) with the other arguments at their defaults.
        return Adafactor(groups, lr=lr, scale_parameter=False, relative_step=False)
    if name == "adafactor_relative_step":
        return Adafactor(groups, lr=None, scale_parameter=True, relative_step=True,
                         warmup_init=False)
    raise ValueError(name)


def create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    # bitsandbytes functional.py::create_dynamic_map (same operations, float32 linspace).
    data = []
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    for i in range(max_exponent_bits):
        fraction_items = int(
            2 ** (i + non_sign_bits - max_exponent_bits) + 1
            if signed
            else 2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1
        )
        boundaries = torch.linspace(0.1, 1, fraction_items, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    if additional_items > 0:
        boundaries = torch.linspace(0.1, 1, additional_items + 1, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    data.append(0)
    data.append(1.0)
    assert len(data) == 2**total_bits
    data.sort()
    return torch.tensor(data, dtype=torch.float32)


def main():
    torch.manual_seed(1234)
    w0 = (torch.randn(37, 53) * 0.5).float()
    b0 = (torch.randn(53) * 0.5).float()
    gw = [(torch.randn(37, 53) * (0.1 * (k + 1))).float() for k in range(STEPS)]
    gb = [(torch.randn(53) * (0.1 * (k + 1))).float() for k in range(STEPS)]
    out = {"w0": w0.clone(), "b0": b0.clone()}
    for k in range(STEPS):
        out[f"grad_w.{k + 1}"] = gw[k].clone()
        out[f"grad_b.{k + 1}"] = gb[k].clone()
    for name, cfg in CONFIGS.items():
        w = w0.clone().requires_grad_(True)
        b = b0.clone().requires_grad_(True)
        opt = make(name, w, b, cfg)
        for k in range(STEPS):
            w.grad = gw[k].clone()
            b.grad = gb[k].clone()
            opt.step()
            out[f"{name}.w.{k + 1}"] = w.detach().clone()
            out[f"{name}.b.{k + 1}"] = b.detach().clone()
    out["map_signed"] = create_dynamic_map(True)
    out["map_unsigned"] = create_dynamic_map(False)
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "optim_golden.safetensors")
    save_file({k: v.contiguous() for k, v in out.items()}, path)
    print(f"wrote {os.path.normpath(path)} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


if __name__ == "__main__":
    main()
