#!/usr/bin/env bash
# What issue 27 still owes a GPU (fifteenth session: no GPU was lent), in one device call of about 8
# minutes. Pack first (bench/gpu/pack.sh, a build of d7f1e1d or later), then
#   run(command="bench/gpu/owed.sh", carry=[".gpu"])
# The LoRA row after the bf16 nn.Linear path and the one-wait gradient norm (7c24c20, 0839a7e),
# then the speed table, then the checks of those changes and of the bf16 optimizer steps' element
# offset (5189f0d: CudaOptim.*Bf16*); each part saves its JSON to $OUT as it
# ends, with the log in $OUT/log.txt.
R=$OUT; export OUT=/tmp/w; mkdir -p $OUT
P=bench/gpu/packed.sh
save() { cp $OUT/head-*.json $R/ 2>/dev/null; }
log() { echo "=== $(date +%T) $*"; }
{
log start; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
log lora
timeout 200 $P lora --lora-reps 3; save
log speed
timeout 150 $P speed --speed-modes fp32,bf16 --torch-modes fp32,bf16; save
log ops
timeout 60 $P ops --ops-filter 'CudaLinear.*:CudaElementwise.*:*CudaFlash*:CudaOptim.*Bf16*'; save
cp $OUT/ops_stdout.txt $R/ 2>/dev/null
log parity-memory-resume
timeout 150 $P parity memory resume \
  --only llama,llama-lora,llama-qlora,llama-bf16,qwen2-bf16-base-lora,qwen2,bert-cls,bert-mlm,neox,mistral,gpt2-tiny-fp16,gpt2-tiny; save
log done
} 2>&1 | tee $R/log.txt
