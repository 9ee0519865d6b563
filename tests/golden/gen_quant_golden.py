"""Writes tests/fixtures/quant_golden.safetensors: the reference codes and scales that snug's quant/
formats must reproduce (tests/quant/quant_golden_test.cpp).

Oracles (all on CPU):
  * NF4 / FP4 blockwise 4-bit (block 64): bitsandbytes' own `quantize_4bit` / `dequantize_4bit`
    (its default torch backend: x * (1/absmax) for full blocks, x / absmax for the remainder
    block, clamp to [-1, 1], torch.bucketize against the code midpoints, first element in the
    high nibble).
  * 8-bit dynamic blockwise (signed and unsigned map): the same algorithm as bitsandbytes'
    default backend `quantize_blockwise`, written out below in torch, with bitsandbytes'
    `create_dynamic_map` as the code. The native CPU kernel of bitsandbytes (used by
    `F.quantize_blockwise` on CPU) is run too and the mismatches are printed: it writes
    code[0] = -1.0 into the code book it is given (bnb csrc/cpu_ops.cpp) and picks the nearest
    code by a distance comparison instead of midpoints, so it can differ at exact ties.
  * Double quantization: offset = absmax.mean(), the absmax minus the offset quantized with the
    signed dynamic map in blocks of 256 (bnb `quantize_4bit(compress_statistics=True)`), again
    computed with the clean map; bnb's own result is compared and printed.
  * int8 absmax per row: bitsandbytes `int8_vectorwise_quant` (round(x * 127/absmax), half to
    even); per tensor: the same with one absmax.
  * int8 zero-point: torch's MinMaxObserver (quint8, per-tensor affine) + quantize_per_tensor.

Re-run from the repository root (needs torch, safetensors, bitsandbytes):
    /tmp/tv/bin/python tests/golden/gen_quant_golden.py
"""

import os

import torch
from safetensors.torch import save_file

import bitsandbytes.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "quant_golden.safetensors")
N = 4096 + 77  # a remainder block for every block size used
ROWS, COLS = 39, 107  # 39 * 107 = 4173


def make_input():
    g = torch.Generator().manual_seed(20240611)
    x = torch.randn(N, generator=g, dtype=torch.float32)
    # a few outliers, as in LLM weights (one of them in the remainder block)
    for i, v in [(100, 12.0), (1000, -9.5), (2345, 7.25), (4150, 20.0)]:
        x[i] = v
    return x


def ref_blockwise(a, code, blocksize):
    """bitsandbytes' default-backend quantize_blockwise, written out (returns codes, absmax)."""
    a = a.reshape(-1).float()
    n = a.numel()
    rem = n % blocksize
    full = n - rem
    blocks = full // blocksize
    a_com = a[:full].reshape(blocks, blocksize)
    absmax = a_com.abs().max(dim=-1)[0]
    scaled = torch.clamp(a_com * (1.0 / absmax.clamp(min=1e-38).view(-1, 1)), -1, 1).reshape(-1)
    if rem:
        am = a[full:].abs().max().clamp(min=1e-38)
        absmax = torch.cat([absmax, am.unsqueeze(0)])
        scaled = torch.cat([scaled, torch.clamp(a[full:] / am, -1, 1)])
    bounds = (code[:-1] + code[1:]) / 2
    q = torch.bucketize(scaled, bounds, out_int32=True).to(torch.uint8)
    return q, absmax


def ref_deq_blockwise(q, absmax, code, blocksize):
    out = code[q.long()]
    idx = torch.arange(q.numel()) // blocksize
    return out * absmax[idx]


def main():
    x = make_input()
    t = {"x": x.clone()}
    dyn = F.create_dynamic_map(signed=True).float()
    udyn = F.create_dynamic_map(signed=False).float()
    t["dynamic_map_signed"] = dyn.clone()
    t["dynamic_map_unsigned"] = udyn.clone()
    t["nf4_map"] = F.get_4bit_type("nf4", device="cpu").float()
    t["fp4_map"] = F.get_4bit_type("fp4", device="cpu").float()

    # --- 4-bit, block 64, bitsandbytes itself is the oracle
    for qt in ["nf4", "fp4"]:
        q, s = F.quantize_4bit(x, blocksize=64, quant_type=qt, compress_statistics=False)
        t[f"{qt}_codes"] = q.reshape(-1).clone()
        t[f"{qt}_absmax"] = s.absmax.float().clone()
        t[f"{qt}_deq"] = F.dequantize_4bit(q, s).reshape(-1).float()

    # --- double quantization of the NF4 absmax (clean-map reference, bnb compared)
    absmax = t["nf4_absmax"]
    offset = absmax.mean()
    qa, absmax2 = ref_blockwise(absmax - offset, dyn, 256)
    absmax_dq = ref_deq_blockwise(qa, absmax2, dyn, 256) + offset
    nf4 = t["nf4_map"]
    q = t["nf4_codes"]
    nib = torch.stack([q >> 4, q & 15], dim=1).reshape(-1)[:N].long()
    t["nf4dq_qabsmax"] = qa
    t["nf4dq_absmax2"] = absmax2
    t["nf4dq_offset"] = offset.reshape(1)
    t["nf4dq_absmax_deq"] = absmax_dq
    t["nf4dq_deq"] = nf4[nib] * absmax_dq[torch.arange(N) // 64]
    qb, sb = F.quantize_4bit(x, blocksize=64, quant_type="nf4", compress_statistics=True)
    print("DQ: bnb offset", float(sb.offset), "ref", float(offset),
          "| qabsmax mismatches vs bnb native:", int((sb.absmax != qa).sum()), "of", qa.numel(),
          "| nf4 codes identical:", bool(torch.equal(qb.reshape(-1), q)))

    # --- 8-bit dynamic blockwise (signed on x, unsigned on |x|)
    for bs in [64, 256, 4096]:
        qd, ad = ref_blockwise(x, dyn, bs)
        t[f"dyn8_b{bs}_codes"] = qd
        t[f"dyn8_b{bs}_absmax"] = ad
        t[f"dyn8_b{bs}_deq"] = ref_deq_blockwise(qd, ad, dyn, bs)
        qn, sn = F.quantize_blockwise(x, code=dyn.clone(), blocksize=bs)
        print(f"dyn8 block {bs}: native bnb CPU kernel code mismatches:",
              int((qn != qd).sum()), "absmax equal:", bool(torch.equal(sn.absmax, ad)))
    xa = x.abs()
    qu, au = ref_blockwise(xa, udyn, 256)
    t["udyn8_b256_codes"] = qu
    t["udyn8_b256_absmax"] = au
    t["udyn8_b256_deq"] = ref_deq_blockwise(qu, au, udyn, 256)

    # --- int8 absmax: per row (bnb int8_vectorwise_quant) and per tensor
    a2 = x.reshape(ROWS, COLS).clone()
    qr, row_stats, _ = F.int8_vectorwise_quant(a2.clone())
    t["int8_row_codes"] = qr.reshape(-1).clone()
    t["int8_row_absmax"] = row_stats.float().clone()
    t["int8_row_deq"] = (qr.float() * (row_stats.view(-1, 1) / 127.0)).reshape(-1)
    qt_, st_, _ = F.int8_vectorwise_quant(x.reshape(1, -1).clone())
    t["int8_tensor_codes"] = qt_.reshape(-1).clone()
    t["int8_tensor_absmax"] = st_.float().reshape(1).clone()
    t["int8_tensor_deq"] = qt_.reshape(-1).float() * (st_.float() / 127.0)

    # --- int8 zero-point (asymmetric, uint8)
    obs = torch.ao.quantization.MinMaxObserver(dtype=torch.quint8,
                                               qscheme=torch.per_tensor_affine)
    obs(x)
    scale, zp = obs.calculate_qparams()
    qz = torch.quantize_per_tensor(x, float(scale), int(zp), torch.quint8)
    t["zp_codes"] = qz.int_repr().reshape(-1).clone()
    t["zp_scale"] = scale.float().reshape(1).clone()
    t["zp_zero_point"] = zp.to(torch.int32).reshape(1).clone()
    t["zp_deq"] = qz.dequantize().reshape(-1).float()

    # snug's safetensors reader reads integers as I32/I64: codes are stored as int32 (uint8
    # codes as 0..255, int8 codes as -127..127, packed 4-bit codes as the packed byte 0..255).
    t = {k: (v.to(torch.int32) if v.dtype in (torch.uint8, torch.int8) else v).contiguous()
         for k, v in t.items()}
    save_file(t, OUT, metadata={"source": "gen_quant_golden.py",
                                "bitsandbytes": __import__("bitsandbytes").__version__,
                                "torch": torch.__version__})
    print(f"wrote {os.path.normpath(OUT)} ({os.path.getsize(OUT)} bytes, {len(t)} tensors)")


if __name__ == "__main__":
    main()
