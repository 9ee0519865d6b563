#!/usr/bin/env bash
# Alternates two snug builds on the same training job and prints each run's seconds per step
# (the report's train_runtime / steps; the first step's warm-up is inside both alike) and the
# median ratio new/old. For "within N% of before" claims (issue 16, acceptance 6); run it on an
# idle machine, both builds on the same one.
#   bench/speed_pairs.sh OLD_SNUG NEW_SNUG [PAIRS] [extra train flags...]
# The job is gpt2-124m, B 4, T 256, 7 steps on dummy data plus the extra flags; extra flags that
# name a --model give the whole job instead (snug takes each flag once).
set -euo pipefail
old=$1 new=$2 pairs=${3:-5}
shift 3 || shift $#
flags=(--model gpt2-124m --data dummy --per-device-train-batch-size 4 --seq-len 256 --max-steps 7 "$@")
for f in "$@"; do [ "$f" = --model ] && flags=("$@"); done
grep -m1 "model name" /proc/cpuinfo
grep -m1 -E "^cpu family" /proc/cpuinfo; grep -m1 -E "^model\s" /proc/cpuinfo
step_time() {
  local report
  report=$(mktemp)
  "$1" train "${flags[@]}" --report-json "$report" >/dev/null 2>&1
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["train_runtime"]/max(1,r["steps"]))' "$report"
  rm -f "$report"
}
ratios=()
for i in $(seq 1 "$pairs"); do
  a=$(step_time "$old") b=$(step_time "$new")
  r=$(python3 -c "print($b/$a)")
  ratios+=("$r")
  printf 'pair %d: old %.3f s/step  new %.3f s/step  new/old %.4f\n' "$i" "$a" "$b" "$r"
done
python3 -c "import statistics,sys; print('median new/old: %.4f' % statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
