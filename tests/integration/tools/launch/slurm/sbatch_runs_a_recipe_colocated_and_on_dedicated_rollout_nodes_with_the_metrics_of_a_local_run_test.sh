#!/usr/bin/env bash
# tools/launch/slurm/run.sh under a real Slurm (slurm_cluster.sh: slurmctld, a slurmd per node and
# munged, on loopback) runs the tiny CPU recipe (configs/recipes/tiny-cpu-ci.yaml, cut short) in
# both layouts, each submitted with `sbatch --nodes=2`:
#   colocated: 2 nodes x 1 member, each holding a policy and a rollout worker;
#   dedicated rollout nodes: 2 nodes x 2 members, the last node (policy.generation.colocated.
#     resources.num_nodes: 1) generating only.
# Each job completes with exit status 0; the controller runs on the first node and each member logs
# on its own node; the metrics equal, record for record (timings and byte counts aside), those of a
# local `tandem run` of the same recipe and seed with the same members on one node. A job with
# fewer nodes than the recipe's is refused before anything starts, naming both numbers.
# Usage: TEST TANDEM_BINARY. Needs root and slurm-wlm and munge; else skipped (77), or a failure
# with TANDEM_CI_NO_SKIP=1.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../../../../.." && pwd)"
# shellcheck source=tests/integration/tools/launch/slurm/slurm_cluster.sh
source "$source_dir/tests/integration/tools/launch/slurm/slurm_cluster.sh"
sl_begin "$1"
recipe="$source_dir/configs/recipes/tiny-cpu-ci.yaml"
short=(sft.max_num_steps=10 grpo.max_num_steps=4 grpo.val_period=2)

# layout NAME SLURM_OVERRIDES LOCAL_OVERRIDES: the job, then the local run, then the comparison.
layout() {
  local name="$1" job out
  local -a on_slurm local_run
  read -r -a on_slurm <<<"$2"
  read -r -a local_run <<<"$3"
  cd "$sl_work"
  job="$(sbatch --parsable --nodes=2 --exclusive --job-name="$name" -o "$sl_work/$name.out" \
    "$source_dir/tools/launch/slurm/run.sh" "$recipe" "${short[@]}" "${on_slurm[@]}" \
    "cluster.controller_port=$sl_port" "logger.log_dir=$sl_work/$name")"
  sl_wait_end "$job" 120
  out="$sl_work/$name.out"
  [ "$sl_state" = COMPLETED ] && [ "$sl_exit" = 0:0 ] || sl_fail "the $name job ended $sl_state, exit code ${sl_exit:-?}" "$out" "$sl_work"/.tandem/job-"$job"/attempt-0/*.log
  grep -E "run.sh: job $job start 0: " "$out"
  grep -qE "run.sh: job $job start 0: .*controller on n1 \(127\.0\.0\.1:$sl_port\), $4 member" "$out" ||
    sl_fail "the $name job does not start the controller on n1 with $4 members" "$out"
  local logs="$sl_work/.tandem/job-$job/attempt-0" rank
  for rank in $(seq 0 $(($4 - 1))); do
    local node="n$((rank / ($4 / 2) + 1))"
    [ -s "$logs/member-$rank-on-$node.log" ] || sl_fail "no log of member $rank on $node" "$out"
    grep -q "shut down by the controller (the run ended)" "$logs/member-$rank-on-$node.log" ||
      sl_fail "member $rank on $node did not end with the run" "$logs/member-$rank-on-$node.log"
  done
  echo "$name: $(cd "$logs" && ls | tr '\n' ' ')"
  sl_match_local_run "$sl_work/$name-local" "$sl_work/$name" "the $name job's metrics differ from the local run's" \
    "$recipe" "${short[@]}" "${local_run[@]}"
  echo "$name: job $job $sl_state (exit code $sl_exit); metrics as the local run's: $same"
}

layout colocated "cluster.num_nodes=2 cluster.gpus_per_node=1" "cluster.gpus_per_node=2" 2
layout dedicated "cluster.num_nodes=2 cluster.gpus_per_node=2 policy.generation.colocated.enabled=false policy.generation.colocated.resources.num_nodes=1" \
  "cluster.gpus_per_node=4 policy.generation.colocated.enabled=false policy.generation.colocated.resources.gpus_per_node=2" 4
grep -q "dedicated rollout nodes: n1 train, n2 generate" "$sl_work/dedicated.out" ||
  sl_fail "the dedicated job does not say which nodes generate" "$sl_work/dedicated.out"

# A job of one node for a recipe of two: refused, naming both, nothing started.
job="$(sbatch --parsable --nodes=1 -o "$sl_work/short.out" "$source_dir/tools/launch/slurm/run.sh" "$recipe" \
  cluster.num_nodes=2 cluster.gpus_per_node=1 "logger.log_dir=$sl_work/short")"
sl_wait_end "$job" 60
[ "$sl_state" = FAILED ] && [ "$sl_exit" = 2:0 ] || sl_fail "a job short of nodes ended $sl_state, exit code ${sl_exit:-?}" "$sl_work/short.out"
grep -F "the job has 1 node(s) (n1) but $recipe runs on cluster.num_nodes = 2: submit with sbatch --nodes=2" "$sl_work/short.out" ||
  sl_fail "a job short of nodes is refused without naming both numbers" "$sl_work/short.out"
[ ! -e "$sl_work/short" ] || sl_fail "a job short of nodes started a run"
echo "passed in $((SECONDS - started)) s"
