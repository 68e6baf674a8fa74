# shellcheck shell=bash disable=SC2034,SC2154  # sets variables for the tests; printf -v sets mh_ns_*
# Sourced by the multi-host tests: three "hosts" as network namespaces on one machine, each with its
# own address and hostname, joined by veth pairs to a bridge in a fourth namespace (the switch):
#
#   controller host  10.77.0.1  --veth--+
#   policy host      10.77.0.2  --veth--+-- bridge (switch namespace)
#   rollout host     10.77.0.3  --veth--+
#
# Namespaces are named after the test's PID, so parallel runs do not collide; the addresses live
# inside them. mh_cleanup (set as the EXIT trap by mh_setup) kills every process mh_start started and
# deletes the namespaces, on every exit path. Needs root and iproute2 (ip); without them the test
# exits 77 (CTest: skipped), saying why, unless TANDEM_CI_NO_SKIP=1, which makes that a failure.

mh_subnet=10.77.0
mh_port=29650
mh_pids=()
mh_namespaces=()

mh_skip() {
  if [ "${TANDEM_CI_NO_SKIP:-0}" = 1 ]; then
    echo "FAILED: cannot run here ($1), and TANDEM_CI_NO_SKIP=1 makes that a failure" >&2
    exit 1
  fi
  echo "skipped: $1"
  exit 77
}

mh_fail() {
  echo "FAILED: $1" >&2
  shift
  for f in "$@"; do
    echo "--- $f:" >&2
    cat "$f" >&2
  done
  exit 1
}

# Checks what the test needs: root, ip, ss, unshare, and that a namespace with a bridge and a veth
# pair can be made here.
mh_require() {
  [ "$(id -u)" = 0 ] || mh_skip "needs root (network namespaces, veth pairs)"
  for tool in ip ss unshare hostname timeout; do
    command -v "$tool" >/dev/null || mh_skip "$tool is not installed (ip, ss: apt-get install iproute2)"
  done
  local probe="tmh$$probe" msg
  msg="$(ip netns add "$probe" 2>&1)" || mh_skip "ip netns add is not permitted here: $msg"
  # A bridge and a veth pair too (a kernel without them: skipped, not failed half-way).
  msg="$( { ip -n "$probe" link add br0 type bridge && ip -n "$probe" link add v0 type veth peer name v1; } 2>&1)" || {
    ip netns del "$probe"
    mh_skip "bridges or veth pairs cannot be made here: $msg"
  }
  ip netns del "$probe"
}

mh_cleanup() {
  local pid ns
  for pid in "${mh_pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${mh_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ns in "${mh_namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  [ -z "${mh_work:-}" ] || rm -rf "$mh_work"
}

# mh_setup: the switch and the hosts ctl (.1), pol (.2) and rol (.3); sets mh_ns_ctl, mh_ns_pol,
# mh_ns_rol (namespace names) and mh_work (a scratch directory every host sees, like a shared
# filesystem: the run directory and the keys file live there).
mh_setup() {
  local build="$1" id=$$
  trap mh_cleanup EXIT
  trap 'exit 130' INT TERM
  mh_work="$(mktemp -d "$build/multihost_test.XXXXXX")"
  mh_ns_switch="tmh${id}sw"
  ip netns add "$mh_ns_switch" && mh_namespaces+=("$mh_ns_switch")
  ip -n "$mh_ns_switch" link add br0 type bridge
  ip -n "$mh_ns_switch" link set br0 up
  local host n=1 ns
  for host in ctl pol rol; do
    ns="tmh${id}${host}"
    ip netns add "$ns" && mh_namespaces+=("$ns")
    # The switch's end is named after the host: mh_cut_link and mh_mend_link take it down and up.
    ip -n "$mh_ns_switch" link add "to-$host" type veth peer name eth0 netns "$ns"
    ip -n "$mh_ns_switch" link set "to-$host" master br0 up
    ip -n "$ns" addr add "$mh_subnet.$n/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    printf -v "mh_ns_$host" '%s' "$ns"
    n=$((n + 1))
  done
  # The hosts see one another before anything starts.
  local _
  for _ in $(seq 50); do
    mh_reaches "$mh_ns_pol" "$mh_subnet.1" && mh_reaches "$mh_ns_rol" "$mh_subnet.2" && return 0
    sleep 0.1
  done
  mh_fail "the namespaces do not reach one another over the bridge"
}

# mh_reaches NS ADDRESS: whether NS reaches ADDRESS, by a TCP connection to port 9 (discard; nothing
# listens there, so a reachable host refuses it at once); no ping needed.
mh_reaches() {
  local msg
  msg="$(ip netns exec "$1" timeout 1 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1)" && return 0
  [[ "$msg" == *"Connection refused"* ]]
}

# mh_start NS HOSTNAME LOG CMD...: CMD in namespace NS with its own hostname (a UTS namespace), in
# the background, output to LOG; its PID (the command's own: ip netns exec and unshare exec it)
# is in mh_last_pid and remembered for cleanup.
mh_start() {
  local ns="$1" name="$2" log="$3"
  shift 3
  # shellcheck disable=SC2016  # expanded by sh -c
  ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name" "$@" >"$log" 2>&1 &
  mh_last_pid=$!
  mh_pids+=("$mh_last_pid")
}

# mh_wait_exit PID SECONDS: waits for a started process; its exit status is in mh_status
# (124: still running after SECONDS, then killed).
mh_wait_exit() {
  local pid="$1" seconds="$2" _
  for _ in $(seq $((seconds * 10))); do
    if ! kill -0 "$pid" 2>/dev/null; then
      mh_status=0
      wait "$pid" || mh_status=$?
      return 0
    fi
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  mh_status=124
}

# mh_wait_listen: waits until the controller's port is listening in the controller's namespace.
mh_wait_listen() {
  local _
  for _ in $(seq 300); do
    ip netns exec "$mh_ns_ctl" ss -Hltn "sport = :$mh_port" | grep -q LISTEN && return 0
    sleep 0.1
  done
  return 1
}

mh_cut_link() { ip -n "$mh_ns_switch" link set "to-$1" down; }
mh_mend_link() { ip -n "$mh_ns_switch" link set "to-$1" up; }

# mh_start_members TANDEM KEYS CONTROLLER SUFFIX: the four members (`tandem join`), ranks 0 and 1
# on the policy host, 2 and 3 on the rollout host, each logging into $mh_work/memberRANK$SUFFIX.txt;
# sets member_pids.
mh_start_members() {
  local tandem="$1" keys="$2" controller="$3" suffix="$4" rank ns host
  member_pids=()
  for rank in 0 1 2 3; do
    if [ $rank -lt 2 ]; then ns=$mh_ns_pol host=policy-host; else ns=$mh_ns_rol host=rollout-host; fi
    mh_start "$ns" "$host" "$mh_work/member$rank$suffix.txt" env TANDEM_KEYS="$keys" TANDEM_LOCAL_MEMBERS=2 \
      "$tandem" join --controller "$controller" --rank $rank --world 4
    member_pids+=("$mh_last_pid")
  done
}
