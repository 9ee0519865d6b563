#!/usr/bin/env python3
"""Parity fixtures for snug's tokenizer.json reader (src/data/tokenizer_json.h).

Trains small tokenizers of each kind snug reads with the `tokenizers` package (the oracle; CI needs
no Python) and writes, into tests/fixtures/tokenizers/:
  gpt2_style.json    ByteLevel pre-tokenizer (GPT-2 regex), merges as legacy "a b" strings
  prefix_style.json  ByteLevel(add_prefix_space=true): every piece, also after a special token,
                     gets a leading space
  llama3_style.json  NFC + Split (Llama 3 regex) + ByteLevel(use_regex=false), merges as [a, b]
                     pairs, ignore_merges, a normalized added token
  llama3_shipped.json  the layout of Llama 3's shipped file: llama3_style's pipeline, the special
                     tokens after the model vocabulary, and the post-processor Sequence of
                     ByteLevel and TemplateProcessing "<|begin_of_text|> $A"
  bert_wordpiece.json  BertNormalizer (lowercase, accents stripped, CJK spaced) + BertPreTokenizer +
                     WordPiece ("##") + TemplateProcessing "[CLS] $A [SEP]" + WordPiece decoder
  sp_llama2.json     SentencePiece-style BPE as Llama 2 / Mistral ship it: Prepend("▁") +
                     Replace(" ", "▁") normalizers, no pre-tokenizer, BPE with byte_fallback
                     (<0x00>..<0xFF> in the vocabulary) and fuse_unk, "<s> $A", and the decoders
                     Replace, ByteFallback, Fuse, Strip
  sp_metaspace_first.json   the same model with the Metaspace pre-tokenizer (prepend_scheme
                     "first", split false) instead of the normalizers (the non-legacy form)
  sp_metaspace_always.json  Metaspace (prepend_scheme "always", split true) with the Metaspace
                     decoder (tokenizers' own SentencePieceBPETokenizer layout)
  expected_ids.json  for every text (seed document slices, a code file, a multilingual corpus):
                     the text and the ids `tokenizers` gives with each tokenizer file as saved
                     (Tokenizer.encode's default add_special_tokens=True), and what it decodes
                     them to where that differs from the text ("decoded" with
                     skip_special_tokens=False, "decoded_skip" with True, its default).
It also writes small tokenizers of the new kinds into fuzz/corpus/tokenizer_json/ (trained on a
few lines), as seeds for the fuzz target and its replay test.
The seeds are read from --seeds (default /work/shared/seeds); the texts are copied into
expected_ids.json so the C++ test depends on nothing outside the repo. Re-running it rewrites
the files byte for byte (single-threaded training; checked by running it twice).

  python3 -m venv /work/venv-tok && /work/venv-tok/bin/pip install tokenizers
  /work/venv-tok/bin/python tests/golden/gen_tokenizer_golden.py
"""
import argparse
import json
import os
import pathlib

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers  # noqa: E402
from tokenizers import pre_tokenizers, processors, trainers  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "fixtures" / "tokenizers"
FUZZ = REPO / "fuzz" / "corpus" / "tokenizer_json"
FUZZ_TEXTS = ["Hello, world! 안녕하세요 세계", "BERT와 LoRA: 12345 tokens.", "É école ñ 中文 👍"]
CODE_FILE = "src/data/tokenizer.cpp"  # the code text is copied into expected_ids.json
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

MULTILINGUAL = [
    "Hello  world\n\n  x's 12345 ,.",
    "Hello  world\n\n  x'S 12345 ,.\n",
    "안녕하세요, 세계! 한국어 토크나이저 시험입니다.\r\n두 번째 줄.",
    "日本語のテキスト：東京は晴れです。カタカナ、ひらがな、漢字。",
    "中文文本：我们正在测试分词器，包括标点符号。",
    "النص العربي: مرحبا بالعالم، هذا اختبار.",
    "Emoji: 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇰🇷 🧑🏿‍💻 done",
    "Combining: e\u0301 a\u0308 n\u0303 \u1100\u1161\u11a8 (decomposed Hangul) Å vs A\u030a",
    "Tabs\tand\t\ttabs;\r\nCRLF\r\nlines\r\n\r\n",
    "Digits 1234567890123456789 and 3.14159 and 00000000",
    "Whitespace runs:      five spaces,\u00a0nbsp,\u3000ideographic, trailing   ",
    "   leading spaces and\n\n\n\nnewlines",
    "Specials<|endoftext|>in<|im_start|>the middle<|im_end|> and [[code]] added.",
    "<|im_start|>user\n질문입니다<|im_end|>\n<|im_start|>assistant\n답변<|im_end|>",
    "Mixed: snug은 CPU에서 LLM을 fine-tune합니다 (LoRA, QLoRA) — 100% offline!",
    "Quotes 'single' \"double\" `back` «guillemets» „low“ and I'M, YOU'LL, we'd",
    "",
    " ",
    "a",
]

# Texts the tokenizers are not trained on: characters outside every vocabulary ([UNK], byte
# fallback) and a word longer than WordPiece's max_input_chars_per_word.
HELD_OUT = [
    "Held out: \u03a9\u03bc\u03ad\u03b3\u03b1 \u2713 \u2603 \U0001F600 \U0001D518\U0001D52B "
    "\ua66e \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0",
    "Supercalifragilisticexpialidociousantidisestablishmentarianism x" * 2,
]


def seed_slices(seeds_dir):
    """Slices of at most ~3 KB (cut on a character boundary) of each seed document."""
    out = []
    for path in sorted(pathlib.Path(seeds_dir).glob("*.txt")):
        if path.name.endswith(".repaired.txt"):
            continue
        text = path.read_text(encoding="utf-8")
        n = len(text)
        starts = [0] if n <= 1200 else [0, n // 2]
        for s in starts:
            out.append((f"seed:{path.stem}@{s}", text[s : s + 1000]))
    return out


def train(texts, pre_tokenizer, normalizer, vocab_size):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return tok


LLAMA3_SPECIALS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"
]


def train_llama3_shipped(texts, vocab_size):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    tok.add_special_tokens(LLAMA3_SPECIALS)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A",
                pair="<|begin_of_text|> $A:0 <|begin_of_text|>:1 $B:1",
                special_tokens=[("<|begin_of_text|>", bos)],
            ),
        ]
    )
    return tok


def train_wordpiece(texts, vocab_size=800):
    """A BERT-style WordPiece tokenizer. Its vocabulary comes from tokenizers' BPE trainer on the
    BERT-normalized, BERT-pre-tokenized texts: every learned token once as a word start and once
    with "##" as a continuation. (WordPieceTrainer, whose "##" pieces are numbered in hash order,
    gives a different vocabulary from run to run; the BPE trainer without a prefix does not.)"""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.BertNormalizer(lowercase=True)
    bpe.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False)
    bpe.train_from_iterator(texts, trainer)
    learned = json.loads(bpe.to_str())["model"]["vocab"]
    words = sorted(set(learned) | {"##" + t for t in learned}, key=lambda t: (len(t), t))
    vocab = {t: i for i, t in enumerate(specials + words)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=40))
    tok.add_special_tokens(specials)
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    return tok


def train_sentencepiece(texts, vocab_size):
    """SentencePiece-style BPE (Llama 2): words from Metaspace, then the 256 byte tokens put in
    the vocabulary after the specials, as Llama 2's vocabulary has them. Returns the three
    layouts of the same model (see the module docstring)."""
    specials = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=specials, show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    d = json.loads(tok.to_str())
    learned = sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1])
    order = specials + [f"<0x{b:02X}>" for b in range(256)]
    order += [t for t, _ in learned if t not in specials]
    d["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    base = Tokenizer.from_str(json.dumps(d))
    base.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    sp_decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
         decoders.Strip(content=" ", left=1, right=0)]
    )
    out = {}
    llama2 = Tokenizer.from_str(base.to_str())
    llama2.normalizer = normalizers.Sequence(
        [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]
    )
    llama2.pre_tokenizer = None
    llama2.decoder = sp_decoder
    out["sp_llama2"] = llama2
    first = Tokenizer.from_str(base.to_str())
    first.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="first", split=False
    )
    first.decoder = sp_decoder
    out["sp_metaspace_first"] = first
    always = Tokenizer.from_str(base.to_str())
    always.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always", split=True
    )
    always.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    out["sp_metaspace_always"] = always
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="/work/shared/seeds")
    args = ap.parse_args()

    code = (REPO / CODE_FILE).read_text(encoding="utf-8")
    cases = seed_slices(args.seeds) + [(f"code:{CODE_FILE}", code)]
    cases += [(f"multilingual:{i}", t) for i, t in enumerate(MULTILINGUAL)]
    cases += [(f"held_out:{i}", t) for i, t in enumerate(HELD_OUT)]
    seeds_full = [
        p.read_text(encoding="utf-8")
        for p in sorted(pathlib.Path(args.seeds).glob("*.txt"))
        if not p.name.endswith(".repaired.txt")
    ]
    corpus = seeds_full + [code] + MULTILINGUAL

    gpt2 = train(corpus, pre_tokenizers.ByteLevel(add_prefix_space=False), None, 1200)
    prefix = train(corpus, pre_tokenizers.ByteLevel(add_prefix_space=True), None, 1000)
    llama3 = train(
        corpus,
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        ),
        normalizers.NFC(),
        1600,
    )
    llama3.add_tokens([AddedToken("[[code]]", normalized=True, special=False)])

    OUT.mkdir(parents=True, exist_ok=True)
    # GPT-2 style: legacy "a b" merges (no byte-level token contains a space).
    d = json.loads(gpt2.to_str())
    d["model"]["merges"] = [f"{a} {b}" for a, b in d["model"]["merges"]]
    files = {"gpt2_style": json.dumps(d, ensure_ascii=False, indent=1)}
    files["prefix_style"] = json.dumps(json.loads(prefix.to_str()), ensure_ascii=False, indent=1)
    d = json.loads(llama3.to_str())
    d["model"]["ignore_merges"] = True
    files["llama3_style"] = json.dumps(d, ensure_ascii=False, indent=1)
    files["llama3_shipped"] = json.dumps(
        json.loads(train_llama3_shipped(corpus, 900).to_str()), ensure_ascii=False, indent=1
    )
    files["bert_wordpiece"] = json.dumps(
        json.loads(train_wordpiece(corpus).to_str()), ensure_ascii=False, indent=1
    )

    for name, t in train_sentencepiece(corpus, 900).items():
        files[name] = json.dumps(json.loads(t.to_str()), ensure_ascii=False, indent=1)

    fuzz_seeds = {"bert_wordpiece_small": train_wordpiece(FUZZ_TEXTS * 2, 40)}
    fuzz_seeds["llama3_shipped_small"] = train_llama3_shipped(FUZZ_TEXTS * 2, 300)
    for name, t in train_sentencepiece(FUZZ_TEXTS * 2, 300).items():
        fuzz_seeds[name + "_small"] = t
    for name, t in fuzz_seeds.items():
        (FUZZ / name).write_text(t.to_str(), encoding="utf-8")

    expected = {"tokenizers": {}, "cases": []}
    loaded = {}
    for name, text in files.items():
        (OUT / f"{name}.json").write_text(text + "\n", encoding="utf-8")
        expected["tokenizers"][name] = f"{name}.json"
        loaded[name] = Tokenizer.from_str(text)
    for name, text in cases:
        ids = {k: t.encode(text).ids for k, t in loaded.items()}
        case = {"name": name, "text": text, "ids": ids}
        # What tokenizers decodes the ids to with the special tokens, and without them (its
        # default), each where it is not the text itself (NFC, the prefix spaces of
        # prefix_style, BERT's lowercase and spacing, <s>).
        for key, skip in (("decoded", False), ("decoded_skip", True)):
            out = {k: t.decode(ids[k], skip_special_tokens=skip) for k, t in loaded.items()}
            out = {k: v for k, v in out.items() if v != text}
            if out:
                case[key] = out
        expected["cases"].append(case)
    with open(OUT / "expected_ids.json", "w", encoding="utf-8") as f:
        f.write('{"tokenizers": ' + json.dumps(expected["tokenizers"]) + ',\n "cases": [\n')
        compact = {"ensure_ascii": False, "separators": (",", ":")}
        f.write(",\n".join(json.dumps(c, **compact) for c in expected["cases"]))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
