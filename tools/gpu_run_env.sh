# Sourced by the scripts that run a bundle's programs on a GPU machine (tools/gpu_check.sh,
# tools/gpu_compare.sh): the libraries the programs load (the bundle's, cuDNN from torch's
# nvidia-cudnn wheel where it is installed, the CUDA toolkit's), NCCL without NVLink multicast, and
# run, which runs one program under a time limit with its output in a log and prints one line of
# status. The sourcing script sets `bundle` and `logs` first and reads `failed` at the end.
cudnn_lib=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(os.path.dirname(nvidia.cudnn.__file__), "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$bundle/lib:${cudnn_lib:+$cudnn_lib:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0
failed=0
run_name_width=${run_name_width:-28}
# run NAME COMMAND...: COMMAND under GPU_CHECK_TIMEOUT seconds (default 300; rc 124 when hit), its
# output in $logs/NAME.log; prints NAME, the status, the seconds and the log's last line that is
# not blank (Boost.Test's summary ends in blank lines); a nonzero status sets failed=1.
run() {
  local name=$1; shift
  local start=$SECONDS
  timeout "${GPU_CHECK_TIMEOUT:-300}" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  printf "%-${run_name_width}s rc %-3s %4ss  %s\n" "$name" "$rc" "$((SECONDS - start))" "$(grep -v '^[[:space:]]*$' "$logs/$name.log" | tail -n 1)"
  [ "$rc" -eq 0 ] || failed=1
}
