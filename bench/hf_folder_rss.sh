#!/usr/bin/env bash
# Issue 17, acceptance 5 (docs/memory.md, "Loading a 1.3B folder for QLoRA"): write a 1.3B
# GPT-2-shaped bf16 model folder with `snug export-init`, then load it for a 4-bit QLoRA run of a
# couple of steps and measure the peak RSS (/usr/bin/time -v), against the bound "the 4-bit model
# + its largest tensor in fp32 + 1 GiB". Needs about 2.7 GB of disk for the folder (removed at the
# end) and 6 GB of memory for the export (a bf16 model of 1.3B parameters).
#   bench/hf_folder_rss.sh [build/release/snug] [work dir]
set -euo pipefail
SNUG=${1:-build/release/snug}
WORK=${2:-$(mktemp -d)}
DIR=$WORK/gpt2-1.3b-bf16
SHAPE="--model gpt2-124m --n-layer 24 --n-embd 2048 --n-head 16 --n-positions 2048"
grep -m1 'model name' /proc/cpuinfo
df -h "$WORK" | tail -1
/usr/bin/time -v "$SNUG" export-init $SHAPE --bf16-full --seed 1 --max-shard-size 1GB -o "$DIR" \
  2> "$WORK/export.time"
grep -E 'Maximum resident|Elapsed' "$WORK/export.time"
ls -l "$DIR"
/usr/bin/time -v "$SNUG" train --model "$DIR" --qlora --max-steps 2 \
  --per-device-train-batch-size 1 --seq-len 64 --report-json "$WORK/qlora.json" \
  2> "$WORK/train.time"
grep -E 'Maximum resident|Elapsed' "$WORK/train.time"
python3 - "$WORK/qlora.json" "$WORK/train.time" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read()).group(1))
m = r["memory"]
print("max_by_category:", json.dumps(m["max_by_category"]))
print("peak_bytes:", m["peak_bytes"], "report peak_rss_bytes:", m.get("peak_rss_bytes"))
print("peak RSS (time -v) bytes:", rss_kb * 1024)
PY
rm -rf "$DIR"
