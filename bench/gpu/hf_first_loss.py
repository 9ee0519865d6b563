#!/usr/bin/env python3
"""Checkpoints saved by transformers on this machine, and their first loss (issue 27, acceptance
2: "a checkpoint saved by transformers on the GPU machine gives the same first loss in snug";
bench/gpu/check.py's hf part trains snug on what this writes and compares).

For each decoder family snug reads (gpt2, llama, mistral, qwen2, gpt_neox): a small random model
made by transformers on --device, saved with save_pretrained (config.json, model.safetensors) to
OUT/<family>; B*T + 1 random token ids as a snug token file (docs/data.md: SNUGTOK1, uint32), so
that snug's loader cuts exactly B windows of T + 1 tokens, i.e. one batch whatever its shuffle;
and transformers' mean next-token cross-entropy over those B windows in fp32 (TF32 off), the
loss snug's first step must report. Prints one JSON object: {"B", "T", "torch", "transformers",
"families": {family: {"folder", "data", "loss"}}}.

Usage: python3 bench/gpu/hf_first_loss.py --out DIR [--device cuda] [--batch 4 --seq 32]
"""
import argparse
import json
import os
import struct

import torch
import torch.nn.functional as F
import transformers
from transformers import (GPT2Config, GPT2LMHeadModel, GPTNeoXConfig, GPTNeoXForCausalLM,
                          LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

VOCAB = 512


def families(T):
    """family -> (model class, config): odd sizes, GQA where the family has it, a sliding window
    shorter than T (mistral), dropout off (snug trains these families without dropout and refuses
    configs that ask for it), weights drawn 10x wider than transformers' default so that the
    logits are far from uniform and a misread weight moves the loss."""
    rope = {"rope_type": "default", "rope_theta": 10000.0}
    return {
        "gpt2": (GPT2LMHeadModel, GPT2Config(
            vocab_size=VOCAB, n_positions=2 * T, n_embd=48, n_layer=2, n_head=4,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
            initializer_range=0.2)),
        "llama": (LlamaForCausalLM, LlamaConfig(
            vocab_size=VOCAB, hidden_size=48, intermediate_size=40, num_hidden_layers=2,
            num_attention_heads=6, num_key_value_heads=2, head_dim=8,
            max_position_embeddings=2 * T, rope_parameters={**rope, "rope_theta": 500000.0},
            tie_word_embeddings=False, initializer_range=0.2)),
        "mistral": (MistralForCausalLM, MistralConfig(
            vocab_size=VOCAB, hidden_size=36, intermediate_size=41, num_hidden_layers=2,
            num_attention_heads=6, num_key_value_heads=3, head_dim=6,
            max_position_embeddings=2 * T, sliding_window=T // 2,
            rope_parameters={**rope, "rope_theta": 1e6}, tie_word_embeddings=False,
            initializer_range=0.2)),
        "qwen2": (Qwen2ForCausalLM, Qwen2Config(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=45, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2 * T,
            rope_parameters={**rope, "rope_theta": 1e6}, tie_word_embeddings=True,
            initializer_range=0.2)),
        "gpt_neox": (GPTNeoXForCausalLM, GPTNeoXConfig(
            vocab_size=VOCAB, hidden_size=40, intermediate_size=75, num_hidden_layers=2,
            num_attention_heads=5, max_position_embeddings=2 * T,
            rope_parameters={**rope, "partial_rotary_factor": 0.5},
            use_parallel_residual=True, hidden_dropout=0.0, attention_dropout=0.0,
            tie_word_embeddings=False, initializer_range=0.2)),
    }


def write_tokens(path, ids):
    with open(path, "wb") as f:
        f.write(struct.pack("<8sIIQ", b"SNUGTOK1", 1, 4, len(ids)))
        f.write(struct.pack(f"<{len(ids)}I", *ids))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as snug computes it
    torch.backends.cudnn.allow_tf32 = False
    B, T, dev = a.batch, a.seq, torch.device(a.device)
    os.makedirs(a.out, exist_ok=True)
    res = {"B": B, "T": T, "torch": torch.__version__, "transformers": transformers.__version__,
           "families": {}}
    for i, (name, (cls, cfg)) in enumerate(families(T).items()):
        torch.manual_seed(1000 + i)
        model = cls(cfg).to(dev).eval()
        folder = os.path.join(a.out, name)
        model.save_pretrained(folder)
        gen = torch.Generator().manual_seed(2000 + i)
        ids = torch.randint(0, VOCAB, (B * T + 1,), generator=gen)
        data = os.path.join(a.out, name + ".tok")
        write_tokens(data, ids.tolist())
        # Window w is tokens [wT, wT + T]: inputs its first T, targets its last T.
        win = torch.stack([ids[w * T:w * T + T + 1] for w in range(B)]).to(dev)
        with torch.no_grad():
            logits = model(input_ids=win[:, :T]).logits.float()
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), win[:, 1:].reshape(-1))
        res["families"][name] = {"folder": folder, "data": data, "loss": loss.item()}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
