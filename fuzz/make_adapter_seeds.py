#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz/corpus/adapter_folder (fuzz/entry_points.h: adapter_folder).

Each seed is one input of the target: a 2-byte little-endian length L, L bytes of
adapter_config.json, then adapter_model.safetensors. The target builds llama-tiny or gpt2-tiny
shrunk to one layer of width 8 (2 heads; vocabulary 16), picked by the parity of the first two
bytes, so each config is padded with spaces to pick its model. Standard library only.

    python3 fuzz/make_adapter_seeds.py fuzz/corpus/adapter_folder
"""
import json
import math
import struct
import sys
from pathlib import Path

PREFIX = "base_model.model."
# (module, out, in) of the shrunk models' Linears (nn.Linear layout, as PEFT saves lora_A/B).
LLAMA = {
    "q_proj": ("model.layers.0.self_attn.q_proj", 8, 8),
    "k_proj": ("model.layers.0.self_attn.k_proj", 8, 8),
    "v_proj": ("model.layers.0.self_attn.v_proj", 8, 8),
    "o_proj": ("model.layers.0.self_attn.o_proj", 8, 8),
    "down_proj": ("model.layers.0.mlp.down_proj", 8, 352),
}
GPT2 = {
    "c_attn": ("transformer.h.0.attn.c_attn", 24, 8),
    "c_fc": ("transformer.h.0.mlp.c_fc", 32, 8),
}


def pack(dtype, values):
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F64":
        return struct.pack(f"<{len(values)}d", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    # BF16: the top half of the float32 bits (values here are exact in bf16).
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def safetensors(tensors):
    """tensors: list of (name, dtype, shape, values)."""
    header, blobs, offset = {}, [], 0
    for name, dtype, shape, values in tensors:
        blob = pack(dtype, values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


def adapter(modules, targets, r, dtype="F32", poison=None):
    out = []
    for t in targets:
        module, n_out, n_in = modules[t]
        for which, shape in (("lora_A", [r, n_in]), ("lora_B", [n_out, r])):
            n = shape[0] * shape[1]
            values = [((i * 7) % 13 - 6) / 16.0 for i in range(n)]
            if poison is not None and which == "lora_B":
                values[n // 2] = poison
            out.append((f"{PREFIX}{module}.{which}.weight", dtype, shape, values))
    return out


def seed(config, tensors, llama):
    text = json.dumps(config).encode() if isinstance(config, dict) else config
    # The target picks llama when the two length bytes' XOR is even.
    if (((len(text) & 0xFF) ^ (len(text) >> 8)) & 1) != (0 if llama else 1):
        text += b" "
    body = safetensors(tensors) if isinstance(tensors, list) else tensors
    return struct.pack("<H", len(text)) + text + body


def config(r, targets, alpha=16, **extra):
    c = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": alpha,
         "target_modules": targets, "bias": "none", "lora_dropout": 0.05, "use_rslora": False,
         "fan_in_fan_out": False, "modules_to_save": None}
    c.update(extra)
    return c


def main(out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    qv = ["q_proj", "v_proj"]
    seeds = {
        "llama_qv_f32": seed(config(2, qv), adapter(LLAMA, qv, 2), True),
        "llama_all_f16_rslora": seed(config(4, list(LLAMA), use_rslora=True),
                                     adapter(LLAMA, list(LLAMA), 4, "F16"), True),
        "gpt2_c_attn_bf16": seed(config(2, ["c_attn", "c_fc"], fan_in_fan_out=True),
                                 adapter(GPT2, ["c_attn", "c_fc"], 2, "BF16"), False),
        "llama_nan": seed(config(2, qv), adapter(LLAMA, qv, 2, poison=math.nan), True),
        "llama_inf_bf16": seed(config(2, qv), adapter(LLAMA, qv, 2, "BF16", poison=math.inf), True),
        "llama_wrong_rank": seed(config(4, qv), adapter(LLAMA, qv, 2), True),
        "llama_missing_tensor": seed(config(2, qv), adapter(LLAMA, qv, 2)[:-1], True),
        "llama_extra_target": seed(config(2, ["q_proj"]), adapter(LLAMA, qv, 2), True),
        "llama_unknown_target": seed(config(2, ["nope"]), adapter(LLAMA, qv, 2), True),
        "llama_alpha_huge": seed(config(2, qv, alpha=1e38), adapter(LLAMA, qv, 2), True),
        "llama_regex_targets": seed(config(2, ".*proj"), adapter(LLAMA, qv, 2), True),
        "llama_dora": seed(config(2, qv, use_dora=True), adapter(LLAMA, qv, 2), True),
        "llama_f64_tensor": seed(config(2, qv), adapter(LLAMA, qv, 2)[:3] + [(
            f"{PREFIX}model.layers.0.self_attn.v_proj.lora_B.weight", "F64", [8, 2], [0.0] * 16)],
                                 True),
        "gpt2_truncated_weights": seed(config(2, ["c_attn"]),
                                       safetensors(adapter(GPT2, ["c_attn"], 2))[:-7], False),
        "not_json": seed(b"{r: 2", adapter(LLAMA, qv, 2), True),
        "empty_weights": seed(config(2, qv), b"", True),
    }
    for name, data in seeds.items():
        (out / name).write_bytes(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/adapter_folder")
