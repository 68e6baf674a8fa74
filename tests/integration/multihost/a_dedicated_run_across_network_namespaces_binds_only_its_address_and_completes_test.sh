#!/usr/bin/env bash
# A dedicated-rollout run across three hosts made of network namespaces (netns_hosts.sh): the
# controller alone on 10.77.0.1, the two policy members (`tandem join`, node 0) on 10.77.0.2, the
# two rollout members (node 1) on 10.77.0.3, each namespace with its own hostname, joined by veth
# pairs to a bridge. The run is secure, as a real multi-host run is: CurveZMQ with a keys file of
# `tandem keys` that the controller and every member read. The test checks that
#   - the controller's port listens on the configured address only (`ss -ltn` in its namespace
#     shows 10.77.0.1:PORT, no wildcard), and a connection to 127.0.0.1:PORT there is refused;
#   - each member joined from its own host (the controller's "member R [...] (pid P on HOST)"
#     lines) and bound its data plane on its own host's address;
#   - the run completes every step and every member is shut down by the controller.
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

steps=6
recipe="$source_dir/configs/recipes/tiny-fake-cpu-dedicated.yaml"
# Two nodes of two devices: node 0 trains, node 1 (whole) generates.
overrides=(cluster.num_nodes=2 cluster.gpus_per_node=2 policy.generation.colocated.resources.num_nodes=1
  cluster.controller_host="$mh_subnet.1" cluster.controller_port="$mh_port" grpo.max_num_steps="$steps"
  logger.log_dir="$mh_work/run")
keys="$mh_work/run.keys"
"$tandem" keys "$keys" --world 4 >/dev/null
controller="tcp://$mh_subnet.1:$mh_port"
ctl_log="$mh_work/controller.txt"

mh_start "$mh_ns_ctl" ctl-host "$ctl_log" env TANDEM_KEYS="$keys" "$tandem" run "$recipe" "${overrides[@]}" --no-spawn
ctl_pid=$mh_last_pid
mh_wait_listen || mh_fail "the controller does not listen on port $mh_port in its namespace" "$ctl_log"

# The control plane binds the configured interface only.
grep -E "controller listening on " "$ctl_log"
listening="$(ip netns exec "$mh_ns_ctl" ss -Hltnp "sport = :$mh_port")"
echo "controller namespace $mh_ns_ctl, ss -ltnp: $listening"
echo "$listening" | grep -q "$mh_subnet.1:$mh_port " || mh_fail "port $mh_port is not bound on $mh_subnet.1: $listening"
! echo "$listening" | grep -qE '(0\.0\.0\.0|\*|\[::\]):'"$mh_port " ||
  mh_fail "port $mh_port is bound on a wildcard address: $listening"
if ip netns exec "$mh_ns_ctl" timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$mh_port" 2>/dev/null; then
  mh_fail "127.0.0.1:$mh_port accepts a connection in the controller's namespace (bound beyond $mh_subnet.1)"
fi
echo "controller namespace: a connection to 127.0.0.1:$mh_port is refused"

mh_start_members "$tandem" "$keys" "$controller" ""
# Every process in its own host's namespace, seen while the run is on.
for _ in $(seq 300); do
  grep -q "all 4 members joined" "$ctl_log" && break
  kill -0 "$ctl_pid" 2>/dev/null || break
  sleep 0.1
done
where="$(ip netns identify "$ctl_pid")"
echo "controller: pid $ctl_pid in namespace $where"
[ "$where" = "$mh_ns_ctl" ] || mh_fail "the controller runs in namespace '$where', not $mh_ns_ctl" "$ctl_log"
for rank in 0 1 2 3; do
  if [ $rank -lt 2 ]; then ns=$mh_ns_pol; else ns=$mh_ns_rol; fi
  where="$(ip netns identify "${member_pids[$rank]}")"
  echo "member $rank: pid ${member_pids[$rank]} in namespace $where"
  [ "$where" = "$ns" ] || mh_fail "member $rank runs in namespace '$where', not $ns" "$mh_work/member$rank.txt"
done

mh_wait_exit "$ctl_pid" 90
[ "$mh_status" = 0 ] || mh_fail "the controller exited with status $mh_status" "$ctl_log" "$mh_work"/member*.txt
for rank in 0 1 2 3; do
  mh_wait_exit "${member_pids[$rank]}" 30
  [ "$mh_status" = 0 ] || mh_fail "member $rank exited with status $mh_status" "$mh_work/member$rank.txt"
done

# Each member joined from its own host and bound its data plane there.
for rank in 0 1 2 3; do
  if [ $rank -lt 2 ]; then host=policy-host address=$mh_subnet.2; else host=rollout-host address=$mh_subnet.3; fi
  line="$(grep -E "member $rank \[[a-z]+-[0-9]+\] \(pid [0-9]+ on $host\) joined" "$ctl_log")" ||
    mh_fail "the controller did not see member $rank join from $host" "$ctl_log"
  echo "$line"
  line="$(grep -E "data plane bound to .*tcp://$address:" "$mh_work/member$rank.txt")" ||
    mh_fail "member $rank did not bind its data plane on $address" "$mh_work/member$rank.txt"
  echo "$line"
done
line="$(grep -E "[^f] $steps steps done in" "$ctl_log")" || mh_fail "the run did not complete $steps steps" "$ctl_log"
echo "$line"
grep -E "the run ended after [0-9]+ ms; all 4 members left" "$ctl_log" | tail -1
echo "passed in $((SECONDS - started)) s"
