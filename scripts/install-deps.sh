#!/usr/bin/env bash
# Installs the Debian packages snug builds with, only when one is missing.
# Idempotent and quiet when everything is present.
set -euo pipefail
pkgs=(cmake ninja-build g++ libdnnl-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
      libbenchmark-dev liblapack-dev pkg-config libpcre2-dev libutf8proc-dev openmpi-bin
      libopenmpi-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# With the CUDA toolkit: NVIDIA's header-only cudnn-frontend (PyPI only), for the cuDNN attention
# of --bf16 GPU runs (CMake's SNUG_CUDNN=AUTO builds it when found; without it snug's own kernels
# run, so a failed install only says so).
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  if ! python3 - 2>/dev/null <<'PY'
import os, site, sys, sysconfig
dirs = [sysconfig.get_paths()["purelib"], site.getusersitepackages()]
sys.exit(0 if any(os.path.exists(os.path.join(d, "include", "cudnn_frontend.h")) for d in dirs) else 1)
PY
  then
    python3 -m pip install --user --quiet nvidia-cudnn-frontend 2>/dev/null ||
      python3 -m pip install --user --quiet --break-system-packages nvidia-cudnn-frontend ||
      echo "install-deps: nvidia-cudnn-frontend not installed: GPU --bf16 attention will run on" \
        "snug's own kernels" >&2
  fi
fi
((${#missing[@]} == 0)) && exit 0
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
