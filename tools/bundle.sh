#!/usr/bin/env bash
# Makes a relocatable bundle of a build: a folder that runs on a node with none of tandem's build
# dependencies, only glibc, libstdc++ and libgcc_s (and, for a CUDA build, the NVIDIA driver and
# the CUDA 13 libraries, cuBLAS, cuBLASLt and NCCL, which a GPU node brings):
#
#   BUNDLE_DIR/bin/tandem        the build's tandem, debug info stripped, RPATH $ORIGIN/../lib
#   BUNDLE_DIR/lib/              every other library it loads (CAF, ZeroMQ, yaml-cpp, OpenBLAS,
#                                SentencePiece, ... and theirs), under their sonames
#   BUNDLE_DIR/configs/          the recipes and model presets (bin/tandem finds them there)
#   BUNDLE_DIR/tools/launch/     the cluster launchers
#
# Copy the folder anywhere (BUNDLE_DIR.tar.xz holds the same). It is written as BUNDLE_DIR.partial
# and renamed when complete; an existing BUNDLE_DIR is replaced.
#
#   tools/bundle.sh BUNDLE_DIR [BUILD_DIR]      (BUILD_DIR: $TANDEM_BUILD_DIR, else build)
set -euo pipefail
bundle_name=tools/bundle.sh
usage="usage: tools/bundle.sh BUNDLE_DIR [BUILD_DIR]"
[ $# -ge 1 ] && [ $# -le 2 ] && [ -n "$1" ] || { echo "$usage" >&2; exit 2; }
source_dir="$(cd "$(dirname "$0")/.." && pwd)"
source "$source_dir/tools/bundle_libraries.sh"
out=$(realpath -m -- "$1")
build=${2:-${TANDEM_BUILD_DIR:-$source_dir/build}}
[ -d "$build" ] || { echo "$bundle_name: no build directory $build (build first: tools/build.sh)" >&2; exit 1; }
[ -x "$build/tandem" ] || { echo "$bundle_name: $build/tandem is missing: build it first (tools/build.sh)" >&2; exit 1; }
for tool in ldd readelf strip tar xz; do
  command -v "$tool" >/dev/null || { echo "$bundle_name: $tool is not installed" >&2; exit 1; }
done
if [ -e "$out" ] && [ ! -x "$out/bin/tandem" ]; then
  echo "$bundle_name: $out exists and is not a bundle (no bin/tandem): not replacing it" >&2
  exit 1
fi
partial="$out.partial"
rm -rf "$partial" "$out.tar.xz.partial"
trap 'rm -rf "$partial" "$out.tar.xz.partial"' EXIT
mkdir -p "$partial/bin" "$partial/lib" "$partial/tools"
bundle_copy_libraries "$partial/lib" "$build/tandem"
cp -L "$build/tandem" "$partial/bin/tandem"
shopt -s nullglob
strip --strip-debug "$partial/bin/tandem" "$partial"/lib/*
bundle_set_rpath "$partial/bin/tandem" '$ORIGIN/../lib'
cp -R "$source_dir/configs" "$partial/configs"
cp -R "$source_dir/tools/launch" "$partial/tools/launch"
# The bundled tandem must load every library that is not the node's from lib/: its RPATH comes
# before every other place the loader looks, so ldd here must name lib/ for each.
while read -r soname path; do
  case "$(realpath -m -- "$path")" in
    "$partial"/lib/*) ;;
    */not-found) echo "$bundle_name: the bundled tandem cannot find $soname" >&2; exit 1 ;;
    *) bundle_provided "$path" || { echo "$bundle_name: the bundled tandem loads $soname from $path, not from lib/" >&2; exit 1; } ;;
  esac
done < <(bundle_ldd "$partial/bin/tandem")
rm -rf "$out" "$out.tar.xz"
mv "$partial" "$out"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 > "$out.tar.xz.partial"
mv "$out.tar.xz.partial" "$out.tar.xz"
trap - EXIT
echo "$bundle_name: tandem and $(ls "$out/lib" | wc -l) libraries, $(du -sh "$out" | cut -f1) in $out," \
  "$(du -sh "$out.tar.xz" | cut -f1) as $out.tar.xz"
