"""Golden facts about the llama, mistral, qwen2 and gpt_neox families from transformers, for
tests/models/decoder_families_test.cpp: exact parameter counts and named_parameters() order of
models built on the meta device from the configs below (snug's presets and odd shapes), and the
rotary inverse frequencies of the rope scalings snug implements (linear, llama3).

Run: /work/venv-hf/bin/python tests/golden/gen_decoder_families_golden.py
Writes tests/fixtures/decoder_families_golden.json (no weights: counts, names, a few floats).
"""
import json
import os
import warnings

import torch
import transformers
from transformers import AutoModelForCausalLM, GPTNeoXConfig, LlamaConfig, MistralConfig, Qwen2Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()

CLASSES = {"llama": LlamaConfig, "mistral": MistralConfig, "qwen2": Qwen2Config, "gpt_neox": GPTNeoXConfig}

# name -> (model_type, config.json keys): snug's presets (the same keys) and odd shapes.
MODELS = {
    "llama-7b": ("llama", dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                               num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                               rms_norm_eps=1e-5)),
    "llama-13b": ("llama", dict(vocab_size=32000, hidden_size=5120, intermediate_size=13824, num_hidden_layers=40,
                                num_attention_heads=40, num_key_value_heads=40, max_position_embeddings=4096,
                                rms_norm_eps=1e-5)),
    "llama-70b": ("llama", dict(vocab_size=32000, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                                num_attention_heads=64, num_key_value_heads=8, max_position_embeddings=4096,
                                rms_norm_eps=1e-5)),
    "mistral-7b": ("mistral", dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                   num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=32768,
                                   sliding_window=4096, rms_norm_eps=1e-5)),
    "qwen2-0.5b": ("qwen2", dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                 num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=131072,
                                 rope_theta=1e6, tie_word_embeddings=True)),
    "qwen2-7b": ("qwen2", dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                               num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=131072,
                               rope_theta=1e6)),
    "polyglot-ko-1.3b": ("gpt_neox", dict(vocab_size=30080, hidden_size=2048, intermediate_size=8192,
                                          num_hidden_layers=24, num_attention_heads=16, max_position_embeddings=2048,
                                          rotary_pct=0.5, use_parallel_residual=True)),
    "llama-tiny": ("llama", dict(vocab_size=256, hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)),
    "mistral-tiny": ("mistral", dict(vocab_size=256, hidden_size=128, intermediate_size=448, num_hidden_layers=4,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                     sliding_window=256)),
    "qwen2-tiny": ("qwen2", dict(vocab_size=256, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                 tie_word_embeddings=True)),
    "gpt-neox-tiny": ("gpt_neox", dict(vocab_size=256, hidden_size=128, intermediate_size=512, num_hidden_layers=4,
                                       num_attention_heads=4, max_position_embeddings=256, rotary_pct=0.25)),
    # Odd shapes: head_dim not hidden/heads, every bias, tied head; a sequential, unbiased NeoX.
    "llama-odd": ("llama", dict(vocab_size=301, hidden_size=96, intermediate_size=200, num_hidden_layers=2,
                                num_attention_heads=6, num_key_value_heads=2, head_dim=20, attention_bias=True,
                                mlp_bias=True, tie_word_embeddings=True)),
    "qwen2-odd": ("qwen2", dict(vocab_size=301, hidden_size=84, intermediate_size=130, num_hidden_layers=2,
                                num_attention_heads=6, num_key_value_heads=3)),
    "gpt-neox-odd": ("gpt_neox", dict(vocab_size=301, hidden_size=96, intermediate_size=200, num_hidden_layers=2,
                                      num_attention_heads=4, rotary_pct=0.5, use_parallel_residual=False,
                                      attention_bias=False)),
}

ROPES = {
    # name -> (config keys, head dim)
    "llama3": (dict(hidden_size=256, num_attention_heads=2, max_position_embeddings=131072,
                    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 8192})),
    "linear": (dict(hidden_size=96, num_attention_heads=3, max_position_embeddings=4096,
                    rope_parameters={"rope_type": "linear", "rope_theta": 1000.0, "factor": 4.0})),
}


def main():
    out = {"models": {}, "rope": {}}
    for name, (mt, keys) in MODELS.items():
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(CLASSES[mt](**keys))
        entry = {"model_type": mt, "config": keys, "num_params": sum(p.numel() for p in m.parameters())}
        if m.num_parameters() < 5_000_000:
            # transformers 5 calls GPT-NeoX's head lm_head in memory but reads and writes it as
            # embed_out.weight (conversion_mapping's WeightRenaming; save_pretrained's files,
            # the Hub's polyglot-ko): snug's name is the file's.
            rename = {"lm_head.weight": "embed_out.weight"} if mt == "gpt_neox" else {}
            entry["names"] = [[rename.get(n, n), list(p.shape)] for n, p in m.named_parameters()]
        out["models"][name] = entry
    for name, keys in ROPES.items():
        cfg = LlamaConfig(**keys)
        inv, _ = ROPE_INIT_FUNCTIONS[keys["rope_parameters"]["rope_type"]](cfg, "cpu")
        out["rope"][name] = {"config": {"model_type": "llama", **keys}, "inv_freq": [float(v) for v in inv.tolist()]}
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "decoder_families_golden.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", os.path.normpath(path), {k: v["num_params"] for k, v in out["models"].items()})


if __name__ == "__main__":
    main()
