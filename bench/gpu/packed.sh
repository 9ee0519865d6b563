#!/usr/bin/env bash
# On the GPU machine: unpacks .gpu/bins.tar.xz (bench/gpu/pack.sh) and runs check.sh on one of
# its builds, the JSON going to $OUT (the device tool brings $OUT back):
#   bench/gpu/packed.sh [--build NAME] PART... [check.py options]
# e.g. run(command="bench/gpu/packed.sh ops --ops-filter 'CudaLinear.*'", carry=[".gpu"]).
# NAME defaults to `head`. The JSON is $OUT/NAME-<time>.json, so that several calls of one
# script keep their files apart. The builds unpack to SNUG_PACKED_DIR (default /tmp/snug-packed),
# a folder of their own: it is emptied whenever the archive differs from the one unpacked there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
name=head
if [ "${1:-}" = "--build" ]; then
  name=$2
  shift 2
fi
bins=${SNUG_PACKED_DIR:-/tmp/snug-packed}
# Unpacked once per archive: a call after a new pack (the machine stays warm between calls) must
# not run the builds of the one before, so the folder keeps the archive's checksum.
sum=$(sha256sum "$root/.gpu/bins.tar.xz" | cut -d' ' -f1)
if [ "$(cat "$bins/.archive" 2>/dev/null)" != "$sum" ]; then
  rm -rf "$bins"
  mkdir -p "$bins"
  tar -C "$bins" -xJf "$root/.gpu/bins.tar.xz"
  echo "$sum" > "$bins/.archive"
fi
[ -x "$bins/$name/snug" ] || { echo "packed.sh: no build '$name' in .gpu/bins.tar.xz" >&2; exit 2; }
out=${OUT:-/tmp/snug-gpu-check}
exec "$root/bench/gpu/check.sh" "$@" --bin "$bins/$name" --out "$out" \
  --json "$out/$name-$(date +%H%M%S).json"
