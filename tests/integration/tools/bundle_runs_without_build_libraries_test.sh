#!/usr/bin/env bash
# tools/bundle.sh's bundle runs where none of the build's libraries are: in a root that holds only
# glibc, libstdc++, libgcc_s and the loader (and, for a CUDA build, the CUDA libraries a GPU node
# brings), entered with chroot inside a private mount namespace (unshare --mount; /proc and /dev
# bound in, the system libraries bound file by file). There the loader finds none of the bundled
# libraries (each reported "not found" for the bundled tandem copied outside the bundle, and for
# the bundled libraries that need one another), that copy cannot start, and the bundled tandem
# prints its version and runs the default recipe (configs/recipes/tiny-cpu.yaml) cut short by
# key=value overrides to the end. Usage: TEST TANDEM_BINARY.
#
# Needs root, unshare and chroot; without them it exits 77 (CTest: skipped), saying why, unless
# TANDEM_CI_NO_SKIP=1, which makes that a failure.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../../.." && pwd)"
tandem="$1"
build="$(cd "$(dirname "$tandem")" && pwd)"
skip() {
  if [ "${TANDEM_CI_NO_SKIP:-0}" = 1 ]; then
    echo "FAILED: cannot run here ($1), and TANDEM_CI_NO_SKIP=1 makes that a failure" >&2
    exit 1
  fi
  echo "skipped: $1"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (chroot and bind mounts in a private mount namespace)"
for tool in unshare chroot mount ldd; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done
msg="$(unshare --mount true 2>&1)" || skip "unshare --mount is not permitted here: $msg"
# In the build directory, where programs may run (a temporary directory may be mounted noexec).
work="$(mktemp -d "$build/bundle_test.XXXXXX")"
trap 'rm -rf "$work"' EXIT  # the bind mounts live and die with the namespace: here the files are empty
root="$work/root"
fail() { echo "FAILED: $1" >&2; [ -z "${2:-}" ] || { echo "--- output:" >&2; cat "$2" >&2; }; exit 1; }

# The bundle, made inside the root.
mkdir -p "$root/opt"
"$source_dir/tools/bundle.sh" "$root/opt/tandem" "$build" >"$work/bundle.txt" 2>&1 || fail "tools/bundle.sh failed" "$work/bundle.txt"
cat "$work/bundle.txt"
rm -f "$root/opt/tandem.tar.xz"
bundle="$root/opt/tandem"
for f in bin/tandem configs/recipes/tiny-cpu.yaml configs/models/tiny-arithmetic/config.json tools/launch/slurm/run.sh; do
  [ -e "$bundle/$f" ] || fail "the bundle has no $f"
done
bundled=()
for lib in "$bundle"/lib/*; do bundled+=("$(basename "$lib")"); done
[ ${#bundled[@]} -gt 0 ] || fail "the bundle's lib/ is empty"
source "$source_dir/tools/bundle_libraries.sh"
for name in "${bundled[@]}"; do
  ! bundle_provided "$name" || fail "the bundle holds $name, which a node brings itself"
done
[ "$(readelf -d "$bundle/bin/tandem" | grep -E '\((RPATH|RUNPATH)\)' | awk '{ print $2, $NF }')" = '(RPATH) [$ORIGIN/../lib]' ] ||
  fail "bin/tandem's search path is not RPATH \$ORIGIN/../lib: $(readelf -d "$bundle/bin/tandem" | grep -E 'PATH')"

# The root: the libraries the bundled tandem loads from outside the bundle (all provided ones), in
# the directory where glibc lives, and the loader at the path the program names.
interpreter="$(readelf -l "$bundle/bin/tandem" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')"
libc_dir=""
: >"$work/binds"
while read -r soname path; do
  case "$path" in "$bundle"/*) continue ;; not-found) fail "the bundled tandem cannot find $soname here" ;; esac
  bundle_provided "$path" || fail "the bundled tandem loads $soname from $path, outside the bundle"
  [ "$soname" != libc.so.6 ] || libc_dir="$(dirname "$path")"
  echo "$path $soname" >>"$work/binds"
done < <(bundle_ldd "$bundle/bin/tandem" | while read -r s p; do echo "$s $(realpath -m "$p")"; done)
[ -n "$libc_dir" ] && [ -n "$interpreter" ] || fail "cannot tell where glibc and the loader are"
mkdir -p "$root$libc_dir" "$root$(dirname "$interpreter")" "$root/proc" "$root/dev" "$root/tmp" "$root/run" "$root/opt/bare/bin"
chmod 1777 "$root/tmp"
binds=()
while read -r path soname; do
  touch "$root$libc_dir/$soname"
  binds+=("$path" "$root$libc_dir/$soname")
done <"$work/binds"
[ -e "$root$interpreter" ] || touch "$root$interpreter"
binds+=("$(realpath "$interpreter")" "$root$interpreter")
cp "$bundle/bin/tandem" "$root/opt/bare/bin/tandem"  # the same program without the bundle's lib/

# in_root LOG CMD...: CMD in the root, with a clean environment; its output in LOG; its status.
in_root() {
  local log=$1
  shift
  unshare --mount bash -c '
    set -e
    root=$1 n=$2
    shift 2
    while [ "$n" -gt 0 ]; do mount --bind "$1" "$2"; shift 2; n=$((n - 2)); done
    mount --rbind /proc "$root/proc"
    mount --rbind /dev "$root/dev"
    exec env -i HOME=/tmp PATH=/opt/tandem/bin "$(command -v chroot)" "$root" "$@"
  ' in_root "$root" "${#binds[@]}" "${binds[@]}" "$@" >"$log" 2>&1
}

# 1. The root cannot load any bundled library: its loader, asked to preload each of them by name
# for the bare copy (whose $ORIGIN/../lib does not exist), reports every one not found; for the
# bundled tandem it finds them all. The bare copy then stops at its first missing library.
in_root "$work/preload_bare.txt" "$interpreter" --preload "${bundled[*]}" /opt/bare/bin/tandem --version || true
for name in "${bundled[@]}"; do
  grep -q "object '$name' from --preload cannot be preloaded (cannot open shared object file)" "$work/preload_bare.txt" ||
    fail "the root's loader finds $name outside the bundle" "$work/preload_bare.txt"
done
echo "the root's loader finds none of the ${#bundled[@]} bundled libraries outside the bundle: ${bundled[*]}"
in_root "$work/preload_bundle.txt" "$interpreter" --preload "${bundled[*]}" /opt/tandem/bin/tandem --version ||
  fail "the bundled tandem with its libraries preloaded did not start in the root" "$work/preload_bundle.txt"
! grep -q "cannot be preloaded" "$work/preload_bundle.txt" || fail "the bundled tandem misses a library of its lib/" "$work/preload_bundle.txt"
if in_root "$work/bare.txt" /opt/bare/bin/tandem --version; then
  fail "tandem without the bundle's lib/ started in the root" "$work/bare.txt"
fi
grep -q "error while loading shared libraries: .*cannot open shared object file" "$work/bare.txt" ||
  fail "tandem without the bundle's lib/ failed otherwise than for a missing library" "$work/bare.txt"
echo "without the bundle's lib/: $(cat "$work/bare.txt")"

# 2. The bundle runs there.
in_root "$work/version.txt" /opt/tandem/bin/tandem --version || fail "the bundled tandem --version failed in the root" "$work/version.txt"
echo "the bundled tandem --version in the root: $(head -n 1 "$work/version.txt")"
started=$SECONDS
in_root "$work/run.txt" /opt/tandem/bin/tandem run /opt/tandem/configs/recipes/tiny-cpu.yaml \
  sft.max_num_steps=8 grpo.max_num_steps=2 grpo.val_period=2 grpo.val_batch_size=64 logger.log_dir=/run/tiny-cpu ||
  fail "the bundled tandem did not run the default recipe in the root" "$work/run.txt"
grep -q "8 warm-up and 2 RL steps done" "$work/run.txt" || fail "no summary line" "$work/run.txt"
grep -q "tandem run: final weights in /run/tiny-cpu/final_weights" "$work/run.txt" || fail "no final weights line" "$work/run.txt"
[ "$(wc -l <"$root/run/tiny-cpu/metrics.jsonl")" -ge 2 ] || fail "no metrics written" "$work/run.txt"
echo "the bundled tandem ran tiny-cpu.yaml (8 warm-up + 2 RL steps) in the root in $((SECONDS - started)) s: $(tail -n 1 "$work/run.txt")"
echo "ok"
