"""Golden fixtures from Hugging Face transformers for the model families of issue 17.

Re-run from the repository root (needs torch, transformers and safetensors):
    /work/venv-hf/bin/python tests/golden/gen_hf_family_golden.py
Written with torch 2.15.0, transformers 5.24.0, safetensors 0.8.0 (peft 0.21.2, tokenizers
0.23.3 installed, not used). The output is deterministic for the seed below on a given version.

It (re)writes one folder per case under tests/fixtures/hf/<case>/, read by
tests/models/hf_family_parity_test.cpp (suite HfFamilyParity) and, for bert_*, by the BERT
parity test:
  config.json, generation_config.json   as save_pretrained writes them, except where a case
                                        is marked "legacy keys" below
  model.safetensors                     or model-0000k-of-0000n.safetensors + the index
  expected.safetensors                  the batch and transformers' results (below)

Cases (small random models, odd sizes, every bias and norm weight randomized away from its
zero/one init so that a load or layout bug shows in the logits):
  llama_gqa_sharded  llama: 6 query / 2 key-value heads, head_dim 8, untied lm_head,
                     rope_theta 500000 with llama3 rope scaling; saved in 2+ shards with
                     model.safetensors.index.json; config as transformers 5 writes it
                     (`rope_parameters`).
  llama_bias_tied    llama: attention_bias and mlp_bias, tied embeddings, 4/2 heads, rope_theta
                     25000 + llama3 scaling; legacy keys (`rope_theta`, `rope_scaling`, as the
                     Hub's Llama 3.1 folders have them).
  mistral_gqa        mistral: 6/3 heads, sliding_window == T (the window just covers the
                     sequence), rope_theta 1e6; legacy keys (`rope_theta`).
  qwen2_bf16_tied    qwen2: q/k/v biases, tied embeddings, 4/2 heads, rope_theta 1e6; weights
                     saved in bf16; expected values computed in fp32 from the bf16-rounded
                     weights; config as transformers 5 writes it.
  neox_parallel      gpt_neox: rotary_pct 0.5, use_parallel_residual true, untied embed_out,
                     gelu, rotary_emb_base 20000; legacy keys (`rotary_pct`,
                     `rotary_emb_base`, as EleutherAI/polyglot-ko's config.json has them).
  neox_sequential    gpt_neox: partial rotary 0.25 of head_dim 16, use_parallel_residual false;
                     config as transformers 5 writes it (`rope_parameters`).
  bert_mlm           BertForMaskedLM (gelu, post-LN, token types, attention_mask all ones).
  bert_cls           BertForSequenceClassification, num_labels 3.
"Legacy keys": the config.json is rewritten into the transformers 4 form the Hub's checkpoints
carry; the script checks that transformers 5 loads the rewritten folder to the same logits. So
snug's parser is tested on both spellings.

expected.safetensors (F32 unless noted; __metadata__: case, model_type, batch, seq, weights
dtype, and the relative sensitivities below):
  causal cases:
    input_ids     I32 (B,T)
    targets       I32 (B,T) what snug's Model::forward takes: targets[b,t] is the token
                  position t predicts (already shifted), -100 ignored; one is -100. In
                  transformers' terms labels[:, 1:] == targets[:, :-1] (checked here against
                  the model's own `labels` loss).
    logits        (B,T,V)
    loss          (1,) mean cross-entropy over the valid targets
    grad/<name>   d loss / d parameter for every named_parameters() entry, under the
                  parameter's name in the saved files (gpt_neox: embed_out.weight, which
                  transformers 5 calls lm_head in memory); tied: the combined embedding + head
                  gradient, under the embedding's name
  bert cases: input_ids, token_type_ids (both segments), attention_mask (all ones) I32 (B,T);
    labels I32: bert_mlm (B,T) -100 except the masked positions (which hold [MASK]=4 in
    input_ids); bert_cls (B,) in {0,1,2}; logits (B,T,V) or (B,3); loss; grad/<name>.

Numbers: forward and backward run in float64 (model.double(), eval mode, eager attention) from
the float32 (or bf16-rounded) weights and are cast to float32 when saved, so the references
carry no float32 rounding; the script also runs the model in float32 and prints how far that is
from the float64 result (about 1e-6 relative), and reloads every saved folder with
from_pretrained(dtype=float32) to check it reproduces the float32 logits. For each feature a
case tests (rope scaling, rope_theta, partial rotary, parallel residual, biases), it prints and
stores how much the logits change without it: every one is far above the 1e-4 parity tolerance,
so a model that ignored it would fail.
"""

import copy
import json
import os
import shutil
import struct

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import (
    AutoModelForCausalLM,
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

SEED = 1717
B = 2
T = 11
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "fixtures", "hf"))
IGNORE = -100
MASK_ID = 4  # bert_mlm's [MASK] (any id: the model does not know it)


def rel(a, b):
    """max|a - b| / max|b|, the parity measure of the C++ tests."""
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def randomize_small_params(model, gen):
    """transformers initializes biases to 0 and norm weights to 1; give them random values so
    that a bias or norm weight loaded into the wrong place changes the logits."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() != 1:
                continue
            z = torch.randn(p.shape, generator=gen)
            if name.endswith("bias"):
                p.copy_(0.1 * z)
            else:  # RMSNorm / LayerNorm weight
                p.copy_(1.0 + 0.1 * z)


def build(cls, config, seed):
    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    model = cls(config).eval()
    randomize_small_params(model, torch.Generator().manual_seed(seed + 1))
    return model


def causal_batch(vocab, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (B, T + 1), generator=g)
    input_ids, targets = ids[:, :T].clone(), ids[:, 1:].clone()
    targets[1, 3] = IGNORE  # one ignored target, inside the sequence
    return input_ids, targets


def causal_loss(logits, targets):
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=IGNORE
    )


def logits_of(model, **inputs):
    with torch.no_grad():
        return model(**inputs).logits


def check_hf_labels_convention(model, input_ids, targets):
    """transformers' own `labels` loss shifts inside the model: labels[:, t+1] is what position t
    predicts. With labels[:, 1:] = targets[:, :-1] it must equal our loss over positions < T-1."""
    labels = torch.full_like(input_ids, IGNORE)
    labels[:, 1:] = targets[:, :-1]
    with torch.no_grad():
        out = model(input_ids=input_ids, labels=labels)
    ours = causal_loss(out.logits[:, :-1], targets[:, :-1])
    assert abs(out.loss.item() - ours.item()) <= 1e-6 * abs(ours.item()), (out.loss, ours)


def write_legacy_config(folder, rewrite):
    """Rewrites config.json into the transformers 4 spelling (see the docstring)."""
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    rewrite(cfg)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def legacy_common(cfg):
    """transformers 4 wrote `torch_dtype`, where 5 writes `dtype`."""
    cfg["torch_dtype"] = cfg.pop("dtype")


def legacy_rope(cfg):
    """llama/mistral as the Hub's folders have them (Llama 3.1, Mistral 7B): rope_theta and
    rope_scaling at the top level, no head_dim (it is hidden_size / num_attention_heads)."""
    legacy_common(cfg)
    assert cfg.pop("head_dim") * cfg["num_attention_heads"] == cfg["hidden_size"]
    rp = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rp.pop("rope_theta")
    cfg["rope_scaling"] = rp if rp.get("rope_type", "default") != "default" else None


def legacy_neox(cfg):
    """gpt_neox with exactly the keys of EleutherAI/polyglot-ko-1.3b's config.json: rotary_pct and
    rotary_emb_base, and none of the keys later versions added (their defaults apply)."""
    legacy_common(cfg)
    rp = cfg.pop("rope_parameters")
    assert rp.get("rope_type", "default") == "default"
    cfg["rotary_emb_base"] = rp["rope_theta"]
    cfg["rotary_pct"] = rp["partial_rotary_factor"]
    for key in ["attention_bias", "attention_dropout", "hidden_dropout", "classifier_dropout",
                "is_decoder", "pad_token_id"]:
        cfg.pop(key)


def sensitivity(model, inputs, ref_logits, **config_changes):
    """Relative change of the logits when the same weights run with `config_changes`."""
    cfg = copy.deepcopy(model.config)
    for k, v in config_changes.items():
        setattr(cfg, k, v)
    torch.manual_seed(0)
    other = type(model)(cfg).eval().double()
    other.load_state_dict(model.state_dict())
    return rel(logits_of(other, **inputs), ref_logits)


def saved_tensors(folder):
    """Every tensor of a saved folder (one file or shards), by its name in the files."""
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors") and f != "expected.safetensors":
            out.update(load_file(os.path.join(folder, f)))
    return out


def param_grads(model, folder):
    """Every parameter's gradient under the name the saved folder gives the parameter. Those are
    the checkpoint names, which transformers 5 may rename in memory (gpt_neox's `embed_out` is
    its module `lm_head`, written back as `embed_out.weight`): a parameter whose name is not in
    the files is matched to the one unclaimed file tensor equal to it."""
    files = saved_tensors(folder)
    names = [n for n, _ in model.named_parameters()]
    unclaimed = {k for k in files if k not in names}
    out = {}
    for n, p in model.named_parameters():
        name = n
        if n not in files:
            same = [
                k
                for k in unclaimed
                if files[k].shape == p.shape and torch.equal(files[k].double(), p.detach())
            ]
            assert len(same) == 1, (n, same)
            name = same[0]
            unclaimed.discard(name)
        out[name] = p.grad.detach().float().contiguous()
    return out


def save_expected(folder, tensors, metadata):
    """save_file, then the header rewritten with sorted keys: safetensors writes __metadata__ in
    hash-map order, which would make every re-run a different file."""
    path = os.path.join(folder, "expected.safetensors")
    save_file({k: v.contiguous() for k, v in tensors.items()}, path, metadata=metadata)
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    text = json.dumps(json.loads(blob[8 : 8 + n]), sort_keys=True, separators=(",", ":"))
    text = text.encode() + b" " * (-len(text) % 8)  # data stays 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob[8 + n :])


def fresh_folder(case):
    folder = os.path.join(OUT, case)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder


def causal_case(case, cls, config, seed, save_kwargs=None, legacy=None, bf16=False, checks=()):
    """Builds, saves and computes the expected values of one causal case. `checks` are
    (label, config_changes) pairs for sensitivity(); each must move the logits by > 1e-3."""
    folder = fresh_folder(case)
    model = build(cls, config, seed)
    if bf16:  # round every parameter to bf16; the fp32 model then holds exactly those values
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).float())
        to_save = copy.deepcopy(model).to(torch.bfloat16)
    else:
        to_save = model
    to_save.save_pretrained(folder, **(save_kwargs or {}))
    if legacy:
        write_legacy_config(folder, legacy)

    input_ids, targets = causal_batch(config.vocab_size, seed + 2)
    logits32 = logits_of(model, input_ids=input_ids)
    check_hf_labels_convention(model, input_ids, targets)

    # The saved folder, as a user would load it, reproduces the fp32 model.
    reloaded = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    reload_rel = rel(logits_of(reloaded, input_ids=input_ids), logits32)
    assert reload_rel == 0.0, (case, "reloaded folder differs", reload_rel)

    m64 = model.double()
    logits = m64(input_ids=input_ids).logits
    loss = causal_loss(logits, targets)
    loss.backward()
    fp32_rel = rel(logits32, logits.detach())

    meta = {
        "case": case,
        "model_type": config.model_type,
        "batch": str(B),
        "seq": str(T),
        "weights_dtype": "bf16" if bf16 else "f32",
        "fp32_vs_fp64_logits_rel": f"{fp32_rel:.3g}",
    }
    line = [f"{case}: loss {loss.item():.6f}, fp32 vs fp64 logits {fp32_rel:.2g}"]
    for label, changes in checks:
        s = sensitivity(m64, {"input_ids": input_ids}, logits.detach(), **changes)
        assert s > 1e-3, (case, label, s)
        meta["sensitivity_" + label] = f"{s:.3g}"
        line.append(f"without {label} {s:.2g}")
    print(", ".join(line))

    tensors = {
        "input_ids": input_ids.to(torch.int32),
        "targets": targets.to(torch.int32),
        "logits": logits.detach().float(),
        "loss": loss.detach().float().reshape(1),
    }
    for n, g in param_grads(m64, folder).items():
        tensors["grad/" + n] = g
    save_expected(folder, tensors, meta)


def bert_config(**kw):
    return BertConfig(
        vocab_size=73,
        hidden_size=36,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=55,
        hidden_act="gelu",
        max_position_embeddings=17,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        initializer_range=0.2,
        pad_token_id=0,
        **kw,
    )


def bert_batch(vocab, seed):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab, (B, T), generator=g)
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    token_type_ids[0, 6:] = 1
    token_type_ids[1, 4:] = 1
    attention_mask = torch.ones(B, T, dtype=torch.long)
    return input_ids, token_type_ids, attention_mask


def bert_case(case, cls, config, seed):
    folder = fresh_folder(case)
    model = build(cls, config, seed)
    model.save_pretrained(folder)
    input_ids, token_type_ids, attention_mask = bert_batch(config.vocab_size, seed + 2)
    g = torch.Generator().manual_seed(seed + 3)
    if cls is BertForMaskedLM:
        labels = torch.full_like(input_ids, IGNORE)
        for b, t in [(0, 1), (0, 5), (0, 9), (1, 0), (1, 4), (1, 7)]:
            labels[b, t] = input_ids[b, t]
            input_ids[b, t] = MASK_ID
        labels[1, 7] = torch.randint(5, config.vocab_size, (1,), generator=g).item()
    else:
        labels = torch.tensor([2, 0])
    inputs = {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
    }
    logits32 = logits_of(model, **inputs)
    reloaded = type(model).from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    assert rel(logits_of(reloaded, **inputs), logits32) == 0.0, case

    m64 = model.double()
    out = m64(**inputs, labels=labels)
    out.loss.backward()
    fp32_rel = rel(logits32, out.logits.detach())
    # The loss is the plain mean cross-entropy over the labelled positions.
    ce = F.cross_entropy(
        out.logits.detach().reshape(-1, out.logits.size(-1)),
        labels.reshape(-1),
        ignore_index=IGNORE,
    )
    assert abs(ce.item() - out.loss.item()) <= 1e-12 * abs(ce.item()), (ce, out.loss)
    types = rel(logits_of(m64, input_ids=input_ids, attention_mask=attention_mask), out.logits)
    assert types > 1e-3, (case, "token types", types)
    print(
        f"{case}: loss {out.loss.item():.6f}, fp32 vs fp64 logits {fp32_rel:.2g}, "
        f"without token types {types:.2g}"
    )
    meta = {
        "case": case,
        "model_type": "bert",
        "architecture": type(model).__name__,
        "batch": str(B),
        "seq": str(T),
        "weights_dtype": "f32",
        "fp32_vs_fp64_logits_rel": f"{fp32_rel:.3g}",
        "sensitivity_token_types": f"{types:.3g}",
    }
    tensors = {
        "input_ids": input_ids.to(torch.int32),
        "token_type_ids": token_type_ids.to(torch.int32),
        "attention_mask": attention_mask.to(torch.int32),
        "labels": labels.to(torch.int32),
        "logits": out.logits.detach().float(),
        "loss": out.loss.detach().float().reshape(1),
    }
    for n, gr in param_grads(m64, folder).items():
        tensors["grad/" + n] = gr
    save_expected(folder, tensors, meta)


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    llama3 = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    }

    causal_case(
        "llama_gqa_sharded",
        LlamaForCausalLM,
        LlamaConfig(
            vocab_size=61,
            hidden_size=48,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=128,
            rope_parameters={"rope_theta": 500000.0, **llama3},
            tie_word_embeddings=False,
            initializer_range=0.2,
        ),
        seed=SEED,
        save_kwargs={"max_shard_size": "60KB"},
        checks=[
            ("llama3_scaling", {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}),
            ("rope_theta", {"rope_parameters": {**llama3, "rope_theta": 10000.0}}),
        ],
    )
    causal_case(
        "llama_bias_tied",
        LlamaForCausalLM,
        LlamaConfig(
            vocab_size=53,
            hidden_size=40,
            intermediate_size=29,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            rope_parameters={"rope_theta": 25000.0, **llama3},
            attention_bias=True,
            mlp_bias=True,
            tie_word_embeddings=True,
            initializer_range=0.2,
        ),
        seed=SEED + 10,
        legacy=legacy_rope,
        checks=[
            ("llama3_scaling", {"rope_parameters": {"rope_type": "default", "rope_theta": 25e3}}),
        ],
    )
    causal_case(
        "mistral_gqa",
        MistralForCausalLM,
        MistralConfig(
            vocab_size=59,
            hidden_size=36,
            intermediate_size=41,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=3,
            head_dim=6,
            max_position_embeddings=64,
            sliding_window=T,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6},
            tie_word_embeddings=False,
            initializer_range=0.2,
        ),
        seed=SEED + 20,
        legacy=legacy_rope,
        checks=[
            ("rope_theta", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}),
            ("full_window", {"sliding_window": T - 1}),  # one token shorter changes the logits
        ],
    )
    causal_case(
        "qwen2_bf16_tied",
        Qwen2ForCausalLM,
        Qwen2Config(
            vocab_size=67,
            hidden_size=32,
            intermediate_size=45,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6},
            tie_word_embeddings=True,
            initializer_range=0.2,
        ),
        seed=SEED + 30,
        bf16=True,
        checks=[
            ("rope_theta", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}),
        ],
    )
    causal_case(
        "neox_parallel",
        GPTNeoXForCausalLM,
        GPTNeoXConfig(
            vocab_size=71,
            hidden_size=40,
            intermediate_size=75,
            num_hidden_layers=2,
            num_attention_heads=5,
            max_position_embeddings=64,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 20000.0,
                "partial_rotary_factor": 0.5,
            },
            use_parallel_residual=True,
            hidden_act="gelu",
            tie_word_embeddings=False,
            initializer_range=0.2,
        ),
        seed=SEED + 40,
        legacy=legacy_neox,
        checks=[
            ("parallel_residual", {"use_parallel_residual": False}),
            (
                "partial_rotary",
                {"rope_parameters": {"rope_type": "default", "rope_theta": 2e4}},
            ),
        ],
    )
    causal_case(
        "neox_sequential",
        GPTNeoXForCausalLM,
        GPTNeoXConfig(
            vocab_size=47,
            hidden_size=48,
            intermediate_size=53,
            num_hidden_layers=2,
            num_attention_heads=3,
            max_position_embeddings=64,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.25,
            },
            use_parallel_residual=False,
            hidden_act="gelu",
            tie_word_embeddings=False,
            initializer_range=0.2,
        ),
        seed=SEED + 50,
        checks=[
            ("sequential_residual", {"use_parallel_residual": True}),
            (
                "partial_rotary",
                {
                    "rope_parameters": {
                        "rope_type": "default",
                        "rope_theta": 1e4,
                        "partial_rotary_factor": 0.5,
                    }
                },
            ),
        ],
    )
    bert_case("bert_mlm", BertForMaskedLM, bert_config(), SEED + 60)
    bert_case("bert_cls", BertForSequenceClassification, bert_config(num_labels=3), SEED + 70)

    total = 0
    for root, _, files in os.walk(OUT):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    print(f"tests/fixtures/hf: {total} bytes")


if __name__ == "__main__":
    main()
