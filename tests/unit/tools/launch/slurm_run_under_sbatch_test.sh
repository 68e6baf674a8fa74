#!/usr/bin/env bash
# The Slurm launcher run as sbatch runs it: a copy of the script in a spool directory, the checkout
# only known as the submit directory. With stand-ins for scontrol and srun (and the launcher's dry
# run), it must find the checkout's tandem, write the job's keys, and start the controller and one
# member per device with the recipe named from the submit directory; on the first node the
# controller is the script's own child; a requeued start resumes in the first start's run
# directory; a job with another number of nodes than the recipe's is refused. (Under a real Slurm:
# tests/integration/tools/launch/slurm/.) Usage: TEST TANDEM_BINARY.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../../../.." && pwd)"
tandem_binary="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/spool/job42" "$work/bin"
cp "$source_dir/tools/launch/slurm/run.sh" "$work/spool/job42/slurm_script"
cat > "$work/bin/scontrol" <<'STUB'
#!/bin/sh
[ "$1 $2" = "show hostnames" ] && printf 'node-a\nnode-b\n'
STUB
chmod +x "$work/bin/scontrol"
out="$(cd "$source_dir" && PATH="$work/bin:$PATH" SLURM_JOB_NODELIST="node-[a-b]" SLURM_JOB_ID=42 \
  SLURM_SUBMIT_DIR="$source_dir" TANDEM_JOB_DIR="$work/job" TANDEM="$tandem_binary" TANDEM_LAUNCH_DRY_RUN=1 \
  bash "$work/spool/job42/slurm_script" configs/recipes/tiny-fake-cpu.yaml runtime.engine=fake cluster.num_nodes=2 --fresh 2>&1)" || {
  echo "the launcher failed under sbatch:"; echo "$out"; exit 1; }
fail() { echo "FAIL: $1"; echo "--- launcher output:"; echo "$out"; exit 1; }
grep -q "keys $work/job/run.keys --world 4" <<<"$out" || fail "no keys for a world of 2 nodes x 2 devices"
grep -q "srun --nodes=1 --ntasks=1 --nodelist=node-a .* run $source_dir/configs/recipes/tiny-fake-cpu.yaml runtime.engine=fake cluster.num_nodes=2 --fresh cluster.controller_host=" <<<"$out" ||
  fail "the controller does not run the submit directory's recipe on the first node"
grep -q -- "--ntasks=4 --ntasks-per-node=2" <<<"$out" || fail "not one member per device"
grep -q "TANDEM_CONTROLLER=tcp://.*:29650" <<<"$out" || fail "the members do not dial the recipe's port"
# sbatch runs the script on the first node (SLURMD_NODENAME): the controller is this shell's child
# there, not an srun step, so that the time-limit signal trapped here reaches it.
launch() {
  (cd "$source_dir" && PATH="$work/bin:$PATH" SLURM_JOB_NODELIST="node-[a-b]" SLURM_JOB_ID=42 \
    SLURM_SUBMIT_DIR="$source_dir" TANDEM_JOB_DIR="$work/job" TANDEM="$tandem_binary" TANDEM_LAUNCH_DRY_RUN=1 env "$@" \
    bash "$work/spool/job42/slurm_script" configs/recipes/tiny-fake-cpu.yaml runtime.engine=fake cluster.num_nodes=2 --fresh 2>&1)
}
out="$(launch SLURMD_NODENAME=node-a)" || fail "the launcher failed on the first node"
grep -qE "^$tandem_binary run .* --fresh cluster.controller_host=[^ ]+ --no-spawn" <<<"$out" ||
  fail "on the first node the controller is not started by the script itself"
# A requeued start (SLURM_RESTART_COUNT) resumes in the directory the first start chose: --fresh
# is dropped and that directory named.
mkdir -p "$work/job"
echo "/runs/tiny.3" >"$work/job/run_dir"
out="$(launch SLURMD_NODENAME=node-a SLURM_RESTART_COUNT=1)" || fail "the launcher failed on a requeued start"
grep -q "run $source_dir/configs/recipes/tiny-fake-cpu.yaml runtime.engine=fake cluster.num_nodes=2 logger.log_dir=/runs/tiny.3 cluster.controller_host=" <<<"$out" ||
  fail "a requeued start does not resume in the first start's run directory"
grep -q -- "--fresh" <<<"$out" && fail "a requeued start still passes --fresh"
grep -q "attempt-1" <<<"$out" || fail "a requeued start does not log apart from the first"
# A job with another number of nodes than the recipe's is refused before anything starts.
if out="$(cd "$source_dir" && PATH="$work/bin:$PATH" SLURM_JOB_NODELIST="node-[a-b]" SLURM_JOB_ID=42 SLURM_SUBMIT_DIR="$source_dir" TANDEM_JOB_DIR="$work/job" \
  TANDEM="$tandem_binary" TANDEM_LAUNCH_DRY_RUN=1 bash "$work/spool/job42/slurm_script" configs/recipes/tiny-fake-cpu.yaml \
  runtime.engine=fake cluster.num_nodes=4 2>&1)"; then
  fail "a job of 2 nodes for a recipe of 4 was launched"
fi
grep -q "the job has 2 node(s) (node-a node-b) but .*tiny-fake-cpu.yaml runs on cluster.num_nodes = 4: submit with sbatch --nodes=4" <<<"$out" ||
  fail "a job short of nodes is refused without naming both numbers"
grep -q "srun" <<<"$out" && fail "a job short of nodes started something"
# Outside any checkout and without a submit directory that is one, it says what to do.
if msg="$(cd "$work" && PATH="$work/bin:$PATH" SLURM_JOB_NODELIST=node-a SLURM_SUBMIT_DIR="$work" \
  bash "$work/spool/job42/slurm_script" recipe.yaml 2>&1)"; then
  echo "FAIL: a launcher outside any checkout succeeded"; exit 1
fi
grep -q "cannot find the tandem checkout" <<<"$msg" || { echo "FAIL: unclear error: $msg"; exit 1; }
echo "ok"
