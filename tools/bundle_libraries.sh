# shellcheck shell=bash
# Shared by tools/bundle.sh and tools/gpu_bundle.sh (sourced, not run): which libraries a target
# machine brings itself, copying the others that built programs load into a bundle's lib/, and
# pointing a program at that lib/ through its RPATH. Messages start with $bundle_name.
#
#   bundle_provided NAME_OR_PATH         true for glibc, libstdc++, libgcc_s, the loader, and the
#                                        CUDA and NVIDIA libraries (a GPU machine has its own)
#   bundle_copy_libraries LIB_DIR FILE...
#                                        copies every library FILE loads (as ldd resolves it here,
#                                        dependencies of dependencies included) that is not
#                                        provided into LIB_DIR under its soname; fails naming any
#                                        such library the loader cannot find
#   bundle_set_rpath FILE RPATH          makes RPATH FILE's DT_RPATH (not DT_RUNPATH: the loader
#                                        then searches it for the libraries loaded by libraries too)

bundle_name=${bundle_name:-tools/bundle_libraries.sh}

bundle_provided() {
  case "$1" in
    /usr/local/cuda*|*/cuda/lib*|*/cuda/targets/*) return 0 ;;
  esac
  case "$(basename "$1")" in
    ld-linux*|ld64.so*|libc.so*|libm.so*|libmvec.so*|libdl.so*|librt.so*|libpthread.so*|libresolv.so*) return 0 ;;
    libutil.so*|libanl.so*|libnss_*|libgcc_s.so*|libstdc++.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libcufft*|libcurand*|libcusolver*|libcusparse*) return 0 ;;
    libnccl*|libnvidia*|libnvrtc*|libnvJitLink*|libnvToolsExt*) return 0 ;;
  esac
  return 1
}

# "SONAME PATH" for each library FILE loads that ldd resolves; "SONAME not-found" for the others.
bundle_ldd() {
  local out
  if ! out=$(LC_ALL=C ldd "$1" 2>&1); then
    case "$out" in
      *"not a dynamic executable"*|*"statically linked"*) return 0 ;;
    esac
    echo "$bundle_name: ldd $1 failed: $out" >&2
    return 1
  fi
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 } $2 == "=>" && $3 == "not" { print $1, "not-found" }' <<<"$out"
}

bundle_copy_libraries() {
  local lib_dir=$1 file soname path missing="" pending
  shift
  pending=("$@")
  mkdir -p "$lib_dir"
  while [ ${#pending[@]} -gt 0 ]; do
    file=${pending[0]}
    pending=("${pending[@]:1}")
    local listing
    listing=$(bundle_ldd "$file") || return 1
    while read -r soname path; do
      [ -n "$soname" ] || continue
      if [ "$path" = not-found ]; then
        bundle_provided "$soname" || missing+="  $soname (needed by $file)"$'\n'
        continue
      fi
      bundle_provided "$path" && continue
      [ -e "$lib_dir/$soname" ] && continue
      cp -L "$path" "$lib_dir/$soname" || { echo "$bundle_name: cannot copy $path into $lib_dir" >&2; return 1; }
      chmod u+w "$lib_dir/$soname"
      pending+=("$lib_dir/$soname")
    done <<<"$listing"
  done
  if [ -n "$missing" ]; then
    printf '%s: the loader cannot find these libraries here (ldd says "not found"), so they cannot be bundled:\n%s' \
      "$bundle_name" "$missing" >&2
    return 1
  fi
}

bundle_set_rpath() {
  local file=$1 rpath=$2 rc=0 before after
  before=$(bundle_dynamic_view "$file")
  command -v python3 >/dev/null || rc=3
  [ $rc -ne 0 ] || python3 - "$file" "$rpath" <<'PY' || rc=$?
# Rewrites the DT_RUNPATH or DT_RPATH string of an ELF64 little-endian file in place (the new one
# must fit in the old one's bytes) and makes its tag DT_RPATH; further such entries are removed.
# Exit 3: no entry or no room (the caller falls back to patchelf).
import struct, sys
path, new = sys.argv[1], sys.argv[2].encode()
data = bytearray(open(path, "rb").read())
if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
    sys.exit("not a 64-bit little-endian ELF file")
phoff, = struct.unpack_from("<Q", data, 0x20)
phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
loads, dynamic = [], None
for i in range(phnum):
    p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
    if p_type == 1:
        loads.append((p_vaddr, p_offset, p_filesz))
    elif p_type == 2:
        dynamic = (p_offset, p_filesz)
if dynamic is None:
    sys.exit("no dynamic section")
def file_offset(vaddr):
    for v, o, n in loads:
        if v <= vaddr < v + n:
            return o + vaddr - v
    sys.exit("DT_STRTAB outside every loaded segment")
entries = []
for at in range(dynamic[0], dynamic[0] + dynamic[1], 16):
    tag, val = struct.unpack_from("<qQ", data, at)
    entries.append((tag, val))
    if tag == 0:
        break
strtab = file_offset(next(v for t, v in entries if t == 5))
paths = [i for i, (t, _) in enumerate(entries) if t in (15, 29)]
if not paths:
    sys.exit(3)
start = strtab + entries[paths[0]][1]
old = data.index(b"\0", start) - start
if len(new) > old:
    sys.exit(3)
data[start:start + old] = new + b"\0" * (old - len(new))
entries[paths[0]] = (15, entries[paths[0]][1])
kept = [e for i, e in enumerate(entries) if i not in paths[1:]]
kept += [(0, 0)] * (len(entries) - len(kept))
for i, (tag, val) in enumerate(kept):
    struct.pack_into("<qQ", data, dynamic[0] + 16 * i, tag, val)
open(path, "r+b").write(data)
PY
  if [ $rc -eq 0 ]; then
    # The edit must change the path and nothing else the loader reads (a string shared with the
    # old path would show here).
    after=$(bundle_dynamic_view "$file")
    if [ "$before" != "$after" ]; then
      echo "$bundle_name: setting the RPATH of $file in place changed more than the RPATH" >&2
      return 1
    fi
  elif [ $rc -eq 3 ]; then
    command -v patchelf >/dev/null || {
      echo "$bundle_name: cannot set the RPATH of $file in place (no python3, or no RPATH or RUNPATH" \
        "as long as $rpath to overwrite); install patchelf (Debian: apt-get install patchelf)" >&2
      return 1
    }
    patchelf --force-rpath --set-rpath "$rpath" "$file" || return 1
  else
    echo "$bundle_name: cannot set the RPATH of $file" >&2
    return 1
  fi
  if [ "$(LC_ALL=C readelf -W -d "$file" | awk '/\((RPATH|RUNPATH)\)/ { print $2 " " $NF }')" != "(RPATH) [$rpath]" ]; then
    echo "$bundle_name: $file does not have the RPATH $rpath after setting it" >&2
    return 1
  fi
}

# What the loader reads of FILE besides its RPATH/RUNPATH: the other dynamic entries, the dynamic
# symbols and the symbol versions.
bundle_dynamic_view() {
  LC_ALL=C readelf -W -d "$1" | grep -v -E '\((RPATH|RUNPATH)\)|contains [0-9]+ entries'
  LC_ALL=C readelf -W --dyn-syms -V "$1"
}
