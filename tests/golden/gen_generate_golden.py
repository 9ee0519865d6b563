"""Golden generations for snug's `generate` (generate/generate.h): transformers' generate() on a
small random GPT-2, greedy and beam search, token for token.

Re-run from the repository root (needs torch, transformers, safetensors; written with torch
2.15.0 and transformers 5.24.0):
    /work/venv-hf/bin/python tests/golden/gen_generate_golden.py
It (re)writes tests/fixtures/generate/gpt2/{config.json, model.safetensors, expected.json}, read by
tests/generate/generate_golden_test.cpp (suite GenerateGolden). Deterministic for the seed below.

The model is GPT2LMHeadModel with initializer_range 0.3, so that next-token logits are far from
ties (the test also records each greedy step's margin between the best and second-best logit,
and the script refuses a case whose smallest margin is below 1e-3). Cases (each a prompt and
GenerationConfig kwargs): greedy; greedy with repetition_penalty; beam search with 3 and 4 beams
with an eos token, with length_penalty and each early_stopping mode. Everything in fp32, eval
mode, use_cache=True.
"""
import json
import os

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

OUT = os.path.join("tests", "fixtures", "generate", "gpt2")
SEED = 1234


def main():
    torch.manual_seed(SEED)
    cfg = GPT2Config(vocab_size=97, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                     initializer_range=0.3, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).eval()
    os.makedirs(OUT, exist_ok=True)
    # snug's GPT-2 config.json keys (models/gpt2/gpt2_config.h) and the weights in HF names, tied head
    # left out as save_pretrained does.
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "vocab_size": 97, "n_positions": 64, "n_embd": 32,
                   "n_layer": 2, "n_head": 4, "layer_norm_epsilon": 1e-5}, f, indent=2)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()
          if k != "lm_head.weight" and not k.endswith(".attn.bias")
          and not k.endswith(".attn.masked_bias")}
    save_file(sd, os.path.join(OUT, "model.safetensors"), metadata={"format": "pt"})

    g = torch.Generator().manual_seed(SEED + 1)
    prompts = [torch.randint(1, 97, (n,), generator=g).tolist() for n in (5, 9, 3)]
    cases = [
        ("greedy", 0, dict(max_new_tokens=16)),
        ("greedy_eos", 1, dict(max_new_tokens=24, eos_token_id=31)),
        ("greedy_repetition", 2, dict(max_new_tokens=16, repetition_penalty=1.7)),
        ("beam3", 0, dict(max_new_tokens=12, num_beams=3, eos_token_id=64)),
        ("beam4_lp2", 1, dict(max_new_tokens=10, num_beams=4, eos_token_id=[35, 89],
                              length_penalty=2.0)),
        ("beam3_early", 2, dict(max_new_tokens=12, num_beams=3, eos_token_id=64,
                                early_stopping=True)),
        ("beam2_never", 0, dict(max_new_tokens=8, num_beams=2, eos_token_id=40,
                                early_stopping="never", length_penalty=0.5)),
    ]
    out = {"prompts": prompts, "cases": []}
    for name, pi, kw in cases:
        ids = torch.tensor([prompts[pi]])
        kw = dict(kw)
        if "eos_token_id" not in kw:
            kw["eos_token_id"] = None
        with torch.no_grad():
            res = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 pad_token_id=0, use_cache=True, **kw)
        new = res[0, ids.shape[1]:].tolist()
        eos = kw["eos_token_id"]
        eos = [] if eos is None else (eos if isinstance(eos, list) else [eos])
        case = {"name": name, "prompt": pi, "new_tokens": new,
                "max_new_tokens": kw["max_new_tokens"], "eos_token_ids": eos,
                "num_beams": kw.get("num_beams", 1),
                "repetition_penalty": kw.get("repetition_penalty", 1.0),
                "length_penalty": kw.get("length_penalty", 1.0),
                "early_stopping": {False: "heuristic", True: "always", "never": "never"}[
                    kw.get("early_stopping", False)]}
        if case["num_beams"] == 1:
            # The greedy margins: how far each step is from a tie.
            seq = ids
            margins = []
            for t in new:
                with torch.no_grad():
                    logits = model(seq).logits[0, -1]
                if case["repetition_penalty"] != 1.0:
                    score = logits.gather(0, seq[0])
                    score = torch.where(score < 0, score * case["repetition_penalty"],
                                        score / case["repetition_penalty"])
                    logits = logits.scatter(0, seq[0], score)
                top2 = torch.topk(logits, 2).values
                margins.append(float(top2[0] - top2[1]))
                seq = torch.cat([seq, torch.tensor([[t]])], dim=1)
            case["min_margin"] = min(margins)
            assert case["min_margin"] > 1e-3, (name, case["min_margin"])
        out["cases"].append(case)
        print(name, prompts[pi], "->", new)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
