#!/usr/bin/env bash
# Launches a tandem run on a Slurm allocation: the controller on the allocation's first node, one
# `tandem join` (a member) per device on every node. Submit it with as many nodes as the recipe's
# cluster.num_nodes, from the checkout (or an unpacked bundle) on a file system every node sees:
#
#   sbatch --nodes=2 --gpus-per-node=8 --exclusive tools/launch/slurm/run.sh RECIPE [key=value ...] [--fresh]
#
# Both layouts of a recipe run from this one script; the recipe says which:
#   colocated (policy.generation.colocated.enabled: true): every node runs cluster.gpus_per_node
#     members, each holding a policy and a rollout worker;
#   dedicated rollout nodes (colocated.enabled: false, colocated.resources.num_nodes: K): the first
#     num_nodes - K nodes run policy members only, the last K nodes rollout members only.
# The job must have exactly cluster.num_nodes nodes (key=value overrides count); otherwise the
# script stops before starting anything, naming both numbers.
#
# The recipe's cluster.controller_host is set to the first node's address (its NodeAddr in Slurm,
# resolved to IPv4) and the members find the controller, their rank and the world from the
# environment (TANDEM_CONTROLLER, TANDEM_RANK, TANDEM_WORLD; ranks are node-major, as the placement
# plan numbers them). The run's CurveZMQ keys (`tandem keys`, made anew for each start of the job)
# are written into the job's directory, $SLURM_SUBMIT_DIR/.tandem/job-$SLURM_JOB_ID (mode 0700;
# the file 0600; TANDEM_JOB_DIR overrides it and must be private to you), and handed to the
# controller and every member as TANDEM_KEYS: only this job's processes complete a handshake.
#
# Logs: the controller's output goes to the job's output (sbatch -o; appended to on a requeue) and
# to JOB_DIR/attempt-N/controller-on-NODE.log; each member writes JOB_DIR/attempt-N/
# member-RANK-on-NODE.log (N: $SLURM_RESTART_COUNT, 0 for the first start). The job's exit status
# is the controller's: 0 when the run completed, 130/143 when it was stopped by a signal.
#
# Stopping: Slurm's time-limit warning (--signal=B:USR1@SECONDS, set below; B: the batch shell
# only) or `scancel --batch --signal=USR1 JOBID` makes the controller finish the step in flight,
# save a checkpoint (when the recipe has checkpointing.enabled) and its final weights, stop every
# member and exit 143. A plain `scancel JOBID` stops every process at once: the newest complete
# checkpoint stays intact (checkpoints are committed whole). A requeued job (`scontrol requeue
# JOBID`, or `sbatch --requeue` after a node failure) or the same sbatch command again resumes from
# the newest checkpoint in the run directory; a requeued job started with --fresh resumes in the
# directory its first start chose (remembered in JOB_DIR/run_dir), not in a new one. A run
# directory (logger.log_dir) that holds another run without a checkpoint to resume is refused; add
# --fresh after the recipe to run in a new sibling.
#
# The checkout: TANDEM_HOME, else the one this script is in, else (under sbatch, which runs a copy
# of the script from Slurm's spool directory) the directory sbatch was called from.
# TANDEM: the tandem binary (default: build/tandem of the checkout, or bin/tandem of a bundle).
# TANDEM_LAUNCH_DRY_RUN=1: print the commands instead of running them.
#
#SBATCH --signal=B:USR1@300
#SBATCH --open-mode=append
set -euo pipefail
me="tools/launch/slurm/run.sh"
# USR1 (the time-limit warning), TERM and INT to this shell: SIGTERM to the controller, which
# finishes the step in flight, saves a checkpoint and stops the members; before it started: no
# run. (A plain scancel signals every process of the job: the controller then gets a second
# SIGTERM, which stops it at once, as the members are being killed anyway.)
controller=""
stop_requested=0
# shellcheck disable=SC2317  # called by the traps below
on_stop_signal() {
  stop_requested=1
  if [ -z "$controller" ]; then
    echo "$me: $1 before the run started: nothing started"
    exit 143
  fi
  echo "$me: $1: the controller finishes the step in flight, saves a checkpoint and stops (SIGTERM)"
  kill -TERM "$controller" 2>/dev/null || true
}
trap 'on_stop_signal "the time-limit signal (USR1)"' USR1
trap 'on_stop_signal SIGTERM' TERM
trap 'on_stop_signal SIGINT' INT
if [ $# -lt 1 ]; then
  echo "usage: $me RECIPE [key=value ...] [--fresh]" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
if [ -n "${TANDEM_HOME:-}" ]; then
  root="$TANDEM_HOME"
elif [ -f "$here/../../../tools/launch/slurm/run.sh" ]; then
  root="$here/../../.."
elif [ -n "${SLURM_SUBMIT_DIR:-}" ] && [ -f "$SLURM_SUBMIT_DIR/tools/launch/slurm/run.sh" ]; then
  root="$SLURM_SUBMIT_DIR"
else
  echo "$me: cannot find the tandem checkout (this script runs from $here): call sbatch" \
    "from the checkout or set TANDEM_HOME" >&2
  exit 2
fi
# The recipe as named where the script was called (sbatch: the submit directory).
[ -e "$1" ] || { echo "$me: no recipe at $1 (from $PWD)" >&2; exit 2; }
recipe="$(realpath -- "$1")"
shift
cd "$root"
tandem="${TANDEM:-$PWD/build/tandem}"
[ -n "${TANDEM:-}" ] || [ -x "$tandem" ] || [ ! -x "$PWD/bin/tandem" ] || tandem="$PWD/bin/tandem"  # a bundle
[ -x "$tandem" ] || { echo "$me: no tandem binary at $tandem (build it with tools/build.sh, or set TANDEM)" >&2; exit 2; }
nodes=(${SLURM_JOB_NODELIST:+$(scontrol show hostnames "$SLURM_JOB_NODELIST")})
if [ ${#nodes[@]} -eq 0 ]; then
  echo "$me: not inside a Slurm allocation (SLURM_JOB_NODELIST is unset)" >&2
  exit 2
fi
head_node="${nodes[0]}"
args=("$@")          # what `tandem run` gets after the recipe
overrides=()         # the key=value arguments: what `tandem validate` takes of them (not --fresh)
for a in "$@"; do [[ "$a" == *=* ]] && overrides+=("$a"); done

# The recipe as tandem resolves it.
if ! resolved="$("$tandem" validate "$recipe" ${overrides[@]+"${overrides[@]}"} 2>&1 >/dev/null)"; then
  echo "$me: $recipe does not validate:" >&2
  echo "$resolved" >&2
  exit 2
fi
resolved="$("$tandem" validate "$recipe" ${overrides[@]+"${overrides[@]}"} 2>/dev/null)"
# recipe_value a.b.c: that key's value in the resolved recipe (its trailing comment dropped).
recipe_value() {
  awk -v want="$1" '
    /^ *#/ || !/^ *[A-Za-z_][A-Za-z0-9_]*:/ { next }
    {
      match($0, /^ */); depth = RLENGTH / 2
      key = $0; sub(/^ */, "", key); sub(/:.*/, "", key)
      path[depth] = key; p = path[0]
      for (i = 1; i <= depth; i++) p = p "." path[i]
      if (p == want) { v = $0; sub(/^[^:]*: */, "", v); sub(/ +#.*/, "", v); print v; exit }
    }' <<<"$resolved"
}
num_nodes="$(recipe_value cluster.num_nodes)"
gpus_per_node="$(recipe_value cluster.gpus_per_node)"
port="$(recipe_value cluster.controller_port)"
colocated="$(recipe_value policy.generation.colocated.enabled)"
rollout_nodes="$(recipe_value policy.generation.colocated.resources.num_nodes)"
checkpointing="$(recipe_value checkpointing.enabled)"
for v in num_nodes gpus_per_node port colocated; do
  [[ "${!v}" =~ ^[0-9a-z]+$ ]] || { echo "$me: cannot read $v from \`tandem validate $recipe\`" >&2; exit 2; }
done
if [ "${#nodes[@]}" -ne "$num_nodes" ]; then
  echo "$me: the job has ${#nodes[@]} node(s) (${nodes[*]}) but $recipe runs on cluster.num_nodes = $num_nodes:" \
    "submit with sbatch --nodes=$num_nodes, or set cluster.num_nodes=${#nodes[@]} after the recipe" >&2
  exit 2
fi
if [ "$colocated" = true ]; then
  layout="colocated: ${#nodes[@]} node(s) x $gpus_per_node member(s), each holding a policy and a rollout worker"
elif [[ "$rollout_nodes" =~ ^[0-9]+$ ]] && [ "$rollout_nodes" -gt 0 ]; then
  layout="dedicated rollout nodes: ${nodes[*]:0:${#nodes[@]}-rollout_nodes} train, ${nodes[*]: -rollout_nodes} generate (the last $rollout_nodes: policy.generation.colocated.resources.num_nodes)"
else
  layout="dedicated rollout devices on each of ${#nodes[@]} node(s)"
fi
world=$(( ${#nodes[@]} * gpus_per_node ))
# The first node's address as the cluster knows it (NodeAddr), as IPv4 when it is a name.
head_addr="$( (scontrol show node "$head_node" 2>/dev/null || true) | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p' | head -1)"
[ -n "$head_addr" ] || head_addr="$head_node"
if ! [[ "$head_addr" =~ ^[0-9.]+$ ]]; then
  resolved_addr="$( (getent ahostsv4 "$head_addr" || true) | awk 'NR == 1 { print $1 }')"
  [ -z "$resolved_addr" ] || head_addr="$resolved_addr"
fi

dry_run="${TANDEM_LAUNCH_DRY_RUN:-0}"
run() {
  if [ "$dry_run" = 1 ]; then printf '%q ' "$@"; echo; else "$@"; fi
}

attempt="${SLURM_RESTART_COUNT:-0}"
job_dir="${TANDEM_JOB_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/.tandem/job-${SLURM_JOB_ID:-$$}}"
logs="$job_dir/attempt-$attempt"
keys="$job_dir/run.keys"
run mkdir -p -m 0700 "$job_dir"
run mkdir -p "$logs"
run rm -f "$keys"  # an earlier start's keys: each start has its own
run "$tandem" keys "$keys" --world "$world"
export TANDEM_KEYS="$keys"
# A requeued job resumes where its first start ran: --fresh chose that directory once.
if [ "$attempt" -gt 0 ] && [ -s "$job_dir/run_dir" ]; then
  kept=()
  for a in ${args[@]+"${args[@]}"}; do [ "$a" = --fresh ] || kept+=("$a"); done
  args=(${kept[@]+"${kept[@]}"} "logger.log_dir=$(cat "$job_dir/run_dir")")
fi
echo "$me: job ${SLURM_JOB_ID:-?} start $attempt: $layout; controller on $head_node ($head_addr:$port), $world member(s); logs in $logs"
[ "$checkpointing" = true ] ||
  echo "$me: note: checkpointing.enabled is false: a stop (time limit, USR1) saves the final weights only, and a requeue cannot resume"

# The controller: a child of this shell on the first node (sbatch runs this script there), so
# that the time-limit signal reaches it; under salloc, elsewhere, through srun on the first node.
controller_cmd=("$tandem" run "$recipe" ${args[@]+"${args[@]}"} "cluster.controller_host=$head_addr" --no-spawn)
[ "${SLURMD_NODENAME:-}" = "$head_node" ] || controller_cmd=(srun --nodes=1 --ntasks=1 --nodelist="$head_node" --overlap "${controller_cmd[@]}")
ctl_log="$logs/controller-on-$head_node.log"
# One member per device, node-major ranks (block distribution), each logging to its own file.
member_env="ALL,TANDEM_CONTROLLER=tcp://$head_addr:$port,TANDEM_WORLD=$world,TANDEM_LOCAL_MEMBERS=$gpus_per_node,TANDEM_KEYS=$keys"
# shellcheck disable=SC2016  # expanded by the member's shell
members_cmd=(srun --nodes="${#nodes[@]}" --ntasks="$world" --ntasks-per-node="$gpus_per_node" --distribution=block --overlap
  --export="$member_env"
  bash -c 'TANDEM_RANK=$SLURM_PROCID exec "$0" join >"$1/member-$SLURM_PROCID-on-${SLURMD_NODENAME:-$(hostname)}.log" 2>&1'
  "$tandem" "$logs")
if [ "$dry_run" = 1 ]; then
  run "${controller_cmd[@]}"
  run "${members_cmd[@]}"
  exit 0
fi
"${controller_cmd[@]}" >"$ctl_log" 2>&1 &
controller=$!
echo "$me: the controller: pid $controller, log $ctl_log"
"${members_cmd[@]}" &
members=$!

# The controller's lines into the job's output, and the run directory it chose remembered for a
# requeue.
tail -n +1 -F --pid="$controller" "$ctl_log" 2>/dev/null | while IFS= read -r line; do
  printf '%s\n' "$line"
  if [[ "$line" == *" run directory: "* ]] && [ "$attempt" = 0 ]; then
    dir="${line#* run directory: }"
    printf '%s\n' "${dir% (*}" >"$job_dir/run_dir"
  fi
done &
echoer=$!

# wait returns early (above 128) when a trapped signal arrives: wait again while the controller lives.
while :; do
  wait "$controller" && status=0 || status=$?
  if [ "$status" -gt 128 ] && kill -0 "$controller" 2>/dev/null; then continue; fi
  if [ "$status" -gt 128 ]; then  # the controller ended as the signal came: its own status, if not yet taken
    again=0
    wait "$controller" 2>/dev/null || again=$?
    [ "$again" = 127 ] || status=$again
  fi
  break
done
trap - USR1 TERM INT
# The members leave when the controller stops them (or, if it died, when its heartbeats stop).
for _ in $(seq 600); do kill -0 "$members" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$members" 2>/dev/null; then
  echo "$me: members still running 60 s after the controller ended: stopping them"
  kill -TERM "$members" 2>/dev/null || true
fi
wait "$members" 2>/dev/null || true
wait "$echoer" 2>/dev/null || true
echo "$me: the controller exited with status $status$([ "$stop_requested" = 0 ] || echo ' (stopped on request)')"
exit "$status"
