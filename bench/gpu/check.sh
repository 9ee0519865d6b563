#!/usr/bin/env bash
# The GPU checks of issue 27, in one call on the GPU machine (under 5 minutes):
#   bench/gpu/check.sh [ops] [parity] [memory] [speed] [lora] [ncu] [...] [check.py options]
# Reads the check build (preset gpu-check: build/gpu-check, or SNUG_BUILD) and writes
# $OUT/check.json (OUT defaults to /tmp/snug-gpu-check). What each part does: bench/gpu/check.py.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# cuBLASLt of the machine's CUDA runtime: the toolkit's, or the one PyTorch's wheels carry.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null); do
  if [ -e "$d/libcublasLt.so.13" ]; then export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"; break; fi
done
# cuDNN (opened at run time by the cuDNN attention of --bf16 runs, kernels/cuda/cudnn_attention.h)
# and the shared CUDA runtime its frontend opens: PyTorch's wheels carry both.
for pkg in nvidia.cudnn nvidia.cuda_runtime; do
  d=$(python3 -c "import $pkg, os; print(os.path.join($pkg.__path__[0], 'lib'))" 2>/dev/null)
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
exec python3 "$here/check.py" "$@"
