#!/usr/bin/env bash
# Alternates two builds' train_step_bench on one benchmark and prints each run's seconds per
# step (Google Benchmark's real time, mean of its iterations) and the median ratio new/old: the
# "within N% of before" check of issue 16, acceptance 6. Run it on an idle machine, both builds
# on the same one (configure the old one with -DSNUG_BENCHMARKS=ON if its bench/ is missing).
#   bench/train_step_pairs.sh OLD/bench/train_step_bench NEW/bench/train_step_bench FILTER [PAIRS]
#   e.g. FILTER 'gpt2_124m_B4_T256/' (fp32) or 'gpt2_124m_B4_T256_bf16'
set -euo pipefail
old=$1 new=$2 filter=$3 pairs=${4:-5}
grep -m1 "model name" /proc/cpuinfo; grep -m1 -E "^cpu family" /proc/cpuinfo; grep -m1 -E "^model\s" /proc/cpuinfo
t() { "$1" --benchmark_filter="$filter" --benchmark_format=json 2>/dev/null | python3 -c 'import json,sys; b=json.load(sys.stdin)["benchmarks"][0]; print(b["real_time"]/1e3 if b["time_unit"]=="ms" else b["real_time"])'; }
rs=()  # ratios
for i in $(seq 1 "$pairs"); do a=$(t "$old"); b=$(t "$new"); r=$(python3 -c "print($b/$a)"); rs+=("$r"); echo "pair $i: old $a new $b new/old $r"; done
python3 -c "import statistics,sys; print('median new/old: %.4f' % statistics.median(map(float, sys.argv[1:])))" "${rs[@]}"
