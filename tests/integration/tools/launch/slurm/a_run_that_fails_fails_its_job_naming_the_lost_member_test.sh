#!/usr/bin/env bash
# A run launched by tools/launch/slurm/run.sh under a real Slurm (slurm_cluster.sh) whose policy
# members die mid-run (TANDEM_FAULT_KILL_AT=train@3, exported to the job: each policy member kills
# itself with SIGKILL as it starts training step 3, of the warm-up) ends its job FAILED with the run's exit status,
# 1; the job's output names a lost member and the launcher's exit, and the member's own log, named
# after its node, says where it died. Usage: TEST TANDEM_BINARY. Needs root and slurm-wlm and
# munge; else skipped (77), or a failure with TANDEM_CI_NO_SKIP=1.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../../../../.." && pwd)"
# shellcheck source=tests/integration/tools/launch/slurm/slurm_cluster.sh
source "$source_dir/tests/integration/tools/launch/slurm/slurm_cluster.sh"
sl_begin "$1"
cd "$sl_work"
job="$(TANDEM_FAULT_KILL_AT=train@3 sbatch --parsable --nodes=2 --exclusive -o "$sl_work/job.out" \
  "$source_dir/tools/launch/slurm/run.sh" "$source_dir/configs/recipes/tiny-cpu-ci.yaml" \
  cluster.num_nodes=2 cluster.gpus_per_node=1 runtime.heartbeat_timeout_ms=3000 \
  "cluster.controller_port=$sl_port" "logger.log_dir=$sl_work/run")"
sl_wait_end "$job" 120
[ "$sl_state" = FAILED ] && [ "$sl_exit" = 1:0 ] || sl_fail "the job of a failed run ended $sl_state, exit code ${sl_exit:-?}" "$sl_work/job.out"
grep -E "tandem run: failed: .*member [01] \[policy-[01], rollout-[01]\] \(pid [0-9]+ on [^)]+\)" "$sl_work/job.out" ||
  sl_fail "the job's output names no lost member" "$sl_work/job.out"
grep -q "run.sh: the controller exited with status 1$" "$sl_work/job.out" || sl_fail "the launcher does not say the run's status" "$sl_work/job.out"
logs="$sl_work/.tandem/job-$job/attempt-0"
grep -H "fault injection: killed at train of step 3" "$logs/member-0-on-n1.log" "$logs/member-1-on-n2.log" ||
  sl_fail "the members' logs (one per node) do not say where they died" "$logs"/*.log
echo "passed in $((SECONDS - started)) s"
