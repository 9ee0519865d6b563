"""The golden generators' one rewrite of a safetensors file they wrote (imported by
gen_gpt2_golden.py and gen_block_lm_golden.py, which run from this folder)."""

import json
import struct


def canonicalize_header(path):
    """safetensors serializes __metadata__ from a hash map, so its key order (and the file's
    bytes) change from run to run. Rewrite the header with sorted keys so that re-running a
    script reproduces the committed file byte for byte."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob[8 + n :])
