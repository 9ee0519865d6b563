#!/usr/bin/env bash
# Prints the per-step losses of two snug builds on gpt2-124m for the configurations a refactor
# must keep bit-identical (issue 16, acceptance 1), and whether each pair matches exactly.
#   bench/loss_parity.sh OLD_SNUG NEW_SNUG [STEPS]
# Run both builds on one machine: GEMM results differ between CPUs.
set -euo pipefail
old=$1 new=$2 steps=${3:-3}
configs=("" "--bf16" "--gradient-checkpointing" "--lora-r 8" "--qlora" "--optim lomo")
status=0
for cfg in "${configs[@]}"; do
  losses() {
    local report
    report=$(mktemp)
    # shellcheck disable=SC2086
    "$1" train --model gpt2-124m --data dummy --max-steps "$steps" $cfg --report-json "$report" \
      >/dev/null 2>&1 || true
    python3 -c 'import json, sys; print(" ".join(repr(x) for x in json.load(open(sys.argv[1]))["loss"]))' \
      "$report"
    rm -f "$report"
  }
  a=$(losses "$old") b=$(losses "$new")
  same=$([[ "$a" == "$b" ]] && echo identical || echo DIFFERENT)
  [[ "$same" == identical ]] || status=1
  printf '%-26s old: %s\n%-26s new: %s  %s\n' "${cfg:-fp32}" "$a" "" "$b" "$same"
done
exit $status
