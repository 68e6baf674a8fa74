#!/usr/bin/env bash
# A link cut mid-run between hosts made of network namespaces (netns_hosts.sh): the controller on
# 10.77.0.1, the policy members (`tandem join`, node 0) on 10.77.0.2, the rollout members (node 1)
# on 10.77.0.3, a secure dedicated-rollout run with checkpoints every 2 steps. Once a checkpoint is
# complete, the rollout host's cable is pulled (its veth's end at the bridge taken down). The test
# checks that
#   - the controller fails the run (exit status not 0) soon after the heartbeat timeout, and its
#     error names a rollout member: its rank, role, pid and host (the hostname the member said in
#     its hello; the controller's error does not carry the member's network address, so the test
#     prints the address that member's data plane was bound on beside it);
#   - every member exits: the policy members shut down by the controller, the rollout members when
#     the controller's heartbeats stop;
#   - with the link mended, the same commands resume from the newest complete checkpoint and
#     complete every step.
# Usage: TEST TANDEM_BINARY. Needs root and iproute2; else skipped (77), or a failure with
# TANDEM_CI_NO_SKIP=1.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../../.." && pwd)"
tandem="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
build="$(dirname "$tandem")"
# shellcheck source=tests/integration/multihost/netns_hosts.sh
source "$source_dir/tests/integration/multihost/netns_hosts.sh"
mh_require
mh_setup "$build"
started=$SECONDS

# Enough steps (about 0.2 s each here; 64 prompts a epoch at 4 a step) that the cut lands mid-run,
# after the step_2 checkpoint.
steps=40
timeout_ms=5000
recipe="$source_dir/configs/recipes/tiny-fake-cpu-dedicated.yaml"
overrides=(cluster.num_nodes=2 cluster.gpus_per_node=2 policy.generation.colocated.resources.num_nodes=1
  cluster.controller_host="$mh_subnet.1" cluster.controller_port="$mh_port" grpo.max_num_steps="$steps" grpo.max_num_epochs=10
  checkpointing.enabled=true checkpointing.save_period=2 runtime.heartbeat_timeout_ms="$timeout_ms"
  logger.log_dir="$mh_work/run")
keys="$mh_work/run.keys"
"$tandem" keys "$keys" --world 4 >/dev/null
controller="tcp://$mh_subnet.1:$mh_port"

# run ATTEMPT: the controller and the four members, started in their namespaces.
run() {
  local attempt="$1"
  mh_start "$mh_ns_ctl" ctl-host "$mh_work/controller$attempt.txt" env TANDEM_KEYS="$keys" \
    "$tandem" run "$recipe" "${overrides[@]}" --no-spawn
  ctl_pid=$mh_last_pid
  mh_wait_listen || mh_fail "the controller does not listen on port $mh_port" "$mh_work/controller$attempt.txt"
  mh_start_members "$tandem" "$keys" "$controller" ".$attempt"
}

# The first run, cut once a checkpoint is complete.
run 1
ctl_log="$mh_work/controller1.txt"
for _ in $(seq 600); do
  [ -e "$mh_work/run/checkpoints/step_2/manifest.json" ] && break
  kill -0 "$ctl_pid" 2>/dev/null || mh_fail "the controller ended before its first checkpoint" "$ctl_log"
  sleep 0.05
done
[ -e "$mh_work/run/checkpoints/step_2/manifest.json" ] || mh_fail "no checkpoint within 30 s" "$ctl_log"
mh_cut_link rol
cut_at=$SECONDS
echo "cut the link of the rollout host ($mh_ns_rol, $mh_subnet.3) after: $(grep -E 'checkpoint step_[0-9]+ .* saved' "$ctl_log" | tail -1)"
mh_wait_exit "$ctl_pid" 60
[ "$mh_status" != 124 ] || mh_fail "the controller did not end within 60 s of the cut" "$ctl_log"
[ "$mh_status" != 0 ] || mh_fail "the controller exited with status 0 after the cut" "$ctl_log"
echo "the controller exited with status $mh_status, $((SECONDS - cut_at)) s after the cut"
grep -qE "[^f] $steps steps done in" "$ctl_log" && mh_fail "the run completed before the cut" "$ctl_log"
# The error names a rollout member: its rank, its role and its host.
lost="$(grep -E 'tandem run: failed: .*member ([23]) \[rollout-[01]\] \(pid [0-9]+ on rollout-host\)' "$ctl_log")" ||
  mh_fail "the controller's error names no lost rollout member on rollout-host" "$ctl_log"
echo "$lost"
lost_rank="$(sed -E 's/.*member ([23]) \[rollout.*/\1/' <<<"$lost")"
echo "member $lost_rank's address: $(grep -E 'data plane bound to' "$mh_work/member$lost_rank.1.txt")"
for rank in 0 1 2 3; do
  mh_wait_exit "${member_pids[$rank]}" 30
  [ "$mh_status" != 124 ] || mh_fail "member $rank did not exit within 30 s" "$mh_work/member$rank.1.txt"
  echo "member $rank exited with status $mh_status: $(tail -1 "$mh_work/member$rank.1.txt")"
done

# The rerun, link mended: it resumes from the newest complete checkpoint and completes.
mh_mend_link rol
newest=""
for dir in "$mh_work"/run/checkpoints/step_*; do
  [[ "${dir##*_}" =~ ^[0-9]+$ ]] || continue  # not step_N.partial
  [ -e "$dir/manifest.json" ] || continue
  if [ -z "$newest" ] || [ "${dir##*_}" -gt "${newest##*_}" ]; then newest="$dir"; fi
done
[ -n "$newest" ] || mh_fail "no complete checkpoint after the cut" "$mh_work/controller1.txt"
run 2
ctl_log="$mh_work/controller2.txt"
mh_wait_exit "$ctl_pid" 120
[ "$mh_status" = 0 ] || mh_fail "the rerun's controller exited with status $mh_status" "$ctl_log" "$mh_work"/member*.2.txt
grep -E "run directory: .*\(resuming from .*$(basename "$newest")\)" "$ctl_log" ||
  mh_fail "the rerun did not say it resumes from $newest" "$ctl_log"
grep -m1 -E "resumed from .*$(basename "$newest"): [0-9]+ of $steps steps done" "$ctl_log" ||
  mh_fail "the rerun did not resume from $newest" "$ctl_log"
grep -E "[^f] $steps steps done in" "$ctl_log" || mh_fail "the rerun did not complete $steps steps" "$ctl_log"
for rank in 0 1 2 3; do
  mh_wait_exit "${member_pids[$rank]}" 30
  [ "$mh_status" = 0 ] || mh_fail "member $rank of the rerun exited with status $mh_status" "$mh_work/member$rank.2.txt"
done
echo "passed in $((SECONDS - started)) s"
