#!/usr/bin/env bash
# tools/gpu_compare.sh runs the named suites of a bundle, then each op prefix's benchmark rows of
# this build and of the previous one in turn, every round; it reports a failed suite in its exit
# status without stopping (a suite's line showing its log's last line that is not blank), reports
# a failed model save of --drift without running the drift, and refuses a missing bundle program,
# a missing previous benchmark, --base without rows and an unknown argument before running
# anything. The bundle is a stand-in:
# shell scripts that print what they were asked, so the test runs on any machine.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $1" >&2; [ -z "${2:-}" ] || { echo "--- output:" >&2; cat "$2" >&2; }; exit 1; }

bundle="$work/bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$work/fakebin"
# python3 that fails as the model save does without torch
printf '#!/usr/bin/env bash\necho "save_random_model.py: needs torch" >&2\nexit 2\n' > "$work/fakebin/python3"
chmod +x "$work/fakebin/python3"
cat > "$bundle/bin/tandem_gpu_cuda_tests" <<'SH'
#!/usr/bin/env bash
suite=${1#--run_test=}
echo "running $suite"
[ "$suite" != broken ] || { echo "*** 1 failure is detected in $suite"; exit 201; }
echo "*** No errors detected in $suite"
[ "$suite" != second ] || printf '\n  \n'  # a summary that ends in blank lines, as Boost.Test's
SH
bench() {  # a stand-in benchmark that prints its build's name in its rows
  cat > "$1" <<SH
#!/usr/bin/env bash
echo "log noise"
echo "ceiling: device-to-device copy (\$2)"
echo "\${2}_op            [4, 8]     0.1 ms   $2 build"
SH
  chmod +x "$1"
}
bench "$bundle/bin/cuda_ops_bench" new
bench "$work/old_bench" old
chmod +x "$bundle/bin/tandem_gpu_cuda_tests"
cd "$work"

"$source_dir/tools/gpu_compare.sh" "$bundle" "$work/logs" --suite first --suite second --only norm --only attention \
  --base "$work/old_bench" --rounds 2 > out.txt 2>&1 || fail "a passing run failed" out.txt
grep -q "^first .*rc 0 .*No errors detected in first" out.txt || fail "suite first not reported" out.txt
grep -q "^second .*rc 0 .*No errors detected in second" out.txt || fail "suite second's last line that is not blank not reported" out.txt
# rows in order: for each round, each prefix: this build's, then the previous build's
got=$(grep -E '^[a-z]+_op ' out.txt | awk '{print $1, $(NF - 1)}' | tr '\n' ';')
want="norm_op new;norm_op old;attention_op new;attention_op old;norm_op new;norm_op old;attention_op new;attention_op old;"
[ "$got" = "$want" ] || fail "rows out of order: $got" out.txt
grep -q "log noise" out.txt && fail "the summary repeats a benchmark's log lines" out.txt
[ -f "$work/logs/bench_base_attention_2.log" ] || fail "the previous build's log is not kept" out.txt

if "$source_dir/tools/gpu_compare.sh" "$bundle" "$work/logs2" --suite broken --suite after > bad.txt 2>&1; then
  fail "a failed suite gave exit status 0" bad.txt
fi
grep -q "^broken .*rc 201" bad.txt || fail "the failed suite's status is not reported" bad.txt
grep -q "^after .*rc 0" bad.txt || fail "a failed suite stopped the suites after it" bad.txt

# --drift saves the E2B model with transformers first: here (no torch, or no model saved) that step
# fails, is reported, and the drift itself is not run over a model that is not there.
GPU_COMPARE_E2B_DIR="$work/e2b" PATH="$work/fakebin:$PATH" "$source_dir/tools/gpu_compare.sh" "$bundle" "$work/logs4" \
  --suite none --drift > drift.txt 2>&1 && fail "a failed model save gave exit status 0" drift.txt
grep -q "^e2b_save .*rc [1-9]" drift.txt || fail "the failed model save is not reported" drift.txt
grep -q "^trace_drift" drift.txt && fail "the drift ran without a saved model" drift.txt
[ ! -e "$work/e2b" ] || fail "a failed save left a model directory behind" drift.txt

expect_refusal() {  # message, arguments...
  local message=$1; shift
  local rc=0
  "$source_dir/tools/gpu_compare.sh" "$@" > refused.txt 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "exit status $rc, not 2, for: $*" refused.txt
  grep -q -- "$message" refused.txt || fail "no '$message' for: $*" refused.txt
  grep -q "^running" refused.txt && fail "a suite ran before the refusal of: $*" refused.txt
  return 0
}
expect_refusal "is missing or not executable" "$bundle" "$work/logs3" --only norm --base "$work/no_such_bench"
expect_refusal "name them with --only" "$bundle" "$work/logs3" --base "$work/old_bench"
expect_refusal "unknown argument --fast" "$bundle" "$work/logs3" --fast
expect_refusal "positive count" "$bundle" "$work/logs3" --rounds 0
expect_refusal "tandem_gpu_cuda_tests is missing" "$work/empty" "$work/logs3"
echo "ok: suites (their last line that is not blank), then both builds' rows in turn; a failed suite reported; a failed model save reported before the drift; bad arguments refused"
