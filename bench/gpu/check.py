#!/usr/bin/env python3
"""Every GPU check of issue 27 in one run on the GPU machine, writing one JSON (bench/gpu/check.sh
calls this; see there for the parts). Each part records what it ran, its figures and its
verdicts; a part that fails does not stop the others.

  ops     snug_cuda_tests (every CUDA op against snug::ref), then the same under
          compute-sanitizer memcheck with one cudaMalloc per tensor (SNUG_CUDA_ALLOC=debug).
  parity  3 training steps on cuda and on cpu per configuration: losses within 1e-5 relative;
          a second cuda run bit-identical.
  resume  a checkpoint saved on the cpu resumes on cuda and the other way round (and on cuda
          itself, bit-identical): steps 4-6 against the uninterrupted run's.
  hf      checkpoints saved by transformers here (bench/gpu/hf_first_loss.py) give its first loss
          in snug, on cuda and on the cpu.
  memory  `snug plan --device cuda` against the cuda run's tracked peak (to the byte), and the
          driver's figure beside it.
  speed   gpt2-124m, B=16, T=1024: snug against PyTorch (bench/gpu/torch_gpt2_cuda.py), tokens/s
          as the median of the timed steps, peaks; the *-async modes take the stream-ordered pool
          instead of the paged arena (SNUG_CUDA_ALLOC=async), which prices the arena's take-backs.
  lora    the Qwen2-0.5B shape, LoRA r=16 all-linear on a bf16 base, B=4, T=512: snug against
          PEFT + transformers (bench/gpu/torch_lora_cuda.py), the third row of acceptance 4.
  racecheck  compute-sanitizer racecheck on the tiled flash kernels, one case at a time (the
          float4 cases: their cp.async tile copies), within --racecheck-timeout seconds.
  nccl    issue 30's NCCL communicator in a world of one: gpt2-tiny 5 steps with and without
          --ddp-backend nccl give the same losses.
  scale   issue 31's GPU runs (docs/scale.md): plan --device cuda against 3 (or 1) steps' tracked
          peak, driver figure, start-up (the progress line's time) and step times, host RSS.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(ROOT, "tests", "fixtures", "hf")

# Configurations of the parity and memory parts: a name and snug train flags.
PARITY = [
    ("gpt2-tiny", "--model gpt2-tiny --seq-len 128 --per-device-train-batch-size 8"),
    ("gpt2-tiny-accum-ckpt", "--model gpt2-tiny --seq-len 64 --per-device-train-batch-size 4 "
     "--gradient-accumulation-steps 2 --gradient-checkpointing"),
    ("gpt2-tiny-naive-attn", "--model gpt2-tiny --seq-len 64 --attention naive"),
    ("llama", f"--model {FIX}/llama_gqa_sharded --seq-len 16"),
    ("llama-bias-tied", f"--model {FIX}/llama_bias_tied --seq-len 16"),
    ("mistral", f"--model {FIX}/mistral_gqa --seq-len 16"),
    ("qwen2", f"--model {FIX}/qwen2_bf16_tied --seq-len 16"),
    ("neox", f"--model {FIX}/neox_parallel --seq-len 16"),
    ("bert-mlm", f"--model {FIX}/bert_mlm --seq-len 16"),
    ("bert-cls", f"--model {FIX}/bert_cls --seq-len 16"),
    ("llama-lora", f"--model {FIX}/llama_gqa_sharded --seq-len 16 --lora-r 4 "
     "--target-modules all-linear"),
    ("llama-qlora", f"--model {FIX}/llama_gqa_sharded --seq-len 16 --qlora --load-in-4bit "
     "--lora-r 4 --target-modules all-linear"),
    ("gpt2-tiny-bf16", "--model gpt2-tiny --seq-len 64 --bf16"),
    # nn.Linear layouts on the GPU's bf16 GEMMs (linear_nt_*_bf16); the GPU machine's snug has no
    # oneDNN, so its cpu rows widen: the two differ by the order of the sums.
    ("llama-bf16", f"--model {FIX}/llama_gqa_sharded --seq-len 16 --bf16"),
    ("qwen2-bf16-base-lora", f"--model {FIX}/qwen2_bf16_tied --seq-len 16 --torch-dtype bfloat16 "
     "--bf16 --lora-r 4 --target-modules all-linear"),
    ("gpt2-tiny-bf16-full", "--model gpt2-tiny --seq-len 64 --bf16-full"),
    ("gpt2-tiny-fp16", "--model gpt2-tiny --seq-len 64 --fp16"),
    ("gpt2-tiny-adamw8bit", "--model gpt2-tiny --seq-len 64 --optim adamw_bnb_8bit"),
    # The rest of issue 27's step 4 (every optimizer, freeze, 8-bit and FP4 bases, checkpoint
    # policies, NEFTune, packing with eval), which tests/core/cpu_remote_test.cpp and the op tests
    # cover without a GPU.
    ("gpt2-tiny-adafactor", "--model gpt2-tiny --seq-len 64 --optim adafactor"),
    ("gpt2-tiny-lion8bit", "--model gpt2-tiny --seq-len 64 --optim lion_8bit"),
    ("gpt2-tiny-sgd", "--model gpt2-tiny --seq-len 64 --optim sgd"),
    ("gpt2-tiny-lomo", "--model gpt2-tiny --seq-len 64 --optim lomo"),
    ("gpt2-tiny-adalomo", "--model gpt2-tiny --seq-len 64 --optim adalomo"),
    ("gpt2-tiny-galore", "--model gpt2-tiny --seq-len 64 --optim galore_adamw --galore-rank 4"),
    ("gpt2-tiny-freeze", "--model gpt2-tiny --seq-len 64 --freeze 'transformer.h.0.*'"),
    ("gpt2-tiny-int8-lora", "--model gpt2-tiny --seq-len 64 --load-in-8bit --lora-r 4 "
     "--target-modules all-linear"),
    ("gpt2-tiny-fp4-lora", "--model gpt2-tiny --seq-len 64 --load-in-4bit --bnb-4bit-quant-type "
     "fp4 --lora-r 4 --target-modules all-linear"),
    ("gpt2-tiny-selective", "--model gpt2-tiny --seq-len 64 --gradient-checkpointing "
     "--checkpoint-policy selective"),
    ("gpt2-tiny-neftune", "--model gpt2-tiny --seq-len 64 --neftune-noise-alpha 5"),
    ("tiny-llama-packing-eval", f"--model {ROOT}/examples/tiny-llama --data "
     f"{ROOT}/examples/arithmetic-instructions.jsonl --seq-len 32 --per-device-train-batch-size 4 "
     "--packing --eval-split 0.1 --eval-steps 2"),
]

MEMORY = [
    ("gpt2-124m-fp32", "--model gpt2-124m --seq-len 512 --per-device-train-batch-size 8"),
    ("gpt2-124m-ckpt", "--model gpt2-124m --seq-len 512 --per-device-train-batch-size 8 "
     "--gradient-checkpointing"),
    ("gpt2-124m-accum", "--model gpt2-124m --seq-len 512 --per-device-train-batch-size 4 "
     "--gradient-accumulation-steps 2"),
    ("gpt2-124m-bf16", "--model gpt2-124m --seq-len 512 --per-device-train-batch-size 8 --bf16"),
    ("gpt2-124m-bf16-full", "--model gpt2-124m --seq-len 512 --per-device-train-batch-size 8 "
     "--bf16-full"),
    ("gpt2-124m-lora", "--model gpt2-124m --seq-len 512 --per-device-train-batch-size 8 "
     "--lora-r 16 --target-modules all-linear"),
    ("gpt2-124m-adamw8bit", "--model gpt2-124m --seq-len 512 --per-device-train-batch-size 8 "
     "--optim adamw_bnb_8bit"),
    ("llama-qlora", f"--model {FIX}/llama_gqa_sharded --seq-len 16 --qlora --load-in-4bit "
     "--lora-r 4 --target-modules all-linear"),
    ("bert-cls", f"--model {FIX}/bert_cls --seq-len 16"),
    ("qwen2-bf16-base-lora", f"--model {FIX}/qwen2_bf16_tied --seq-len 16 --torch-dtype bfloat16 "
     "--bf16 --lora-r 4 --target-modules all-linear"),
    ("gpt2-350m-fp32", "--model gpt2-350m --seq-len 1024 --per-device-train-batch-size 4"),
]


def run(cmd, timeout, env=None):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, shell=True, capture_output=True, text=True, errors="replace",
                           timeout=timeout, env=env)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, (e.stdout or b"").decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or ""), "timeout"
    return {"cmd": cmd, "rc": rc, "s": round(time.time() - t0, 2), "out": out[-4000:],
            "err": err[-8000:]}


def train(snug, device, flags, report, steps=3, timeout=120, extra="", save_steps=0):
    """`snug train` into REPORT.out with its report at REPORT (random tokens unless flags name
    data): the command's result and the report, or None."""
    outdir = report + ".out"
    data = "" if "--data " in flags else "--data dummy "
    r = run(f"{snug} train --device {device} {flags} --max-steps {steps} {data}"
            f"--logging-steps 1 --save-steps {save_steps} --output-dir {outdir} "
            f"--overwrite-output-dir --report-json {report} {extra}", timeout)
    rep = None
    if os.path.exists(report):
        with open(report) as f:
            rep = json.load(f)
    return r, rep


def selected(a, table, part):
    """The rows of a part's table (name first) that --only selects, each with its own folder
    OUT/part/name."""
    for row in table:
        if a.only and row[0] not in a.only.split(","):
            continue
        d = os.path.join(a.out, part, row[0])
        os.makedirs(d, exist_ok=True)
        yield row, d


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def part_ops(a, res):
    tests = os.path.join(a.bin, "tests", "snug_cuda_tests")
    j = os.path.join(a.out, "ops_gtest.json")
    r = run(f"{tests} --gtest_output=json:{j} --gtest_filter='{a.ops_filter}' "
            f"--gtest_also_run_disabled_tests 2>&1 | tee {a.out}/ops_stdout.txt", 240)
    summary = {"rc": r["rc"], "s": r["s"]}
    if os.path.exists(j):
        g = json.load(open(j))
        summary.update(tests=g.get("tests"), failures=g.get("failures"),
                       disabled=g.get("disabled"))
        failed = []
        for suite in g.get("testsuites", []):
            for t in suite.get("testsuite", []):
                if t.get("failures"):
                    failed.append({"test": suite["name"] + "." + t["name"],
                                   "failure": t["failures"][0]["failure"][:600]})
        summary["failed"] = failed
    summary["missing_ops"] = [l.split(": ", 1)[1] for l in r["out"].splitlines()
                              if l.startswith("no CUDA kernel yet: ")]
    summary["tail"] = r["out"][-1500:] if summary.get("failures") else ""
    summary["timings"] = [l for l in open(f"{a.out}/ops_stdout.txt").read().splitlines()
                          if " ms" in l and "[" not in l][:40]
    res["ops"] = summary


def part_memcheck(a, res):
    """compute-sanitizer memcheck over the CUDA op tests, one cudaMalloc per tensor."""
    tests = os.path.join(a.bin, "tests", "snug_cuda_tests")
    env = dict(os.environ, SNUG_CUDA_ALLOC="debug")
    m = run(f"compute-sanitizer --tool memcheck --error-exitcode 9 {tests} "
            f"--gtest_brief=1 --gtest_filter='{a.memcheck_filter}'", a.memcheck_timeout, env)
    lines = [l for l in (m["out"] + m["err"]).splitlines() if "ERROR SUMMARY" in l]
    res["memcheck"] = {"rc": m["rc"], "s": m["s"], "filter": a.memcheck_filter,
                       "summary": lines[-1] if lines else None,
                       "tail": (m["out"] + m["err"])[-1500:] if m["rc"] else ""}
    print(f"memcheck: {res['memcheck']['summary']} rc={m['rc']}", flush=True)


def part_racecheck(a, res):
    """compute-sanitizer racecheck (shared-memory hazards) on the kernels whose names hold
    --racecheck-kernels, one test at a time (racecheck is slow: the 36 flash cases in one test did
    not finish in 75 s), until --racecheck-timeout seconds are spent; the tests not reached are
    listed."""
    tests = os.path.join(a.bin, "tests", "snug_cuda_tests")
    listed = run(f"{tests} --gtest_list_tests --gtest_filter='{a.racecheck_filter}'", 30)["out"]
    suite, todo = "", []
    for line in listed.splitlines():  # "Suite." lines, then indented test names
        if line.startswith(" ") and suite:
            todo.append(suite + line.split()[0])
        elif line.rstrip().endswith(".") and " " not in line.strip():
            suite = line.strip()
    rows, t0 = [], time.time()
    for test in todo:
        left = a.racecheck_timeout - (time.time() - t0)
        if left < 5:
            break
        r = run(f"compute-sanitizer --tool racecheck --racecheck-report hazard "
                f"--kernel-name kns={a.racecheck_kernels} --print-limit 10 {tests} "
                f"--gtest_brief=1 --gtest_filter='{test}'", left)
        text = r["out"] + r["err"]
        summary = [l for l in text.splitlines() if "RACECHECK SUMMARY" in l]
        rows.append({"test": test, "rc": r["rc"], "s": r["s"],
                     "summary": summary[-1] if summary else None,
                     "tail": text[-1200:] if r["rc"] or "hazard" in text.lower() else ""})
        print(f"racecheck {test}: {rows[-1]['summary']} rc={r['rc']}", flush=True)
    res["racecheck"] = {"kernels": a.racecheck_kernels, "filter": a.racecheck_filter,
                        "rows": rows, "not_reached": todo[len(rows):]}


def torch_row(a, mode, timeout):
    """One PyTorch peer measurement (bench/gpu/torch_gpt2_cuda.py) as a speed row."""
    r = run(f"python3 {HERE}/torch_gpt2_cuda.py --mode {mode} --steps {a.speed_steps}", timeout)
    try:
        row = json.loads(r["out"].strip().splitlines()[-1])
        row["engine"] = "torch"
    except Exception:
        row = {"engine": "torch", "mode": mode, "rc": r["rc"], "err": r["err"][-800:]}
    print(f"speed torch {mode}: {row.get('tokens_per_second')}", flush=True)
    return row


def part_compile(a, res):
    """PyTorch with torch.compile (bf16 autocast), for the same table as the speed part."""
    res["compile"] = torch_row(a, "compile", 400)


def part_parity(a, res):
    snug = os.path.join(a.bin, "snug")
    rows = []
    for (name, flags), d in selected(a, PARITY, "parity"):
        rc_, cpu = train(snug, "cpu", flags, d + "/cpu.json")
        rg, gpu = train(snug, "cuda", flags, d + "/cuda.json")
        rg2, gpu2 = train(snug, "cuda", flags, d + "/cuda2.json")
        row = {"name": name, "flags": flags, "cpu_rc": rc_["rc"], "cuda_rc": rg["rc"]}
        if cpu and gpu and cpu.get("loss") and gpu.get("loss"):
            row["cpu_loss"] = cpu["loss"]
            row["cuda_loss"] = gpu["loss"]
            row["max_rel"] = max(rel(g, c) for g, c in zip(gpu["loss"], cpu["loss"]))
            row["bit_identical_rerun"] = bool(gpu2) and gpu2.get("loss") == gpu["loss"]
            row["cuda_peak"] = gpu["memory"]["peak_bytes"]
            row["cpu_peak"] = cpu["memory"]["peak_bytes"]
        else:
            row["cuda_err"] = (rg["err"] or rg["out"])[-800:]
            row["cpu_err"] = (rc_["err"] or rc_["out"])[-400:] if rc_["rc"] else ""
        rows.append(row)
        print(f"parity {name}: {row.get('max_rel', 'FAILED')}", flush=True)
    res["parity"] = rows


# Configurations of the resume part: what a checkpoint carries besides fp32 weights (AdamW's
# moments; 8-bit states, fp16's loss scale, NEFTune's generator; QLoRA's
# quantized base and adapters).
RESUME = [
    ("gpt2-tiny", "--model gpt2-tiny --seq-len 64 --per-device-train-batch-size 4"),
    ("gpt2-tiny-fp16-adamw8bit", "--model gpt2-tiny --seq-len 64 --per-device-train-batch-size 4 "
     "--fp16 --optim adamw_bnb_8bit --neftune-noise-alpha 5"),
    ("llama-qlora", f"--model {FIX}/llama_gqa_sharded --seq-len 16 --qlora --load-in-4bit "
     "--lora-r 4 --target-modules all-linear"),
]


def part_resume(a, res):
    """Checkpoints resume across devices (issue 27, step 4): 6 steps straight on each device,
    saving at step 3; then steps 4-6 resumed from each device's checkpoint on the other device
    (within 1e-5 relative of the straight run whose checkpoint it took) and on the same one
    (bit-identical)."""
    snug = os.path.join(a.bin, "snug")
    rows = []
    for (name, flags), d in selected(a, RESUME, "resume"):
        straight = {}
        row = {"name": name, "flags": flags}
        for dev in ("cpu", "cuda"):
            r, rep = train(snug, dev, flags, f"{d}/{dev}.json", steps=6, timeout=180,
                           save_steps=3)
            straight[dev] = rep["loss"] if rep else None
            if r["rc"]:
                row[f"{dev}_err"] = (r["err"] or r["out"])[-600:]
        for src, dst in (("cpu", "cuda"), ("cuda", "cpu"), ("cuda", "cuda")):
            if not straight[src]:
                continue
            tag = f"{src}_to_{dst}"
            r, rep = train(snug, dst, flags, f"{d}/{tag}.json", steps=6, timeout=180,
                           extra=f"--resume-from {d}/{src}.json.out/checkpoint-3")
            if not rep:
                row[tag] = {"err": (r["err"] or r["out"])[-600:]}
                continue
            got, want = rep["loss"], straight[src][3:]
            row[tag] = {"loss": got, "straight": want,
                        "max_rel": max((rel(g, w) for g, w in zip(got, want)), default=None),
                        "bit_identical": got == want, "steps": len(got)}
        rows.append(row)
        print(f"resume {name}: " + ", ".join(
            f"{k} {v.get('max_rel', 'FAILED')}" for k, v in row.items() if "_to_" in k), flush=True)
    res["resume"] = rows


def part_hf(a, res):
    """Checkpoints saved by transformers on this machine (bench/gpu/hf_first_loss.py: gpt2, llama,
    mistral, qwen2, gpt_neox) give transformers' first loss in snug, on cuda and on the cpu
    (acceptance 2: within 1e-5 relative)."""
    snug = os.path.join(a.bin, "snug")
    d = os.path.join(a.out, "hf")
    r = run(f"python3 {HERE}/hf_first_loss.py --out {d} --device {a.hf_device}", 300)
    try:
        made = json.loads(r["out"].strip().splitlines()[-1])
    except Exception:
        res["hf"] = {"rc": r["rc"], "err": (r["err"] or r["out"])[-1500:]}
        return
    rows = []
    for name, f in made["families"].items():
        row = {"family": name, "transformers_loss": f["loss"]}
        flags = (f"--model {f['folder']} --data {f['data']} --seq-len {made['T']} "
                 f"--per-device-train-batch-size {made['B']}")
        for dev in ("cuda", "cpu"):
            t, rep = train(snug, dev, flags, f"{d}/{name}_{dev}.json", steps=1)
            if rep:
                loss = rep["loss"][0]
                row[dev] = {"loss": loss, "rel": rel(loss, f["loss"])}
            else:
                row[dev] = {"err": (t["err"] or t["out"])[-600:]}
        rows.append(row)
        print(f"hf {name}: transformers {f['loss']:.7f}, " + ", ".join(
            f"{dev} {row[dev].get('rel', 'FAILED')}" for dev in ("cuda", "cpu")), flush=True)
    res["hf"] = {"torch": made.get("torch"), "transformers": made.get("transformers"),
                 "B": made["B"], "T": made["T"], "rows": rows}


def part_generate(a, res):
    """Greedy and beam generation on cuda give the cpu's tokens (a gpt2-tiny trained 40 steps)."""
    snug = os.path.join(a.bin, "snug")
    d = os.path.join(a.out, "generate")
    os.makedirs(d, exist_ok=True)
    t = run(f"{snug} train --device cpu --max-steps 40 --save-steps 40 --output-dir {d}/o "
            "--overwrite-output-dir", 120)
    rows = [{"train_rc": t["rc"]}]
    for extra in ["", "--num-beams 3", "--bf16",
                  "--do-sample --temperature 0.8 --top-k 5 --top-p 0.9 --seed 7"]:
        outs = {}
        for dev in ("cpu", "cuda"):
            r = run(f"{snug} generate --device {dev} --checkpoint {d}/o/checkpoint-40 "
                    f"--prompt 'The ' --max-new-tokens 24 {extra}", 60)
            outs[dev] = r
        rows.append({"flags": extra, "same": outs["cpu"]["out"] == outs["cuda"]["out"],
                     "cpu_rc": outs["cpu"]["rc"], "cuda_rc": outs["cuda"]["rc"],
                     "cpu": outs["cpu"]["out"][-200:], "cuda": outs["cuda"]["out"][-200:],
                     "cuda_err": outs["cuda"]["err"][-300:] if outs["cuda"]["rc"] else ""})
        print(f"generate [{extra}]: same={rows[-1]['same']}", flush=True)
    res["generate"] = rows


def op_times(table):
    """{op: (calls, ms)} from a SNUG_CUDA_PROFILE table."""
    out = {}
    for line in table.splitlines()[1:]:
        f = line.split()
        if len(f) >= 6 and f[2] == "calls" and f[4] == "ms":
            out[f[0]] = (int(f[1]), float(f[3]))
    return out


def part_profile(a, res):
    """Where a gpt2-124m step's time goes: SNUG_CUDA_PROFILE=1 (a sync per op), per mode. Step 1
    carries one-time costs (cuBLASLt's kernel loading and heuristics, cuDNN's graph builds), so a
    1-step run is subtracted from a (1 + profile_steps)-step one: the steady state per step."""
    snug = os.path.join(a.bin, "snug")
    env = dict(os.environ, SNUG_CUDA_PROFILE="1")
    res["profile"] = {}
    for mode in a.profile_modes:
        extra = {"fp32": "", "bf16": "--bf16"}[mode]
        tables = []
        for steps in (1, 1 + a.profile_steps):
            r = run(f"{snug} train --device cuda --model gpt2-124m --seq-len 1024 "
                    f"--per-device-train-batch-size 16 --max-steps {steps} --data dummy "
                    f"--save-steps 0 --output-dir {a.out}/profile {extra}", 180, env)
            err = r["err"]
            i = err.find("snug CUDA op profile")
            tables.append(err[i:i + 5000] if i >= 0 else "")
        one, many = op_times(tables[0]), op_times(tables[1])
        per_step = sorted(((op, (ms - one.get(op, (0, 0.0))[1]) / a.profile_steps)
                           for op, (calls, ms) in many.items()), key=lambda x: -x[1])
        total = sum(ms for _, ms in per_step)
        res["profile"][mode] = {"steps": a.profile_steps, "ms_per_step": round(total, 2),
                                "per_step_ms": [[op, round(ms, 3)] for op, ms in per_step],
                                "table_1_step": tables[0], "table": tables[1]}
        print(f"{mode}: {total:.1f} ms of ops per step (steady state, synced per op)")
        for op, ms in per_step[:14]:
            print(f"  {op:32s} {ms:9.3f} ms  {100 * ms / max(total, 1e-9):5.1f}%")
        if a.torch_profile:
            f = f"{a.out}/torch_profile_{mode}.txt"
            t = run(f"python3 {HERE}/torch_gpt2_cuda.py --mode {mode} --steps 3 --profile 2>{f}",
                    240)
            res["profile"]["torch_" + mode] = {"rc": t["rc"], "table": open(f).read()[-9000:]}


# Nsight Compute on the kernels that hold the speed rows back (docs/cuda.md#status): one launch
# of each, inside the timing tests that run them at gpt2-124m's shape (B=16, T=1024). The
# sections say why a kernel is slow (throughput against the peaks, occupancy, warp stall reasons).
NCU_KERNELS = [  # (kernel name regex, the test that launches it)
    ("tiled_forward_kernel", "CudaFlash.DISABLED_TimeGpt2Layer"),
    ("tiled_dq_kernel", "CudaFlash.DISABLED_TimeGpt2Layer"),
    ("tiled_dkv_kernel", "CudaFlash.DISABLED_TimeGpt2Layer"),
    ("softmax_rows_kernel", "CudaXent.DISABLED_TimeLmHeadGpt2"),
]
NCU_SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "SchedulerStats",
                "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis")


def part_ncu(a, res):
    tests = os.path.join(a.bin, "tests", "snug_cuda_tests")
    d = os.path.join(a.out, "ncu")
    os.makedirs(d, exist_ok=True)
    sections = " ".join(f"--section {x}" for x in NCU_SECTIONS)
    rows = []
    for kernel, test in NCU_KERNELS:
        if a.ncu_filter and kernel not in a.ncu_filter.split(","):
            continue
        f = os.path.join(d, kernel + ".txt")
        r = run(f"ncu -k regex:{kernel} -c 1 {sections} {tests} --gtest_filter={test} "
                f"--gtest_also_run_disabled_tests > {f} 2>&1", 180)
        text = open(f, errors="replace").read() if os.path.exists(f) else ""
        i = text.find("Section: GPU Speed Of Light")
        rows.append({"kernel": kernel, "rc": r["rc"], "s": r["s"],
                     "report": text[i - 400 if i >= 400 else 0:][:12000] if i >= 0
                     else text[-3000:]})
        print(f"ncu {kernel}: rc {r['rc']}, {r['s']} s", flush=True)
    res["ncu"] = rows


def memory_verdicts(row, m):
    """A cuda run's memory (its report's `memory`) against the plan's figures in `row`."""
    row.update(run_peak=m["peak_bytes"], driver=m.get("driver"), pages=m.get("pages"),
               run_pages=(m.get("pages") or {}).get("reserved_bytes"))
    row["equal"] = row.get("plan_peak") == row["run_peak"]
    # The paged arena (core/page_arena.h): the pages the run held, against the plan's.
    row["pages_equal"] = row.get("plan_pages") == row["run_pages"]
    drv = m.get("driver")
    if drv:
        # Acceptance 3: the driver's use less the context and the named workspaces (cuBLASLt's,
        # and the stream-ordered scratch: cuDNN attention, reductions), against the peak.
        held = (drv["device_used_bytes"] - drv["context_bytes"] - drv["library_workspace_bytes"]
                - drv.get("pool_reserved_high_bytes", 0))
        row["held_bytes"] = held
        row["held_over_peak"] = round(held / max(row["run_peak"], 1) - 1, 5)


def part_memory(a, res):
    snug = os.path.join(a.bin, "snug")
    rows = []
    for (name, flags), d in selected(a, MEMORY, "memory"):
        p = run(f"{snug} plan --device cuda {flags} --max-steps 2 --data dummy "
                f"--json {d}/plan.json", 60)
        rg, gpu = train(snug, "cuda", flags, d + "/cuda.json", steps=2)
        row = {"name": name, "flags": flags, "plan_rc": p["rc"], "cuda_rc": rg["rc"]}
        if os.path.exists(d + "/plan.json"):
            pm = json.load(open(d + "/plan.json"))["memory"]
            row["plan_peak"] = pm["peak_bytes"]
            row["plan_pages"] = (pm.get("pages") or {}).get("reserved_bytes")
        if gpu:
            memory_verdicts(row, gpu["memory"])
        else:
            row["cuda_err"] = (rg["err"] or rg["out"])[-800:]
        rows.append(row)
        print(f"memory {name}: plan {row.get('plan_peak')} run {row.get('run_peak')} pages plan "
              f"{row.get('plan_pages')} run {row.get('run_pages')} held/peak-1 "
              f"{row.get('held_over_peak')}", flush=True)
    if not a.only or "generation" in a.only.split(","):
        rows.append(memory_row_generation(a, snug))
    res["memory"] = rows


# Acceptance 3's generation configuration: gpt2-350m's shape with byte tokens (vocab 256, so a
# random model's tokens decode), one 64-token prompt, 448 new tokens, 4 beams: 1.2 GB of weights
# and a 0.4 GB KV cache. `plan --inference` with the same shape (GenerateCli checks the same on
# the CPU).
GEN_MODEL = "--model gpt2-350m --vocab-size 256 --num-beams 4 --max-new-tokens 448"


def memory_row_generation(a, snug):
    d = os.path.join(a.out, "memory", "generation")
    os.makedirs(d, exist_ok=True)
    p = run(f"{snug} plan --inference --device cuda {GEN_MODEL} --per-device-eval-batch-size 1 "
            f"--seq-len 512 --json {d}/plan.json", 60)
    g = run(f"{snug} generate --device cuda {GEN_MODEL} --prompt {'a' * 64} "
            f"--report-json {d}/cuda.json", 180)
    row = {"name": "generation", "flags": GEN_MODEL, "plan_rc": p["rc"], "cuda_rc": g["rc"]}
    if os.path.exists(d + "/plan.json"):
        pm = json.load(open(d + "/plan.json"))["memory"]
        row.update(plan_peak=pm["peak_bytes"],
                   plan_pages=(pm.get("pages") or {}).get("reserved_bytes"))
    if os.path.exists(d + "/cuda.json"):
        memory_verdicts(row, json.load(open(d + "/cuda.json"))["memory"])
    else:
        row["cuda_err"] = (g["err"] or g["out"])[-800:]
    print(f"memory generation: plan {row.get('plan_peak')} run {row.get('run_peak')} pages plan "
          f"{row.get('plan_pages')} run {row.get('run_pages')} held/peak-1 "
          f"{row.get('held_over_peak')}", flush=True)
    return row


def part_nccl(a, res):
    snug = os.path.join(a.bin, "snug")
    d = os.path.join(a.out, "nccl")
    os.makedirs(d, exist_ok=True)
    flags = "--model gpt2-tiny --seq-len 64 --per-device-train-batch-size 4"
    r0, plain = train(snug, "cuda", flags, d + "/plain.json", steps=5)
    r1, nccl = train(snug, "cuda", flags, d + "/nccl.json", steps=5, extra="--ddp-backend nccl")
    row = {"plain_rc": r0["rc"], "nccl_rc": r1["rc"],
           "nccl_library": os.environ.get("SNUG_NCCL_LIBRARY")}
    if plain and nccl:
        row.update(plain_loss=plain["loss"], nccl_loss=nccl["loss"],
                   same=plain["loss"] == nccl["loss"], comm=nccl.get("communication_s"))
    else:
        row["err"] = (r1["err"] or r1["out"])[-800:]
    res["nccl"] = row
    print(f"nccl: same={row.get('same')} rc={r1['rc']}", flush=True)


# issue 31 acceptance 5 and the GPU column of docs/scale.md: name, flags, steps, timeout.
SCALE_C = "--gradient-checkpointing --seq-len 512 --per-device-train-batch-size 1"
SCALE_LR = "--learning-rate 0.5 --lr-scheduler-type constant --warmup-steps 0"
SCALE = [
    ("lomo-7b", f"--model llama-7b --optim lomo --bf16-full {SCALE_C} {SCALE_LR}", 3, 200),
    ("lomo-13b", f"--model llama-13b --optim lomo --bf16-full {SCALE_C} {SCALE_LR}", 1, 150),
    ("lora-bf16-13b", f"--model llama-13b --torch-dtype bfloat16 --bf16 --lora-r 16 "
     f"--target-modules all-linear {SCALE_C}", 1, 150),
    ("qlora-70b", f"--model llama-70b --qlora --lora-r 16 --bf16 {SCALE_C}", 3, 420),
]
# A child's peak resident set (kB) printed after it: the host side of a GPU run.
RSS = ("python3 -c 'import resource,subprocess,sys; r=subprocess.run(sys.argv[1:]).returncode; "
       "print(\"maxrss_kb\", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
       "file=sys.stderr); sys.exit(r)' ")


def part_scale(a, res):
    snug = os.path.join(a.bin, "snug")
    rows = []
    for (name, flags, steps, timeout), d in selected(a, SCALE, "scale"):
        p = run(f"{snug} plan --device cuda {flags} --max-steps {steps} --json {d}/plan.json",
                120)
        r = run(f"{RSS}{snug} train --device cuda {flags} --max-steps {steps} --logging-steps 1 "
                f"--save-steps 0 --output-dir {d}/o --overwrite-output-dir "
                f"--report-json {d}/run.json", timeout)
        row = {"name": name, "flags": flags, "plan_rc": p["rc"], "rc": r["rc"], "s": r["s"]}
        if os.path.exists(d + "/plan.json"):
            pm = json.load(open(d + "/plan.json"))["memory"]
            row["plan_peak"] = pm["peak_bytes"]
            row["plan_pages"] = (pm.get("pages") or {}).get("reserved_bytes")
        else:
            row["plan_err"] = (p["err"] or p["out"])[-600:]
        lines = r["err"].replace("\r", "\n").splitlines()
        row["startup"] = [l for l in lines if "parameters:" in l][-2:]
        row["maxrss_kb"] = next((int(l.split()[1]) for l in lines if l.startswith("maxrss_kb")),
                                None)
        if os.path.exists(d + "/run.json"):
            rep = json.load(open(d + "/run.json"))
            ends = [0.0] + rep.get("step_end_s", [])
            row.update(run_peak=rep["memory"]["peak_bytes"], driver=rep["memory"].get("driver"),
                       run_pages=(rep["memory"].get("pages") or {}).get("reserved_bytes"),
                       loss=rep.get("loss"),
                       step_s=[round(ends[i + 1] - ends[i], 3) for i in range(len(ends) - 1)],
                       equal=row.get("plan_peak") == rep["memory"]["peak_bytes"])
        else:
            row["err"] = (r["err"] or r["out"])[-1200:]
        rows.append(row)
        res["scale"] = rows
        with open(a.json or os.path.join(a.out, "check.json"), "w") as f:
            json.dump(res, f, indent=1)
        print(f"scale {name}: rc {r['rc']} {r['s']} s plan {row.get('plan_peak')} run "
              f"{row.get('run_peak')} equal {row.get('equal')} steps {row.get('step_s')} "
              f"start {row['startup'][-1:]} rss {row['maxrss_kb']}", flush=True)
    res["scale"] = rows


def snug_speed_row(rg, rep, tokens_per_step, **label):
    """A snug speed row from its report: the median of the steps after the first 3 (warm-up)."""
    row = {"engine": "snug", **label, "rc": rg["rc"]}
    if rep and rep.get("step_end_s"):
        ends = [0.0] + rep["step_end_s"]
        med = statistics.median([ends[i + 1] - ends[i] for i in range(len(ends) - 1)][3:])
        row.update(median_step_s=med, tokens_per_second=tokens_per_step / med,
                   peak_bytes=rep["memory"]["peak_bytes"], driver=rep["memory"].get("driver"),
                   pages=rep["memory"].get("pages"), losses=rep["loss"][:3])
    else:
        row["err"] = (rg["err"] or rg["out"])[-800:]
    return row


# The speed part's snug rows: mode -> flags and environment (the variants under comparison in one
# run).
SPEED_MODES = {"fp32": ("", {}), "fp32-simple-flash": ("", {"SNUG_CUDA_FLASH": "simple"}),
               "fp32-tiled-pairs": ("", {"SNUG_CUDA_FLASH": "tiled-pairs"}),
               "fp32-tiled-rows": ("", {"SNUG_CUDA_FLASH": "tiled"}),
               "fp32-async": ("", {"SNUG_CUDA_ALLOC": "async"}),
               "bf16": ("--bf16", {}),
               "bf16-async": ("--bf16", {"SNUG_CUDA_ALLOC": "async"}),
               "bf16-no-cudnn": ("--bf16", {"SNUG_CUDA_CUDNN": "0"}),
               "bf16-widen": ("--bf16 --gemm-path widen", {})}


def part_speed(a, res):
    snug = os.path.join(a.bin, "snug")
    rows = []
    flags = "--model gpt2-124m --seq-len 1024 --per-device-train-batch-size 16"
    d = os.path.join(a.out, "speed")
    os.makedirs(d, exist_ok=True)
    # In the order given, repeats included: "fp32,fp32-tiled-pairs,fp32,fp32-tiled-pairs"
    # alternates two variants in one call.
    for i, mode in enumerate(a.speed_modes):
        if mode not in SPEED_MODES:
            rows.append({"engine": "snug", "mode": mode, "err": "unknown speed mode"})
            continue
        extra, env = SPEED_MODES[mode]
        for var in ("SNUG_CUDA_FLASH", "SNUG_CUDA_CUDNN", "SNUG_CUDA_ALLOC"):
            os.environ.pop(var, None)
        os.environ.update(env)
        steps = a.speed_steps + 3
        rg, rep = train(snug, "cuda", flags, f"{d}/snug_{i}_{mode}.json", steps=steps,
                        timeout=240, extra=extra)
        row = snug_speed_row(rg, rep, 16 * 1024, mode=mode)
        rows.append(row)
        for var in env:
            os.environ.pop(var, None)
        print(f"speed snug {mode}: {row.get('tokens_per_second')} tok/s, peak "
              f"{row.get('peak_bytes')}", flush=True)
    for mode in a.torch_modes:
        rows.append(torch_row(a, mode, 300))
    res["speed"] = rows


LORA_FLAGS = ("--model qwen2-0.5b --torch-dtype bfloat16 --bf16 --lora-r 16 --lora-alpha 32 "
              "--target-modules all-linear --seq-len 512 --per-device-train-batch-size 4")


def part_lora(a, res):
    """Acceptance 4's LoRA row: snug and PEFT on the same shape, tokens/s median and peaks,
    alternating --lora-reps times (PEFT's rate moved from 9.3K to 17.0K tokens/s between calls
    of the fourteenth session: its step waits on Python launches, so one pair is not enough)."""
    snug = os.path.join(a.bin, "snug")
    d = os.path.join(a.out, "lora")
    os.makedirs(d, exist_ok=True)
    rows = []
    for rep_i in range(a.lora_reps):
        rg, rep = train(snug, "cuda", LORA_FLAGS, f"{d}/snug_{rep_i}.json",
                        steps=a.speed_steps + 3, timeout=300)
        row = snug_speed_row(rg, rep, 4 * 512, flags=LORA_FLAGS)
        rows.append(row)
        print(f"lora snug: {row.get('tokens_per_second')} tok/s, peak {row.get('peak_bytes')}",
              flush=True)
        r = run(f"python3 {HERE}/torch_lora_cuda.py --steps {a.speed_steps}", 300)
        try:
            t = json.loads(r["out"].strip().splitlines()[-1])
            t["engine"] = "peft"
        except Exception:
            t = {"engine": "peft", "rc": r["rc"], "err": r["err"][-800:]}
        rows.append(t)
        print(f"lora peft: {t.get('tokens_per_second')} tok/s, peak "
              f"{t.get('max_memory_allocated')}", flush=True)
    res["lora"] = rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parts", nargs="*", default=["ops", "parity", "memory", "speed"])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "gpu-check"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/snug-gpu-check"))
    ap.add_argument("--json", help="where the summary goes (default: OUT/check.json)")
    ap.add_argument("--memcheck", type=int, default=1)
    ap.add_argument("--memcheck-timeout", type=int, default=150)
    # NcclWorldOfOne.*: NCCL's own start-up asks for kernels of other architectures
    # (cudaErrorNoKernelImageForDevice inside pncclCommInitRank), which memcheck reports as 8
    # API errors that are not snug's.
    ap.add_argument("--memcheck-filter", default="*-NcclWorldOfOne.*")
    ap.add_argument("--ops-filter", default="*")
    ap.add_argument("--racecheck-filter", default="*CudaFlashCase*float4*",
                    help="the tests of the racecheck part (gtest filter)")
    ap.add_argument("--racecheck-kernels", default="tiled_",
                    help="substring of the kernel names racecheck instruments")
    ap.add_argument("--racecheck-timeout", type=int, default=120)
    ap.add_argument("--speed-steps", type=int, default=10)
    ap.add_argument("--lora-reps", type=int, default=1,
                    help="snug and PEFT LoRA runs alternated this many times")
    ap.add_argument("--hf-device", default="cuda",
                    help="where the hf part's transformers models compute their loss")
    ap.add_argument("--only", default="", help="comma-separated configuration names of the "
                    "parity, resume, memory and scale parts to run (default: all)")
    ap.add_argument("--speed-modes", default="fp32,bf16",
                    help="snug's rows of the speed part, run in this order (a mode may repeat, to "
                    "alternate variants): " + ", ".join(SPEED_MODES))
    ap.add_argument("--torch-modes", default="fp32,bf16,compile")
    ap.add_argument("--profile-modes", default="fp32")
    ap.add_argument("--torch-profile", type=int, default=0)
    ap.add_argument("--ncu-filter", default="", help="comma-separated kernels of the ncu part "
                    "(default: all of NCU_KERNELS)")
    ap.add_argument("--profile-steps", type=int, default=5,
                    help="steady-state steps profiled after the first (subtracted) one")
    a = ap.parse_args()
    a.profile_modes = a.profile_modes.split(",") if a.profile_modes else []
    a.speed_modes = a.speed_modes.split(",") if a.speed_modes else []
    a.torch_modes = a.torch_modes.split(",") if a.torch_modes else []
    os.makedirs(a.out, exist_ok=True)
    res = {"parts": a.parts}
    smi = run("nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader", 30)
    res["gpu"] = smi["out"].strip()
    res["cpu"] = run("grep -m1 'model name' /proc/cpuinfo", 5)["out"].strip()
    res["info"] = run(f"{os.path.join(a.bin, 'snug')} info", 30)["out"][-2000:]
    for part in a.parts:
        t0 = time.time()
        try:
            globals()["part_" + part](a, res)
        except Exception as e:  # a broken part is recorded, the others still run
            res.setdefault("errors", {})[part] = repr(e)
        res.setdefault("seconds", {})[part] = round(time.time() - t0, 1)
        with open(a.json or os.path.join(a.out, "check.json"), "w") as f:
            json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k in ("gpu", "seconds", "errors")}))


if __name__ == "__main__":
    sys.exit(main())
