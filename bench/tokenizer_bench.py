#!/usr/bin/env python3
"""The tokenizers package's encode throughput on one thread, on the same document as
bench/tokenizer_bench.cpp (the parity fixtures' texts joined by newlines). Prints bytes/s per
tokenizer; compare with the C++ bench's bytes_per_second from the same machine and moment.

  /work/venv-tok/bin/python bench/tokenizer_bench.py
"""
import json
import os
import pathlib
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

DIR = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tokenizers"
cases = json.loads((DIR / "expected_ids.json").read_text(encoding="utf-8"))["cases"]
text = "".join(c["text"] + "\n" for c in cases)
nbytes = len(text.encode("utf-8"))
for name in ("gpt2_style", "llama3_style", "bert_wordpiece", "sp_llama2"):
    tok = Tokenizer.from_file(str(DIR / f"{name}.json"))
    n = len(tok.encode(text, add_special_tokens=False).ids)  # warm the word cache, as the C++ bench
    best = float("inf")
    for _ in range(5):
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 0.5:
            tok.encode(text, add_special_tokens=False)
            reps += 1
        best = min(best, (time.perf_counter() - t0) / reps)
    print(f"{name}: {nbytes / best / 1e6:.2f} MB/s ({best * 1e3:.3f} ms per {nbytes} bytes, {n} tokens)")
