#!/usr/bin/env bash
# Launches a tandem run on a Slurm allocation: the controller on the allocation's first node, one
# `tandem join` per device on every node. Run it inside the allocation (sbatch or salloc), with
# as many nodes as the recipe's cluster.num_nodes:
#
#   sbatch --nodes=2 --gpus-per-node=8 --exclusive tools/launch/slurm/run.sh RECIPE [key=value ...]
#
# The recipe's cluster.controller_host is set to the first node's address and the members find the
# controller, their rank and the world from the environment (TANDEM_CONTROLLER, TANDEM_RANK,
# TANDEM_WORLD; ranks are node-major, as the placement plan numbers them). The controller's exit
# status is the launch's; the members exit when it ends or dies. A run directory (logger.log_dir)
# that holds an earlier run is refused; add --fresh after the recipe to run in a new sibling.
#
# The run's CurveZMQ keys (`tandem keys`) are written into the job's directory,
# $SLURM_SUBMIT_DIR/.tandem/job-$SLURM_JOB_ID (mode 0700; the file 0600), and handed to the
# controller and every member as TANDEM_KEYS: only this job's processes complete a handshake with
# its ports. TANDEM_JOB_DIR overrides the directory (it must be private to you).
#
# The checkout: TANDEM_HOME, else the one this script is in, else (under sbatch, which runs a copy
# of the script from Slurm's spool directory) the directory sbatch was called from.
# TANDEM: the tandem binary (default: build/tandem of the checkout, or bin/tandem of a bundle).
# TANDEM_LAUNCH_DRY_RUN=1: print the commands instead of running them.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: tools/launch/slurm/run.sh RECIPE [key=value ...]" >&2
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
  echo "tools/launch/slurm/run.sh: cannot find the tandem checkout (this script runs from $here): call sbatch" \
    "from the checkout or set TANDEM_HOME" >&2
  exit 2
fi
# The recipe as named where the script was called (sbatch: the submit directory).
recipe="$(realpath -- "$1")"
shift
cd "$root"
tandem="${TANDEM:-$PWD/build/tandem}"
[ -n "${TANDEM:-}" ] || [ -x "$tandem" ] || [ ! -x "$PWD/bin/tandem" ] || tandem="$PWD/bin/tandem"  # a bundle
nodes=(${SLURM_JOB_NODELIST:+$(scontrol show hostnames "$SLURM_JOB_NODELIST")})
if [ ${#nodes[@]} -eq 0 ]; then
  echo "tools/launch/slurm/run.sh: not inside a Slurm allocation (SLURM_JOB_NODELIST is unset)" >&2
  exit 2
fi
head_node="${nodes[0]}"
head_addr="$( (getent ahostsv4 "$head_node" || true) | awk 'NR == 1 { print $1 }')"
[ -n "$head_addr" ] || head_addr="$head_node"
overrides=()  # the key=value arguments: what `tandem validate` takes of them (not --fresh)
for a in "$@"; do [[ "$a" == *=* ]] && overrides+=("$a"); done
port="$("$tandem" validate "$recipe" ${overrides[@]+"${overrides[@]}"} | awk '/^  controller_port:/ { print $2; exit }')"
gpus_per_node="$("$tandem" validate "$recipe" ${overrides[@]+"${overrides[@]}"} | awk '/^  gpus_per_node:/ { g = $2 } END { print g }')"
if [ -z "$port" ] || [ -z "$gpus_per_node" ]; then
  echo "tools/launch/slurm/run.sh: $recipe does not validate (tandem validate says why)" >&2
  exit 2
fi
world=$(( ${#nodes[@]} * gpus_per_node ))

run() {
  if [ "${TANDEM_LAUNCH_DRY_RUN:-0}" = 1 ]; then printf '%q ' "$@"; echo; else "$@"; fi
}

job_dir="${TANDEM_JOB_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/.tandem/job-${SLURM_JOB_ID:-$$}}"
keys="$job_dir/run.keys"
run mkdir -p -m 0700 "$job_dir"
run "$tandem" keys "$keys" --world "$world"
export TANDEM_KEYS="$keys"

# The controller, on the first node, spawning no member: every rank comes from srun below.
run srun --nodes=1 --ntasks=1 --nodelist="$head_node" --overlap \
  "$tandem" run "$recipe" "$@" "cluster.controller_host=$head_addr" --no-spawn &
controller=$!
# One member per device, node-major ranks (block distribution).
run srun --nodes="${#nodes[@]}" --ntasks="$world" --ntasks-per-node="$gpus_per_node" --distribution=block --overlap \
  --export=ALL,TANDEM_CONTROLLER="tcp://$head_addr:$port",TANDEM_WORLD="$world",TANDEM_LOCAL_MEMBERS="$gpus_per_node",TANDEM_KEYS="$keys" \
  bash -c 'TANDEM_RANK=$SLURM_PROCID exec "$0" join' "$tandem" &
wait "$controller"
