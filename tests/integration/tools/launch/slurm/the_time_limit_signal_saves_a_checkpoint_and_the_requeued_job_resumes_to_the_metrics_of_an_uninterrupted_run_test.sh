#!/usr/bin/env bash
# Slurm's time-limit warning, as `sbatch --signal=B:USR1@N` sends it (here sent at once with
# `scancel --batch --signal=USR1`, to the batch shell only), reaches a run launched by
# tools/launch/slurm/run.sh under a real Slurm (slurm_cluster.sh) mid-run: the controller finishes
# the step in flight, saves a checkpoint of it, stops every member and exits 143, the job's exit
# status. `scontrol requeue` then starts the job again; it resumes from that checkpoint, in the run
# directory the first start chose with --fresh (a sibling: logger.log_dir holds another run), and
# completes with the metrics of a local uninterrupted run, record for record (timings and byte
# counts aside). Usage: TEST TANDEM_BINARY. Needs root and slurm-wlm and munge; else skipped (77),
# or a failure with TANDEM_CI_NO_SKIP=1.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../../../../.." && pwd)"
# shellcheck source=tests/integration/tools/launch/slurm/slurm_cluster.sh
source "$source_dir/tests/integration/tools/launch/slurm/slurm_cluster.sh"
sl_begin "$1"
recipe="$source_dir/configs/recipes/tiny-cpu-ci.yaml"
# 40 warm-up steps, then 30 RL steps of about 0.2 s: the signal, sent after the first RL step,
# lands mid-run. No periodic checkpoint before the end (save_period 1000).
keys=(cluster.num_nodes=2 cluster.gpus_per_node=1 grpo.max_num_steps=30 checkpointing.enabled=true
  checkpointing.save_period=1000)
mkdir -p "$sl_work/run"
echo '{"step": 1}' >"$sl_work/run/metrics.jsonl"  # another run's records: --fresh moves to run.2
cd "$sl_work"
job="$(sbatch --parsable --nodes=2 --exclusive -o "$sl_work/job.out" "$source_dir/tools/launch/slurm/run.sh" \
  "$recipe" "${keys[@]}" "cluster.controller_port=$sl_port" "logger.log_dir=$sl_work/run" --fresh)"
first="$sl_work/.tandem/job-$job/attempt-0/controller-on-n1.log"
sl_wait_file "$first" ' step 1/30:' 120 || sl_fail "the job did not reach its first RL step" "$sl_work/job.out" "$first"
scancel --batch --signal=USR1 "$job"
sl_wait_end "$job" 120
[ "$sl_state" = FAILED ] && [ "$sl_exit" = 143:0 ] ||
  sl_fail "the signalled job ended $sl_state, exit code ${sl_exit:-?} (not 143)" "$sl_work/job.out"
run="$sl_work/run.2"
[ -s "$run/metrics.jsonl" ] || sl_fail "the run did not go to $run (--fresh)" "$sl_work/job.out"
k="$(wc -l <"$run/metrics.jsonl")"
[ "$k" -gt 41 ] && [ "$k" -lt 70 ] || sl_fail "the run was not stopped mid-RL: $k steps recorded" "$sl_work/job.out"
grep -E "time-limit signal|interrupted by SIGTERM|checkpoint step_|exited with status" "$sl_work/job.out"
grep -q "checkpoint step_$k (v$k) saved in $run/checkpoints/step_$k" "$sl_work/job.out" ||
  sl_fail "no checkpoint of step $k, the last step done, was saved on the signal" "$sl_work/job.out"
[ -e "$run/checkpoints/step_$k/manifest.json" ] || sl_fail "step_$k has no manifest"
grep -q "the controller exited with status 143 (stopped on request)" "$sl_work/job.out" ||
  sl_fail "the launcher does not say the run stopped on request" "$sl_work/job.out"

# The requeue: the same job, started again, resumes in run.2 and completes.
# A requeued job may start again once its first start's credential expired (slurm_cluster.sh
# makes that 5 s instead of 120).
scontrol requeue "$job"
[ "$(sl_job_field "$job" Restarts)" = 1 ] || sl_fail "scontrol requeue did not requeue job $job: $(scontrol show job "$job")"
sl_wait_end "$job" 120
second="$sl_work/.tandem/job-$job/attempt-1/controller-on-n1.log"
[ "$sl_state" = COMPLETED ] && [ "$sl_exit" = 0:0 ] ||
  sl_fail "the requeued job ended $sl_state, exit code ${sl_exit:-?}" "$sl_work/job.out" "$second"
grep -E "run directory: |resumed from|steps done in" "$second"
grep -q "run directory: $run (resuming from $run/checkpoints/step_$k)" "$second" ||
  sl_fail "the requeued job did not resume in $run from step_$k" "$second"
grep -qE "40 warm-up and 30 RL steps done" "$second" || sl_fail "the requeued job did not complete the run" "$second"

sl_match_local_run "$sl_work/whole" "$run" "the stopped and requeued job's metrics differ from the uninterrupted run's" \
  "$recipe" "${keys[@]}" cluster.num_nodes=1 cluster.gpus_per_node=2
echo "stopped after step $k of 70, requeued, resumed and completed: metrics as the uninterrupted run's: $same"
echo "passed in $((SECONDS - started)) s"
