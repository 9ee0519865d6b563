"""Token ids of texts as the `tokenizers` package and transformers' AutoTokenizer give them.

Reads --texts (a JSON list of strings) and a tokenizer folder --tokenizer (tokenizer.json, and
tokenizer_config.json for transformers), and writes to --out a JSON object with "tokenizers"
(Tokenizer.from_file(...).encode(text).ids after no_truncation() and no_padding(): the file may
set both, as sentence-transformers folders do) and "transformers" (AutoTokenizer(text)
["input_ids"], which applies neither unless asked): two lists of id lists, one per text. The
torch-labelled test (tests/torch/hf_folder_torchtest.cpp) compares them with snug's
JsonTokenizer; this script only measures.

Exit status: 0 written; 3 tokenizers or transformers missing (pip install tokenizers
transformers).

    python tests/torch/tokenizer_ids.py --tokenizer DIR --texts texts.json --out ids.json
"""

import argparse
import json
import os
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="a folder with tokenizer.json")
    ap.add_argument("--texts", required=True, help="a JSON list of strings")
    ap.add_argument("--out", required=True, help="where to write the ids (JSON)")
    args = ap.parse_args(argv)
    try:
        import tokenizers
        import transformers
    except ImportError as e:
        print(f"tokenizer_ids: {e}; pip install tokenizers transformers", file=sys.stderr)
        return 3
    with open(args.texts, encoding="utf-8") as f:
        texts = json.load(f)
    tok = tokenizers.Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    auto = transformers.AutoTokenizer.from_pretrained(args.tokenizer)
    out = {"tokenizers": [tok.encode(t).ids for t in texts],
           "transformers": [auto(t)["input_ids"] for t in texts]}
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(f"tokenizer_ids: {len(texts)} texts (tokenizers {tokenizers.__version__}, "
          f"transformers {transformers.__version__}, {type(auto).__name__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
