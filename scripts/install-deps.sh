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
((${#missing[@]} == 0)) && exit 0
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
