"""`snug export --merge --model DIR -o OUT` of every causal fixture loads back in transformers as the
same model (issue 17, acceptance 2; ctest `hf_family_export_cli`, label torch, which CI excludes).

For each folder tests/fixtures/hf/<case>/ whose expected.safetensors has `targets` (the causal cases
of tests/golden/gen_hf_family_golden.py), this script
  1. runs `snug export --merge --model <case folder> -o OUT` (no adapters: the model's own
     weights, written as a Hugging Face folder with snug's config.json),
  2. loads OUT with AutoModelForCausalLM.from_pretrained(OUT, dtype=torch.float32), which must
     report no missing, unexpected or mismatched weights (transformers would initialize a missing
     one at random),
  3. compares its logits on the case's input_ids with the case's reference logits (transformers
     on the source folder, float64) by max|diff| / max|reference| <= 1e-5.
So the config.json snug writes (from either spelling of the source: rope_parameters or the older
rope_theta / rope_scaling / rotary_pct keys) means the same model to transformers, and bf16 and
sharded sources come out whole. snug's own logits against transformers are
tests/models/hf_family_parity_test.cpp (1e-4, no torch) and tests/torch/hf_folder_torchtest.cpp
(LoRA-merged folders, 1e-5).

    python tests/golden/check_hf_export.py --snug build/release/snug [--keep DIR]

Exit status: 0 every case matched; 1 a case failed; 3 torch/transformers/safetensors missing
(a failure for ctest: a skip must not read as a pass).
"""

import argparse
import os
import subprocess
import sys
import tempfile

TOLERANCE = 1e-5
HERE = os.path.dirname(os.path.abspath(__file__))
HF = os.path.normpath(os.path.join(HERE, "..", "fixtures", "hf"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--snug", required=True, help="the snug binary")
    ap.add_argument("--keep", help="write the exported folders here (default: a temp dir)")
    args = ap.parse_args(argv)
    try:
        import torch
        import transformers
        from safetensors import safe_open
    except ImportError as e:
        print(f"check_hf_export: {e}; pip install torch transformers safetensors", file=sys.stderr)
        return 3

    cases = []
    for name in sorted(os.listdir(HF)):
        path = os.path.join(HF, name, "expected.safetensors")
        if os.path.exists(path):
            with safe_open(path, "pt") as f:
                if "targets" in f.keys():
                    cases.append(name)
    if not cases:
        print(f"check_hf_export: no causal cases under {HF}", file=sys.stderr)
        return 1

    if args.keep:
        return check(args.snug, cases, args.keep, torch, transformers, safe_open)
    with tempfile.TemporaryDirectory(prefix="snug-hf-export-") as out_root:
        return check(args.snug, cases, out_root, torch, transformers, safe_open)


def check(snug, cases, out_root, torch, transformers, safe_open):
    failed = []
    for name in cases:
        src = os.path.join(HF, name)
        out = os.path.join(out_root, name)
        run = subprocess.run(
            [snug, "export", "--merge", "--model", src, "-o", out],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            print(f"{name}: snug export failed ({run.returncode}): {run.stderr.strip()}")
            failed.append(name)
            continue
        with safe_open(os.path.join(src, "expected.safetensors"), "pt") as f:
            ids = f.get_tensor("input_ids").long()
            ref = f.get_tensor("logits").double()
        try:
            model, info = transformers.AutoModelForCausalLM.from_pretrained(
                out, dtype=torch.float32, output_loading_info=True
            )
        except Exception as e:  # noqa: BLE001 -- any failure to load is this case's failure
            print(f"{name}: from_pretrained failed: {type(e).__name__}: {e} -> FAILED")
            failed.append(name)
            continue
        model.eval()
        bad = {k: v for k, v in info.items() if v}
        with torch.no_grad():
            got = model(input_ids=ids).logits.double()
        rel = ((got - ref).abs().max() / ref.abs().max()).item() if got.shape == ref.shape else 1e9
        ok = not bad and rel <= TOLERANCE
        print(
            f"{name}: {type(model).__name__}, logits max|diff|/max|ref| {rel:.3g} "
            f"(tolerance {TOLERANCE:g}){'' if not bad else f', loading problems {bad}'}"
            f" -> {'ok' if ok else 'FAILED'}"
        )
        if not ok:
            failed.append(name)
    print(
        f"check_hf_export: {len(cases) - len(failed)} of {len(cases)} cases match "
        f"(transformers {transformers.__version__}, torch {torch.__version__})"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
