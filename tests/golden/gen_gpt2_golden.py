"""Golden values for snug's GPT-2: loss and every parameter gradient of a tiny random model.

Re-run from the repository root (needs torch and safetensors; transformers optional):
    /tmp/tv/bin/python tests/golden/gen_gpt2_golden.py
It (re)writes tests/fixtures/gpt2_golden.safetensors, read by tests/models/gpt2_golden_test.cpp
(suite GoldenGpt2). The output is deterministic for the seed below.

The forward pass is written out in plain PyTorch (no `transformers`) and computed in float64,
so the golden values carry no float32 rounding; they are cast to float32 only when saved. It
follows Hugging Face GPT2LMHeadModel exactly:
  x = wte[ids] + wpe[0..T)
  per layer: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))
  logits = ln_f(x) @ wte^T                       (LM head tied to wte)
  LayerNorm: eps 1e-5, biased variance
  attn: qkv = x @ c_attn.weight (C,3C) + bias (Conv1D layout: in, out); split q,k,v;
        heads (B,NH,T,hs); causal softmax(q k^T / sqrt(hs)) v; concat; @ c_proj (C,C) + bias
  mlp:  gelu_new(x @ c_fc (C,4C) + b) @ c_proj (4C,C) + b,
        gelu_new(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  loss: cross_entropy(logits.view(-1,V), targets.view(-1), ignore_index=-100), mean over valid
The script checks the hand-written forward against the same model built from torch's own
primitives (F.layer_norm, F.gelu(approximate="tanh"), F.scaled_dot_product_attention), and, if
`transformers` is importable, against GPT2LMHeadModel itself.

File contents (all F32 unless noted):
  <param name>            every parameter, HF state_dict names, Conv1D layout
  grad/<param name>       d loss / d param (wte: embedding + tied LM head contributions)
  input_ids, targets      I32 (B,T); one target is -100 (ignored)
  loss                    (1,)
  __metadata__            vocab_size, n_positions, n_embd, n_layer, n_head, batch, seq
"""

import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from canonical_safetensors import canonicalize_header

V, P, C, L, NH = 67, 16, 24, 2, 3  # vocab, positions, embedding, layers, heads
B, T = 2, 9
SEED = 1234
EPS = 1e-5

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "fixtures", "gpt2_golden.safetensors"))


def param_shapes():
    """(name, shape, kind) in Hugging Face named_parameters() order."""
    out = [("transformer.wte.weight", (V, C), "w"), ("transformer.wpe.weight", (P, C), "w")]
    for i in range(L):
        h = f"transformer.h.{i}."
        out += [
            (h + "ln_1.weight", (C,), "ln"),
            (h + "ln_1.bias", (C,), "b"),
            (h + "attn.c_attn.weight", (C, 3 * C), "w"),
            (h + "attn.c_attn.bias", (3 * C,), "b"),
            (h + "attn.c_proj.weight", (C, C), "w"),
            (h + "attn.c_proj.bias", (C,), "b"),
            (h + "ln_2.weight", (C,), "ln"),
            (h + "ln_2.bias", (C,), "b"),
            (h + "mlp.c_fc.weight", (C, 4 * C), "w"),
            (h + "mlp.c_fc.bias", (4 * C,), "b"),
            (h + "mlp.c_proj.weight", (4 * C, C), "w"),
            (h + "mlp.c_proj.bias", (C,), "b"),
        ]
    out += [("transformer.ln_f.weight", (C,), "ln"), ("transformer.ln_f.bias", (C,), "b")]
    return out


def make_params(gen):
    """Weights N(0, 0.1); LayerNorm weights 1 + 0.1 N(0,1); biases 0.1 N(0,1). All float64."""
    params = {}
    for name, shape, kind in param_shapes():
        z = torch.randn(shape, generator=gen, dtype=torch.float64)
        if kind == "ln":
            v = 1.0 + 0.1 * z
        else:  # "w" and "b" share the scale
            v = 0.1 * z
        params[name] = v.requires_grad_(True)
    return params


def layer_norm(x, w, b):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased
    return (x - mean) / torch.sqrt(var + EPS) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def attention(x, p, h):
    Bx, Tx, Cx = x.shape
    hs = Cx // NH
    qkv = x @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
    q, k, v = qkv.split(Cx, dim=2)
    q = q.view(Bx, Tx, NH, hs).transpose(1, 2)
    k = k.view(Bx, Tx, NH, hs).transpose(1, 2)
    v = v.view(Bx, Tx, NH, hs).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    mask = torch.tril(torch.ones(Tx, Tx, dtype=torch.bool))
    att = att.masked_fill(~mask, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(Bx, Tx, Cx)
    return y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]


def mlp(x, p, h):
    u = gelu_new(x @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
    return u @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]


def forward(p, ids):
    Tx = ids.shape[1]
    x = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][torch.arange(Tx)]
    for i in range(L):
        h = f"transformer.h.{i}."
        x = x + attention(layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"]), p, h)
        x = x + mlp(layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"]), p, h)
    x = layer_norm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"])
    return x @ p["transformer.wte.weight"].t()  # tied LM head


def loss_fn(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-100)


def forward_builtin(p, ids):
    """The same model from torch's own primitives (F.layer_norm, F.gelu tanh,
    F.scaled_dot_product_attention): an independent check of the hand-written forward."""
    Tx = ids.shape[1]
    x = F.embedding(ids, p["transformer.wte.weight"]) + p["transformer.wpe.weight"][:Tx]
    for i in range(L):
        h = f"transformer.h.{i}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], EPS)
        q, k, v = F.linear(a, p[h + "attn.c_attn.weight"].t(), p[h + "attn.c_attn.bias"]).split(C, 2)
        heads = [t.unflatten(2, (NH, C // NH)).transpose(1, 2) for t in (q, k, v)]
        y = F.scaled_dot_product_attention(*heads, is_causal=True).transpose(1, 2).flatten(2)
        x = x + F.linear(y, p[h + "attn.c_proj.weight"].t(), p[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], EPS)
        m = F.gelu(F.linear(m, p[h + "mlp.c_fc.weight"].t(), p[h + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(m, p[h + "mlp.c_proj.weight"].t(), p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], EPS)
    return F.linear(x, p["transformer.wte.weight"])


def check_against_transformers(params, ids, targets, loss):
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        print("transformers not importable: skipping the cross-check against GPT2LMHeadModel")
        return
    cfg = GPT2Config(vocab_size=V, n_positions=P, n_embd=C, n_layer=L, n_head=NH,
                     layer_norm_epsilon=EPS, activation_function="gelu_new",
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).double().eval()
    sd = {k: v.detach() for k, v in params.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    # Only non-parameter buffers (attn.bias / masked_bias) and the tied lm_head may be missing.
    assert not unexpected, unexpected
    assert all(("attn.bias" in k or "masked_bias" in k or k == "lm_head.weight") for k in missing), missing
    model.tie_weights()
    with torch.no_grad():
        out = model(input_ids=ids, labels=None)
        ref_logits = out.logits
        my_logits = forward(sd, ids)
    err = (ref_logits - my_logits).abs().max().item()
    # HF's labels shift by one; compare the unshifted loss we define here directly.
    ref_loss = loss_fn(ref_logits, targets).item()
    print(f"transformers cross-check: max |logits diff| = {err:.3e}, loss {ref_loss:.12f} vs {loss:.12f}")
    assert err < 1e-10, err
    assert abs(ref_loss - loss) < 1e-10


def main():
    gen = torch.Generator().manual_seed(SEED)
    params = make_params(gen)
    ids = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    targets = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    targets[1, 4] = -100  # one ignored position

    logits = forward(params, ids)
    loss = loss_fn(logits, targets)
    loss.backward()
    loss_value = loss.item()
    print(f"golden loss (float64) = {loss_value:.12f}")

    with torch.no_grad():
        diff = (forward_builtin(params, ids) - logits).abs().max().item()
    print(f"torch-primitives cross-check: max |logits diff| = {diff:.3e}")
    assert diff < 1e-12, diff
    check_against_transformers(params, ids, targets, loss_value)

    tensors = {}
    for name, _, _ in param_shapes():
        tensors[name] = params[name].detach().to(torch.float32).contiguous()
        tensors["grad/" + name] = params[name].grad.detach().to(torch.float32).contiguous()
    tensors["input_ids"] = ids.to(torch.int32)
    tensors["targets"] = targets.to(torch.int32)
    tensors["loss"] = torch.tensor([loss_value], dtype=torch.float32)
    metadata = {
        "vocab_size": str(V), "n_positions": str(P), "n_embd": str(C), "n_layer": str(L),
        "n_head": str(NH), "batch": str(B), "seq": str(T),
        "generator": "tests/golden/gen_gpt2_golden.py", "loss_f64": repr(loss_value),
    }
    save_file(tensors, OUT, metadata=metadata)
    canonicalize_header(OUT)
    size = os.path.getsize(OUT)
    assert size < 200_000, size
    gmax = max(params[n].grad.abs().max().item() for n, _, _ in param_shapes())
    gmin = min(params[n].grad.abs().max().item() for n, _, _ in param_shapes())
    print(f"per-parameter max |grad| ranges over [{gmin:.3e}, {gmax:.3e}]")
    print(f"wrote {OUT} ({size} bytes, {len(tensors)} tensors)")


if __name__ == "__main__":
    main()
