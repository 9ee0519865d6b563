"""PEFT round trip of snug's LoRA export (issue 6, acceptance 6).

Builds Hugging Face's GPT2LMHeadModel from the base weights snug wrote (`snug export-init -o
BASE`; the file's metadata carries the config.json keys), loads snug's adapter folder (`snug
export --adapter -o DIR`) with peft.PeftModel.from_pretrained, runs the token ids snug ran and
compares the logits with snug's. With --merged it also loads snug's merged weights (`snug export
--merge -o FILE`) into a plain GPT2LMHeadModel and compares its logits, and compares those
weights with PEFT's own merge_and_unload() of the adapter.

--expected is a safetensors file with "tokens" (B,T) I32/I64 and "logits" (B,T,V) F32: what
snug's LoRA model computes for those tokens (tests/torch/peft_roundtrip_torchtest.cpp writes it).

Exit status: 0 when every logits difference is below --tol (default 1e-4) and the merged weights
agree with PEFT's to --weight-tol; 1 when a check fails; 2 for bad input; 3 when numpy, torch,
transformers, peft or safetensors is missing (pip install numpy torch transformers peft).
Prints each measured maximum absolute difference.

    python tests/peft/check_peft_adapter.py --base base.safetensors --adapter adapter/ \\
        --expected snug_logits.safetensors --merged merged.safetensors
"""

import argparse
import sys


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="base weights from `snug export-init -o`")
    ap.add_argument("--adapter", required=True, help="folder from `snug export --adapter -o`")
    ap.add_argument("--expected", required=True, help="safetensors with snug's tokens and logits")
    ap.add_argument("--merged", help="merged weights from `snug export --merge -o`")
    ap.add_argument("--tol", type=float, default=1e-4, help="max abs logits difference")
    ap.add_argument("--weight-tol", type=float, default=1e-5, help="max abs merged-weight diff")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        import numpy as np
        import peft
        import torch
        import transformers
        from safetensors import safe_open
        from safetensors.numpy import load_file
    except ImportError as e:
        print(f"check_peft_adapter: {e}; pip install numpy torch transformers peft",
              file=sys.stderr)
        return 3

    def gpt2_from_snug(path):
        """GPT2LMHeadModel (eval, fp32, eager attention) holding the weights of `path`."""
        with safe_open(path, framework="np") as f:
            meta = f.metadata() or {}
        need = ["vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "layer_norm_epsilon"]
        missing = [k for k in need if k not in meta]
        if missing:
            raise ValueError(f"{path}: metadata lacks {missing} (write it with snug)")
        cfg = transformers.GPT2Config(
            vocab_size=int(meta["vocab_size"]), n_positions=int(meta["n_positions"]),
            n_embd=int(meta["n_embd"]), n_layer=int(meta["n_layer"]), n_head=int(meta["n_head"]),
            layer_norm_epsilon=float(meta["layer_norm_epsilon"]),
            activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=None, eos_token_id=None, tie_word_embeddings=True)
        cfg._attn_implementation = "eager"
        model = transformers.GPT2LMHeadModel(cfg)
        state = {k: torch.from_numpy(v) for k, v in load_file(path).items()}
        res = model.load_state_dict(state, strict=False)
        if res.unexpected_keys or set(res.missing_keys) - {"lm_head.weight"}:
            raise ValueError(f"{path}: unexpected {res.unexpected_keys}, "
                             f"missing {res.missing_keys}")
        if not torch.equal(model.lm_head.weight, model.transformer.wte.weight):
            raise ValueError(f"{path}: the LM head is not tied to transformer.wte.weight")
        return model.eval()

    def logits_of(model, tokens):
        with torch.no_grad():
            return model(input_ids=tokens).logits.float().numpy()

    try:
        expected = load_file(args.expected)
        tokens = torch.from_numpy(expected["tokens"].astype(np.int64))
        want = expected["logits"].astype(np.float32)
        base = gpt2_from_snug(args.base)
    except (KeyError, ValueError, OSError) as e:
        print(f"check_peft_adapter: {e}", file=sys.stderr)
        return 2
    if want.shape != (*tokens.shape, base.config.vocab_size):
        print(f"check_peft_adapter: logits {want.shape} do not fit tokens {tuple(tokens.shape)} "
              f"and vocab {base.config.vocab_size}", file=sys.stderr)
        return 2

    ok = True
    base_logits = logits_of(base, tokens)
    model = peft.PeftModel.from_pretrained(base, args.adapter).eval()

    # PEFT only warns about adapter keys it did not use; insist that every one arrived.
    loaded = model.state_dict()
    adapter = load_file(f"{args.adapter}/adapter_model.safetensors")
    for key, value in adapter.items():
        peft_key = key.replace(".lora_A.weight", ".lora_A.default.weight").replace(
            ".lora_B.weight", ".lora_B.default.weight")
        if peft_key not in loaded or not np.array_equal(loaded[peft_key].numpy(), value):
            print(f"FAIL: adapter tensor {key} did not load into the PEFT model as {peft_key}")
            ok = False
    print(f"PEFT loaded {len(adapter)} adapter tensors, peft {peft.__version__}, "
          f"transformers {transformers.__version__}, torch {torch.__version__}")

    got = logits_of(model, tokens)
    diff = float(np.abs(got - want).max())
    effect = float(np.abs(base_logits - want).max())
    print(f"PEFT adapter logits vs snug: max abs diff {diff:.3e} (tolerance {args.tol:g}); "
          f"the adapter moves the logits by up to {effect:.3e}")
    ok = ok and diff < args.tol

    if args.merged:
        merged = gpt2_from_snug(args.merged)
        mdiff = float(np.abs(logits_of(merged, tokens) - want).max())
        print(f"merged GPT2LMHeadModel logits vs snug: max abs diff {mdiff:.3e} "
              f"(tolerance {args.tol:g})")
        ok = ok and mdiff < args.tol
        # PEFT's own merge of the same adapter against snug's merged file, weight by weight.
        peft_merged = model.merge_and_unload().state_dict()
        ours = load_file(args.merged)
        wdiff = 0.0
        for key, value in ours.items():
            wdiff = max(wdiff, float(np.abs(peft_merged[key].numpy() - value).max()))
        print(f"merged weights vs PEFT merge_and_unload: max abs diff {wdiff:.3e} "
              f"(tolerance {args.weight_tol:g}, {len(ours)} tensors)")
        ok = ok and wdiff < args.weight_tol

    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
