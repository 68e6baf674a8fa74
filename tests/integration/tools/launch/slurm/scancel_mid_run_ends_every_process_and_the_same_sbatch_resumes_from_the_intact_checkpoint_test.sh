#!/usr/bin/env bash
# `scancel JOBID` of a run launched by tools/launch/slurm/run.sh under a real Slurm
# (slurm_cluster.sh), mid-run and after periodic checkpoints (every 4 steps): the job ends
# CANCELLED, the controller and every member are gone, the newest checkpoint is complete (no
# half-written one in its place), and the same sbatch command, submitted again, resumes from it
# and completes with the metrics of a local uninterrupted run, record for record (timings and byte
# counts aside). Usage: TEST TANDEM_BINARY. Needs root and slurm-wlm and munge; else skipped (77),
# or a failure with TANDEM_CI_NO_SKIP=1.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../../../../.." && pwd)"
# shellcheck source=tests/integration/tools/launch/slurm/slurm_cluster.sh
source "$source_dir/tests/integration/tools/launch/slurm/slurm_cluster.sh"
sl_begin "$1"
recipe="$source_dir/configs/recipes/tiny-cpu-ci.yaml"
keys=(cluster.num_nodes=2 cluster.gpus_per_node=1 grpo.max_num_steps=30 checkpointing.enabled=true
  checkpointing.save_period=4)
run="$sl_work/run"
cd "$sl_work"
submit() {
  sbatch --parsable --nodes=2 --exclusive -o "$sl_work/job$1.out" "$source_dir/tools/launch/slurm/run.sh" \
    "$recipe" "${keys[@]}" "cluster.controller_port=$sl_port" "logger.log_dir=$run"
}
job="$(submit 1)"
ctl_log="$sl_work/.tandem/job-$job/attempt-0/controller-on-n1.log"
# After the RL phase's first checkpoint (step 44: 40 warm-up steps and 4 RL steps).
sl_wait_file "$ctl_log" 'checkpoint step_44 ' 120 || sl_fail "no checkpoint step_44 in the first job" "$sl_work/job1.out" "$ctl_log"
scancel "$job"
cancelled_at=$SECONDS
sl_wait_end "$job" 120
[ "$sl_state" = CANCELLED ] || sl_fail "the cancelled job ended $sl_state" "$sl_work/job1.out"
grep -qE ' 70 RL steps done|30 RL steps done' "$ctl_log" && sl_fail "the run completed before scancel" "$ctl_log"
echo "the job ended $sl_state, its processes gone $((SECONDS - cancelled_at)) s after scancel, after: $(grep -E 'checkpoint step_[0-9]+ .* saved' "$ctl_log" | tail -1)"
# Every process of the run is gone: the controller (the launcher's child) and the members.
pids="$(sed -nE 's/.*member [0-9]+ \[[^]]*\] \(pid ([0-9]+) on .*joined$/\1/p' "$ctl_log" | sort -u | tr '\n' ' ')"
[ "$(wc -w <<<"$pids")" = 2 ] || sl_fail "cannot read the two members' pids" "$ctl_log"
for pid in $pids; do
  ! kill -0 "$pid" 2>/dev/null || sl_fail "member pid $pid outlived the cancelled job" "$ctl_log"
done
controller="$(sed -n 's/.*run.sh: the controller: pid \([0-9]*\),.*/\1/p' "$sl_work/job1.out")"
[ -n "$controller" ] || sl_fail "the launcher does not say the controller's pid" "$sl_work/job1.out"
! kill -0 "$controller" 2>/dev/null || sl_fail "the controller (pid $controller) outlived the cancelled job" "$sl_work/job1.out"
newest=""
for dir in "$run"/checkpoints/step_*; do
  [[ "${dir##*_}" =~ ^[0-9]+$ ]] || continue  # not step_N.partial
  if [ -z "$newest" ] || [ "${dir##*_}" -gt "${newest##*_}" ]; then newest="$dir"; fi
done
[ -n "$newest" ] && [ -e "$newest/manifest.json" ] || sl_fail "no complete checkpoint after scancel: $(ls "$run/checkpoints")"
echo "newest checkpoint: $(basename "$newest") (complete: $(ls "$newest" | tr '\n' ' '))"

# The same command again: resumes from the newest checkpoint and completes.
job="$(submit 2)"
sl_wait_end "$job" 120
ctl_log="$sl_work/.tandem/job-$job/attempt-0/controller-on-n1.log"
[ "$sl_state" = COMPLETED ] && [ "$sl_exit" = 0:0 ] ||
  sl_fail "the second job ended $sl_state, exit code ${sl_exit:-?}" "$sl_work/job2.out" "$ctl_log"
grep -q "run directory: $run (resuming from $newest)" "$ctl_log" || sl_fail "the second job did not resume from $newest" "$ctl_log"
grep -qE "40 warm-up and 30 RL steps done" "$ctl_log" || sl_fail "the second job did not complete the run" "$ctl_log"
sl_match_local_run "$sl_work/whole" "$run" "the cancelled and resubmitted run's metrics differ from the uninterrupted run's" \
  "$recipe" "${keys[@]}" cluster.num_nodes=1 cluster.gpus_per_node=2
echo "resumed from $(basename "$newest") and completed: metrics as the uninterrupted run's: $same"
echo "passed in $((SECONDS - started)) s"
