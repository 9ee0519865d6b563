#!/usr/bin/env bash
# Packs the check build for the GPU machine, whose transfer is limited to 64 MiB:
#   bench/gpu/pack.sh [NAME]
# builds `snug` and `snug_cuda_tests` of the gpu-check preset (or of SNUG_BUILD), strips them
# (about 24 MB -> 6 MB under xz) and adds them to .gpu/bins.tar.xz as NAME/snug and
# NAME/tests/snug_cuda_tests (NAME defaults to `head`). Builds packed earlier under other names
# stay, for alternating old and new builds in one call: pack, check out the other commit, pack
# again under another name. .gpu/ is ignored by git, so the device tool carries it only when
# asked to: there, bench/gpu/packed.sh unpacks it and runs check.sh on it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${SNUG_BUILD:-$root/build/gpu-check}
name=${1:-head}
[ -f "$build/build.ninja" ] || cmake --preset gpu-check -S "$root"
cmake --build "$build" --target snug snug_cuda_tests
mkdir -p "$root/.gpu"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# An earlier pack's other builds stay in the archive.
[ -f "$root/.gpu/bins.tar.xz" ] && tar -C "$stage" -xJf "$root/.gpu/bins.tar.xz"
rm -rf "${stage:?}/$name"
mkdir -p "$stage/$name/tests"
strip -o "$stage/$name/snug" "$build/snug"
strip -o "$stage/$name/tests/snug_cuda_tests" "$build/tests/snug_cuda_tests"
git -C "$root" rev-parse --short HEAD > "$stage/$name/commit"
tar -C "$stage" -cJf "$root/.gpu/bins.tar.xz" .
ls -l "$root/.gpu/bins.tar.xz"
echo "builds: $(cd "$stage" && ls -d */ | tr -d / | tr '\n' ' ')"
