"""Logits of a Hugging Face model folder, as transformers computes them (issue 17, acceptance 2).

Loads DIR with AutoModelForCausalLM.from_pretrained(DIR, dtype=torch.float32) -- a folder snug
wrote (`snug export --merge -o DIR`, `snug export-init -o DIR`, a checkpoint-N) -- runs the
token ids of --tokens (a safetensors file with "tokens" (B,T) I32) in eval mode and writes its
(B,T,V) F32 logits as "logits" to --out. tests/torch/hf_folder_torchtest.cpp compares them with
snug's; this script only measures, so the comparison and its tolerance live in one place.

With --architectures (no adapter) the model is the class config.json's "architectures" names,
e.g. BertForSequenceClassification, whose logits are (B,num_labels).

With --adapter ADIR the model is the class its config.json's "architectures" names (a BERT
masked-LM or classifier too, whose logits are (B,T,V) or (B,num_labels)) with the PEFT adapter
folder ADIR on top (peft.PeftModel.from_pretrained: the adapter's task_type picks PEFT's wrapper,
modules_to_save come from the adapter file).

With --dtype bfloat16 (or float16) the model is loaded in that dtype, as from_pretrained's
torch_dtype does (the default float32 upcasts a 16-bit folder exactly); a PEFT adapter on it keeps
its fp32 weights (PeftModel.from_pretrained's autocast_adapter_dtype), PEFT's LoRA on a 16-bit base.

Exit status: 0 written; 2 bad input; 3 torch, transformers, safetensors (or peft) missing (pip
install torch transformers safetensors peft); 4 the folder's model_type is not a causal LM in
transformers (without --adapter).

    python tests/torch/hf_folder_logits.py --model DIR --tokens tokens.safetensors --out hf.safetensors
    python tests/torch/hf_folder_logits.py --model DIR --adapter ADIR --tokens t.safetensors --out o
"""

import argparse
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a Hugging Face model folder")
    ap.add_argument("--tokens", required=True, help="safetensors with 'tokens' (B,T)")
    ap.add_argument("--out", required=True, help="where to write 'logits' (B,T,V) F32")
    ap.add_argument("--adapter", help="a PEFT adapter folder to load on top")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                    help="the dtype the model is loaded in (from_pretrained's dtype)")
    ap.add_argument("--architectures", action="store_true",
                    help="the class config.json's architectures names (a BERT classifier), "
                         "not AutoModelForCausalLM")
    args = ap.parse_args(argv)
    try:
        import torch
        import transformers
        from safetensors.torch import load_file, save_file
    except ImportError as e:
        print(f"hf_folder_logits: {e}; pip install torch transformers safetensors",
              file=sys.stderr)
        return 3
    import json
    import os

    with open(os.path.join(args.model, "config.json")) as f:
        model_type = json.load(f).get("model_type")
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    tokens = load_file(args.tokens)["tokens"].long()
    dtype = getattr(torch, args.dtype)
    if args.adapter:
        try:
            import peft
        except ImportError as e:
            print(f"hf_folder_logits: {e}; pip install peft", file=sys.stderr)
            return 3
        with open(os.path.join(args.model, "config.json")) as f:
            archs = json.load(f).get("architectures") or []
        cls = getattr(transformers, archs[0], None) if archs else None
        if cls is None:
            cls = transformers.AutoModelForCausalLM
        base = cls.from_pretrained(args.model, dtype=dtype)
        model = peft.PeftModel.from_pretrained(base, args.adapter)
        adapter_dtypes = sorted({str(p.dtype) for n, p in model.named_parameters()
                                 if "lora_" in n})
        base_dtypes = sorted({str(p.dtype) for n, p in model.named_parameters()
                              if "lora_" not in n})
        print(f"hf_folder_logits: PEFT {peft.__version__} {type(model).__name__} "
              f"(task_type {model.peft_config['default'].task_type}), base {base_dtypes}, "
              f"adapters {adapter_dtypes}")
    elif args.architectures:
        with open(os.path.join(args.model, "config.json")) as f:
            archs = json.load(f).get("architectures") or []
        cls = getattr(transformers, archs[0], None) if archs else None
        if cls is None:
            print(f"hf_folder_logits: config.json's architectures {archs!r} names no "
                  f"transformers class", file=sys.stderr)
            return 2
        model = cls.from_pretrained(args.model, dtype=dtype)
    else:
        if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
            print(f"hf_folder_logits: model_type {model_type!r} is not a causal LM",
                  file=sys.stderr)
            return 4
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=tokens).logits.float().contiguous()
    save_file({"logits": logits}, args.out)
    print(f"hf_folder_logits: {type(model).__name__} from {args.model}: logits "
          f"{tuple(logits.shape)} (transformers {transformers.__version__}, torch "
          f"{torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
