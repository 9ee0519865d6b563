"""Writes tests/fixtures/safetensors_fixture.safetensors with the reference `safetensors` package.

The file checks that snug's reader understands what Hugging Face's writer produces (header
padding, dtype spellings, offsets, __metadata__). Every value is exactly representable in each
dtype, so the C++ test (tests/io/safetensors_test.cpp, SafetensorsIo.ReadsPythonWrittenFile)
compares exactly. The file is written exactly as the package writes it; note that the package
serializes __metadata__ from a hash map, so a re-run may reorder those two keys (same content).

Re-run from the repository root (needs torch and safetensors):
    /tmp/tv/bin/python tests/golden/gen_safetensors_fixture.py
"""

import os

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "safetensors_fixture.safetensors")


def main():
    tensors = {
        # 0, 0.5, ..., 2.5 in each float dtype
        "f32": (torch.arange(6, dtype=torch.float32) * 0.5).reshape(2, 3),
        "f16": torch.tensor([1.0, -2.0, 0.25, 65504.0], dtype=torch.float16),
        "bf16": torch.tensor([[1.0, -3.0], [0.125, 256.0]], dtype=torch.bfloat16),
        "f64": torch.tensor([1.5, -0.75], dtype=torch.float64),
        "i32": torch.tensor([0, -7, 2147483647], dtype=torch.int32),
        "i64": torch.tensor([[5, -6], [2147483647, -2147483648]], dtype=torch.int64),
        "i64_big": torch.tensor([2**40], dtype=torch.int64),
        "u8": torch.tensor([0, 200, 255], dtype=torch.uint8),
        "scalar": torch.tensor(3.0, dtype=torch.float32),
    }
    save_file(tensors, OUT, metadata={"format": "pt", "source": "gen_safetensors_fixture.py"})
    print(f"wrote {os.path.normpath(OUT)} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
