"""Golden values for the model composed from snug's src/nn blocks (tests/support/block_lm.h):
loss and every parameter gradient of a tiny random Llama, from Hugging Face's LlamaForCausalLM.

Re-run from the repository root (needs torch, transformers and safetensors):
    /work/venv/bin/python tests/golden/gen_block_lm_golden.py
It (re)writes tests/fixtures/block_lm_golden.safetensors, read by tests/nn/block_lm_golden_test.cpp
(suite GoldenBlockLM). The output is deterministic for the seed below.

The model is LlamaForCausalLM in float64 with eager attention: RMSNorm (eps 1e-6), grouped-query
attention (4 query heads over 2 key/value heads) with rotary embeddings (rotate_half pairing,
rope_theta 100 so that the angles matter at these lengths), SwiGLU MLP, no biases, untied
lm_head. The loss is snug's convention: the targets are given (no shift inside the model),
cross_entropy(logits, targets, ignore_index=-100), mean over the valid targets.

Rotary angles: transformers computes the inverse frequencies, the angles and their cos/sin in
float32 even in a float64 model (then casts), so the golden values carry that float32 rounding of
cos/sin (about 6e-8 relative); snug's kernels form the same float32 angles.

The golden values come from the model written out here in plain float64 PyTorch (hand-written
RMSNorm, rotary, GQA attention with repeat_interleave, SwiGLU) and autograd. The script checks it
against transformers' LlamaForCausalLM on the same weights: identical (< 1e-12) once the
hand-written RMSNorm and softmax take the float32 steps transformers takes in any dtype, and
within 1e-5 of the float64 golden.

File contents (all F32 unless noted):
  <param name>            every parameter, HF state_dict names, nn.Linear (out, in) layout
  grad/<param name>       d loss / d param
  input_ids, targets      I32 (B,T); one target is -100 (ignored)
  loss                    (1,)
  __metadata__            sizes, rope_theta, rms_norm_eps, batch, seq
"""

import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

from canonical_safetensors import canonicalize_header

V, C, L, NH, NKV, I = 19, 16, 2, 4, 2, 24  # vocab, hidden, layers, heads, kv heads, intermediate
HS = C // NH
B, T = 2, 7
THETA = 100.0
EPS = 1e-6
SEED = 4321

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "fixtures", "block_lm_golden.safetensors"))


def make_model():
    cfg = LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=I, num_hidden_layers=L,
                      num_attention_heads=NH, num_key_value_heads=NKV, hidden_act="silu",
                      max_position_embeddings=32, rms_norm_eps=EPS, tie_word_embeddings=False,
                      attention_bias=False, mlp_bias=False, attention_dropout=0.0,
                      rope_theta=THETA, rope_parameters={"rope_type": "default", "rope_theta": THETA},
                      attn_implementation="eager")
    model = LlamaForCausalLM(cfg).to(torch.float64).eval()
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            z = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            p.copy_(1.0 + 0.1 * z if p.dim() == 1 else 0.4 * z)  # norms 1 + noise, matrices 0.4
    return model, gen


def rms_norm(x, w, hf_float32=False):
    if hf_float32:  # LlamaRMSNorm normalizes in float32 whatever the model dtype, then casts back
        x32 = x.float()
        return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)
    return w * (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS))


def rotate(x):  # x (B, heads, T, HS): rotate_half pairing (j, j + HS/2), positions 0..T-1
    # As transformers (and snug's kernels): inverse frequencies and angles in float32; the
    # cos/sin of the float32 angle, here in float32 as transformers computes them.
    inv = 1.0 / (THETA ** (torch.arange(0, HS, 2, dtype=torch.int64).float() / HS))
    ang = torch.arange(x.shape[2], dtype=torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).double()
    sin = torch.cat([ang.sin(), ang.sin()], -1).double()
    x1, x2 = x[..., : HS // 2], x[..., HS // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def forward_by_hand(p, ids, hf_float32=False):
    x = p["model.embed_tokens.weight"][ids]
    Tx = ids.shape[1]
    for i in range(L):
        h = f"model.layers.{i}."
        a = rms_norm(x, p[h + "input_layernorm.weight"], hf_float32)
        q = (a @ p[h + "self_attn.q_proj.weight"].t()).view(B, Tx, NH, HS).transpose(1, 2)
        k = (a @ p[h + "self_attn.k_proj.weight"].t()).view(B, Tx, NKV, HS).transpose(1, 2)
        v = (a @ p[h + "self_attn.v_proj.weight"].t()).view(B, Tx, NKV, HS).transpose(1, 2)
        q, k = rotate(q), rotate(k)
        k = k.repeat_interleave(NH // NKV, dim=1)  # query head h reads kv head h // (NH/NKV)
        v = v.repeat_interleave(NH // NKV, dim=1)
        s = (q @ k.transpose(-1, -2)) / HS**0.5
        s = s.masked_fill(~torch.tril(torch.ones(Tx, Tx, dtype=torch.bool)), float("-inf"))
        # transformers' eager attention takes the softmax in float32 whatever the model dtype.
        probs = s.softmax(-1, dtype=torch.float32).to(s.dtype) if hf_float32 else s.softmax(-1)
        y = (probs @ v).transpose(1, 2).reshape(B, Tx, C)
        x = x + y @ p[h + "self_attn.o_proj.weight"].t()
        m = rms_norm(x, p[h + "post_attention_layernorm.weight"], hf_float32)
        g = F.silu(m @ p[h + "mlp.gate_proj.weight"].t()) * (m @ p[h + "mlp.up_proj.weight"].t())
        x = x + g @ p[h + "mlp.down_proj.weight"].t()
    return rms_norm(x, p["model.norm.weight"], hf_float32) @ p["lm_head.weight"].t()


def main():
    model, gen = make_model()
    ids = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    targets = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    targets[0, 3] = -100  # one ignored position

    # The golden values: the hand-written model in float64, differentiated by autograd.
    params = {n: p.detach().clone().requires_grad_(True) for n, p in model.named_parameters()}
    logits = forward_by_hand(params, ids)
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-100)
    loss.backward()
    loss_value = loss.item()
    print(f"golden loss (float64) = {loss_value:.12f}")

    # transformers' LlamaForCausalLM on the same weights. Its RMSNorm and its eager softmax work
    # in float32 even in a float64 model, so it differs from the float64 golden by that rounding
    # (about 1e-6), and the hand-written model with the same float32 steps reproduces it.
    with torch.no_grad():
        hf_logits = model(input_ids=ids).logits
        exact = (forward_by_hand(params, ids, hf_float32=True) - hf_logits).abs().max().item()
        gap = (logits - hf_logits).abs().max().item()
        hf_loss = F.cross_entropy(hf_logits.view(-1, V), targets.view(-1), ignore_index=-100)
    print(f"transformers cross-check: |logits - LlamaForCausalLM| = {exact:.3e} with its float32 "
          f"steps, {gap:.3e} against the float64 golden; loss {hf_loss.item():.12f}")
    assert exact < 1e-12, exact
    assert gap < 1e-5, gap
    assert abs(hf_loss.item() - loss_value) < 1e-5

    tensors = {}
    for name, p in params.items():
        tensors[name] = p.detach().to(torch.float32).contiguous()
        tensors["grad/" + name] = p.grad.detach().to(torch.float32).contiguous()
    tensors["input_ids"] = ids.to(torch.int32)
    tensors["targets"] = targets.to(torch.int32)
    tensors["loss"] = torch.tensor([loss_value], dtype=torch.float32)
    metadata = {
        "vocab_size": str(V), "hidden_size": str(C), "num_hidden_layers": str(L),
        "num_attention_heads": str(NH), "num_key_value_heads": str(NKV),
        "intermediate_size": str(I), "rope_theta": repr(THETA), "rms_norm_eps": repr(EPS),
        "batch": str(B), "seq": str(T), "generator": "tests/golden/gen_block_lm_golden.py",
        "loss_f64": repr(loss_value),
    }
    save_file(tensors, OUT, metadata=metadata)
    canonicalize_header(OUT)
    gmax = max(p.grad.abs().max().item() for p in params.values())
    gmin = min(p.grad.abs().max().item() for p in params.values())
    print(f"per-parameter max |grad| ranges over [{gmin:.3e}, {gmax:.3e}]")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes, {len(tensors)} tensors)")


if __name__ == "__main__":
    main()
