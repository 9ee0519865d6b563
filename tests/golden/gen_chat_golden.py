#!/usr/bin/env python3
"""Chat-template and SFT-mask fixtures for snug's jsonl data (src/data/chat_template.h, sft_data.h).

For every chat template snug accepts, renders fixed conversations with transformers'
apply_chat_template and prepares fixed records with TRL's own SFTTrainer._prepare_dataset (the
oracle for the token ids and the labels: -100 outside the completion, or outside the assistant
turns with assistant_only_loss, which TRL computes with its {% generation %} training variant of
the template where it has one). Writes into tests/fixtures/chat/:
  tokenizer.json  tests/fixtures/tokenizers/llama3_shipped.json (byte-level BPE whose post-processor
                  prepends <|begin_of_text|>) plus the special tokens the templates use
  expected.json   per template: its text, FNV-1a 64, bos/eos tokens, and cases: the record, the
                  rendered text(s), and input_ids/labels as TRL prepares them (no truncation)

Template texts: llama3, qwen2.5, gemma, phi3 are TRL's byte-identical copies of the shipped
templates (trl/chat_templates/*.jinja, TRL 1.16.0); the others are the chat_template strings of
these model repositories' tokenizer_config.json, written out below:
  chatml        generic ChatML (e.g. teknium/OpenHermes-2.5-Mistral-7B, allenai OLMo-3)
  qwen2         Qwen/Qwen2-7B-Instruct, Qwen/Qwen1.5-*-Chat
  mistral       mistralai/Mistral-7B-Instruct-v0.2
  mistral-v0.1  mistralai/Mistral-7B-Instruct-v0.1
  zephyr        HuggingFaceH4/zephyr-7b-beta

  /work/venv-hf/bin/pip install trl      # transformers 5.24.0, TRL 1.16.0, jinja2 3.1.6
  /work/venv-hf/bin/python tests/golden/gen_chat_golden.py
Re-running rewrites the files byte for byte.
"""
import json
import logging
import warnings
import pathlib

import transformers
import trl
from datasets import Dataset, disable_progress_bars
from tokenizers import AddedToken, Tokenizer
from transformers import PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer
from trl.chat_template_utils import get_training_chat_template

logging.disable(logging.WARNING)
disable_progress_bars()
warnings.filterwarnings("ignore")

REPO = pathlib.Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "fixtures" / "chat"
TRL_TEMPLATES = pathlib.Path(trl.__file__).parent / "chat_templates"

EXTRA_SPECIALS = ["<|im_start|>", "<|im_end|>", "<s>", "</s>", "<bos>", "<eos>", "<start_of_turn>",
                  "<end_of_turn>", "<|end|>", "<|endoftext|>", "<|user|>", "<|assistant|>",
                  "<|system|>"]

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")
QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
         "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
         "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
         "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
MISTRAL_HEAD = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
                "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
                "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
                "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}")
MISTRAL_TAIL = ("{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
                "{% endif %}{% endfor %}")
MISTRAL = MISTRAL_HEAD + "{{ message['content'] + eos_token}}" + MISTRAL_TAIL
MISTRAL_V01 = MISTRAL_HEAD + "{{ message['content'] + eos_token + ' ' }}" + MISTRAL_TAIL
ZEPHYR = ("{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
          "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + "
          "message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  "
          "+ message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n"
          "{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}")


def trl_file(name):
    return (TRL_TEMPLATES / f"{name}.jinja").read_text()


# name -> (template text, bos_token, eos_token, supports a system message)
TEMPLATES = {
    "llama3": (trl_file("llama3"), "<|begin_of_text|>", "<|eot_id|>", True),
    "chatml": (CHATML, None, "<|im_end|>", True),
    "qwen2": (QWEN2, None, "<|im_end|>", True),
    "qwen2.5": (trl_file("qwen2_5"), None, "<|im_end|>", True),
    "mistral": (MISTRAL, "<s>", "</s>", False),
    "mistral-v0.1": (MISTRAL_V01, "<s>", "</s>", False),
    "zephyr": (ZEPHYR, "<s>", "</s>", True),
    "gemma": (trl_file("gemma"), "<bos>", "<eos>", False),
    "phi3": (trl_file("phi3"), None, "<|endoftext|>", True),
}

SYSTEM = {"role": "system", "content": "Be nice, and brief."}
CONVERSATIONS = [
    [{"role": "user", "content": " Hi there! "},
     {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "Say goodbye in Korean."},
     {"role": "assistant", "content": "안녕히 가세요 👋\n"}],
    [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}],
]
PROMPT_COMPLETIONS = [
    ([{"role": "user", "content": "Name a colour."}], [{"role": "assistant", "content": " Blue."}]),
]
PLAIN = [
    {"text": "The cat sat on the mat."},
    {"text": "Ends with its eos already</s>"},
    {"prompt": "Translate 'chat': ", "completion": "cat"},
    {"prompt": "Q: 1+1?\nA:", "completion": " 2"},
]


def fnv1a64(b: bytes) -> int:
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def make_tokenizer():
    tok = Tokenizer.from_file(str(REPO / "tests" / "fixtures" / "tokenizers" / "llama3_shipped.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in EXTRA_SPECIALS])
    return tok


def hf_tokenizer(path, template, bos, eos):
    t = PreTrainedTokenizerFast(tokenizer_file=str(path), bos_token=bos, eos_token=eos)
    t.chat_template = template
    return t


def prepare(tokenizer, records, **config):
    """TRL's own preprocessing (SFTTrainer._prepare_dataset) of `records`, no truncation."""
    trainer = SFTTrainer.__new__(SFTTrainer)
    trainer._tokenizer = tokenizer
    args = SFTConfig(output_dir="/tmp/gen_chat_golden", max_length=None, report_to=[], bf16=False, use_cpu=True,
                     dataset_num_proc=None, **config)
    trainer.completion_only_loss = args.completion_only_loss
    if trainer.completion_only_loss is None:
        trainer.completion_only_loss = "prompt" in records[0]
    trainer.chat_template = get_training_chat_template(tokenizer) if args.assistant_only_loss else None
    ds = trainer._prepare_dataset(Dataset.from_list(records), tokenizer, args, False, None, "train")
    return [{"input_ids": r["input_ids"], "labels": r["labels"]} for r in ds]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer()
    tok.save(str(OUT / "tokenizer.json"))
    path = OUT / "tokenizer.json"
    result = {"transformers": transformers.__version__, "trl": trl.__version__,
              "tokenizer": "tokenizer.json", "templates": []}
    for name, (template, bos, eos, system_ok) in TEMPLATES.items():
        hf = hf_tokenizer(path, template, bos, eos)
        convs = [([SYSTEM] if system_ok else []) + CONVERSATIONS[0], CONVERSATIONS[1]]
        entry = {"name": name, "template": template,
                 "fnv1a64": f"{fnv1a64(template.encode()):016x}",
                 "bos_token": bos, "eos_token": eos, "cases": []}
        try:
            training = get_training_chat_template(hf) is not None
        except Exception:  # noqa: BLE001 - TRL raises for templates it has no variant of
            training = False
        messages = [{"messages": c} for c in convs]
        prepared = prepare(hf, messages)
        prepared_ao = prepare(hf, messages, assistant_only_loss=True) if training else None
        for i, rec in enumerate(messages):
            case = {"record": rec,
                    "rendered": hf.apply_chat_template(rec["messages"], tokenize=False),
                    "rendered_generation_prompt": hf.apply_chat_template(
                        rec["messages"][:1], tokenize=False, add_generation_prompt=True),
                    **prepared[i]}
            if prepared_ao:
                case["assistant_only_labels"] = prepared_ao[i]["labels"]
            entry["cases"].append(case)
        pcs = [{"prompt": ([SYSTEM] if system_ok else []) + p, "completion": c}
               for p, c in PROMPT_COMPLETIONS]
        for rec, prep in zip(pcs, prepare(hf, pcs)):
            entry["cases"].append({"record": rec, **prep})
        for rec, prep in zip(pcs, prepare(hf, pcs, completion_only_loss=False)):
            entry["cases"].append({"record": rec, "completion_only_loss": False, **prep})
        texts = [r for r in PLAIN if "text" in r]
        pairs = [r for r in PLAIN if "prompt" in r]
        for group in (texts, pairs):
            for rec, prep in zip(group, prepare(hf, group)):
                entry["cases"].append({"record": rec, **prep})
        result["templates"].append(entry)
    text = json.dumps(result, ensure_ascii=False, indent=1) + "\n"
    (OUT / "expected.json").write_text(text)
    for t in result["templates"]:
        print(f"{t['name']:14s} {t['fnv1a64']} cases {len(t['cases'])}")


if __name__ == "__main__":
    main()
