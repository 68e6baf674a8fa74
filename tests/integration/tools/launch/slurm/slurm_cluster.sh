# shellcheck shell=bash disable=SC2034,SC2154  # sets variables for the tests
# Sourced by the Slurm tests: a real Slurm (Debian's slurm-wlm: slurmctld, one slurmd per node,
# munged) on this machine, its nodes n1, n2, ... all on loopback. Debian's slurmd serves one node
# per process when started with -N NAME: every node is declared with NodeHostname=localhost,
# NodeAddr=127.0.0.1 and a port of its own, and its spool directory, pid file and log are named
# after it (%n), so several slurmd processes live side by side (no --enable-multiple-slurmd
# needed; tested with Slurm 22.05 on Debian 12). munged runs with a key and a socket of its own
# (AuthInfo=socket=...), slurm.conf lives in the test's directory (SLURM_CONF, exported, so sbatch,
# srun and the jobs' own srun find it); nothing of the machine's own Slurm or munge is used.
#
# Ports come from the test's PID, so runs of different tests do not collide; sl_cleanup (the EXIT
# trap set by sl_start) cancels every job of this cluster, waits for their processes, stops the
# daemons this test started and removes its directory. Needs root (slurmd runs jobs as their
# user) and the packages slurm-wlm and munge; without them the test exits 77 (CTest: skipped),
# saying why, unless TANDEM_CI_NO_SKIP=1, which makes that a failure.

sl_daemons=()

sl_skip() {
  if [ "${TANDEM_CI_NO_SKIP:-0}" = 1 ]; then
    echo "FAILED: cannot run here ($1), and TANDEM_CI_NO_SKIP=1 makes that a failure" >&2
    exit 1
  fi
  echo "skipped: $1"
  exit 77
}

# sl_fail MESSAGE [FILE...]: fails the test, printing each file.
sl_fail() {
  echo "FAILED: $1" >&2
  shift
  for f in "$@"; do
    echo "--- $f:" >&2
    cat "$f" >&2 || true
  done
  local log
  for log in "${sl_work:-/nonexistent}"/log/*.log; do
    [ -e "$log" ] || continue
    echo "--- the last lines of $log:" >&2
    tail -n 8 "$log" >&2
  done
  exit 1
}

# sl_begin TANDEM_BINARY: what every test does first. Sets tandem (the binary's absolute path),
# checks the tools (sl_require), starts a cluster of 2 nodes of 2 CPUs in the binary's build
# directory (sl_start), sets started (the time) and exports TANDEM and TANDEM_HOME (source_dir,
# the test's checkout) for the launcher.
sl_begin() {
  tandem="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
  sl_require
  sl_start "$(dirname "$tandem")" 2 2
  started=$SECONDS
  export TANDEM="$tandem" TANDEM_HOME="$source_dir"
}

# sl_match_local_run LOCAL_DIR RUN_DIR FAILURE ARG...: `tandem run ARG... logger.log_dir=LOCAL_DIR`
# here (its output in LOCAL_DIR.txt), then fails the test with FAILURE if RUN_DIR's metrics differ
# from that run's (sl_same_metrics); sets same to the comparison's summary.
sl_match_local_run() {
  local local_dir="$1" run_dir="$2" failure="$3"
  shift 3
  "$tandem" run "$@" "logger.log_dir=$local_dir" >"$local_dir.txt" 2>&1 ||
    sl_fail "the local $(basename "$local_dir") run failed" "$local_dir.txt"
  same="$(sl_same_metrics "$local_dir/metrics.jsonl" "$run_dir/metrics.jsonl" 2>&1)" || sl_fail "$failure: $same"
}

sl_require() {
  [ "$(id -u)" = 0 ] || sl_skip "needs root (slurmd starts jobs as their user)"
  local tool
  for tool in slurmctld slurmd munged sbatch srun scontrol squeue scancel sinfo; do
    command -v "$tool" >/dev/null || sl_skip "$tool is not installed (apt-get install slurm-wlm munge)"
  done
}

sl_cleanup() {
  local pid _
  if [ -n "${SLURM_CONF:-}" ] && [ -e "${SLURM_CONF:-}" ]; then
    local jobs=()
    read -r -a jobs <<<"$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')"
    if [ ${#jobs[@]} -gt 0 ]; then  # every process of a job still running killed, then the job ended
      scancel --quiet --full --signal=KILL "${jobs[@]}" >/dev/null 2>&1 || true
      scancel --quiet "${jobs[@]}" >/dev/null 2>&1 || true
      for _ in $(seq 100); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
    fi
  fi
  for pid in "${sl_daemons[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${sl_daemons[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [ -z "${sl_work:-}" ] || rm -rf "$sl_work"
}

# sl_start BUILD_DIR NODES CPUS: the cluster, its nodes n1..nNODES with CPUS CPUs each, all idle;
# sets sl_work (the test's directory, in the build directory, which every "node" sees) and
# sl_port (a free port for the test's own use: the tandem controller's).
sl_start() {
  local build="$1" nodes="$2" cpus="$3" n base
  trap sl_cleanup EXIT
  trap 'exit 130' INT TERM
  sl_work="$(mktemp -d "$build/slurm_test.XXXXXX")"
  chmod 755 "$sl_work"
  base=$((10000 + ($$ % 2000) * 10))  # below the ephemeral ports (32768 and up)
  sl_port=$((base + 9))
  mkdir -p "$sl_work/munge" "$sl_work/state" "$sl_work/log" "$sl_work/spool"
  chmod 700 "$sl_work/munge"
  head -c 1024 /dev/urandom >"$sl_work/munge/munge.key"
  chmod 600 "$sl_work/munge/munge.key"
  munged --force --foreground --socket="$sl_work/munge/munge.sock" --key-file="$sl_work/munge/munge.key" \
    --log-file="$sl_work/munge/munged.log" --pid-file="$sl_work/munge/munged.pid" \
    --seed-file="$sl_work/munge/munged.seed" >"$sl_work/log/munged.out" 2>&1 &
  sl_daemons+=($!)
  for _ in $(seq 50); do [ -S "$sl_work/munge/munge.sock" ] && break; sleep 0.1; done
  [ -S "$sl_work/munge/munge.sock" ] || sl_skip "munged does not start here: $(cat "$sl_work/munge/munged.log" "$sl_work/log/munged.out" 2>/dev/null | tail -3)"
  local names=()
  {
    echo "ClusterName=tandemtest"
    echo "SlurmctldHost=localhost(127.0.0.1)"
    echo "SlurmctldPort=$base"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    # cred_expire: a job credential's lifetime (120 s by default), also how long a requeued job
    # waits before it may start again: until then the nodes refuse it as revoked.
    echo "AuthInfo=socket=$sl_work/munge/munge.sock,cred_expire=5"
    echo "StateSaveLocation=$sl_work/state"
    echo "SlurmdSpoolDir=$sl_work/spool/%n"
    echo "SlurmctldPidFile=$sl_work/slurmctld.pid"
    echo "SlurmdPidFile=$sl_work/slurmd-%n.pid"
    echo "SlurmctldLogFile=$sl_work/log/slurmctld.log"
    echo "SlurmdLogFile=$sl_work/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "JobRequeue=1"
    echo "KillWait=20"
    echo "MinJobAge=600"
    for n in $(seq "$nodes"); do
      echo "NodeName=n$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + n)) CPUs=$cpus RealMemory=1000 State=UNKNOWN"
      names+=("n$n")
      mkdir -p "$sl_work/spool/n$n"
    done
    echo "PartitionName=test Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP"
  } >"$sl_work/slurm.conf"
  export SLURM_CONF="$sl_work/slurm.conf"
  slurmctld -D -i >"$sl_work/log/slurmctld.out" 2>&1 &
  sl_daemons+=($!)
  for n in "${names[@]}"; do
    slurmd -D -N "$n" >"$sl_work/log/slurmd-$n.out" 2>&1 &
    sl_daemons+=($!)
  done
  local idle=""
  for _ in $(seq 300); do
    idle="$(sinfo -h -t idle -o %D 2>/dev/null | head -1)"
    [ "$idle" = "$nodes" ] && break
    sleep 0.1
  done
  [ "$idle" = "$nodes" ] || sl_skip "Slurm does not start here ($idle of $nodes nodes idle after 30 s): $(tail -3 "$sl_work/log/slurmctld.log" "$sl_work"/log/slurmd-*.log 2>/dev/null)"
  echo "Slurm $(sinfo -V | awk '{ print $2 }') on loopback: $(sinfo -h -o '%D node(s) %N, %c CPUs each, %T')"
}

# sl_job_field JOBID FIELD: one field of `scontrol show job` (JobState, ExitCode, Restarts, ...).
sl_job_field() {
  scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

# sl_wait_end JOBID SECONDS: waits for the job to end and its processes to be gone; sets sl_state
# (COMPLETED, FAILED, CANCELLED, ...; TIMEOUT_WAITING when it had not ended) and sl_exit (its
# ExitCode, status:signal).
sl_wait_end() {
  local _
  sl_state=TIMEOUT_WAITING
  for _ in $(seq $(($2 * 10))); do
    case "$(sl_job_field "$1" JobState)" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
        sl_state="$(sl_job_field "$1" JobState)"
        sl_exit="$(sl_job_field "$1" ExitCode)"
        # Until its processes are gone the job is still listed, as completing (CG).
        for _ in $(seq $(($2 * 10))); do
          [ -n "$(squeue -h -j "$1" 2>/dev/null)" ] || return 0
          sleep 0.1
        done
        sl_state=TIMEOUT_WAITING
        return 0
        ;;
    esac
    sleep 0.1
  done
}

# sl_wait_file FILE PATTERN SECONDS: waits until FILE has a line matching PATTERN (grep -E).
sl_wait_file() {
  local _
  for _ in $(seq $(($3 * 10))); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# sl_same_metrics A B: whether two metrics.jsonl hold the same records but for what depends on the
# clock or the machine (keys naming timing, bytes or seconds), as the runtime tests compare them;
# prints the first difference.
sl_same_metrics() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def comparable(o):
    if isinstance(o, dict):
        return {k: comparable(v) for k, v in o.items() if not any(w in k for w in ("timing", "bytes", "seconds"))}
    if isinstance(o, list):
        return [comparable(x) for x in o]
    return o
def records(path):
    return [comparable(json.loads(line)) for line in open(path) if line.strip()]
a, b = records(sys.argv[1]), records(sys.argv[2])
if len(a) != len(b):
    sys.exit(f"{len(a)} records in {sys.argv[1]}, {len(b)} in {sys.argv[2]}")
for i, (x, y) in enumerate(zip(a, b)):
    if x != y:
        keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
        sys.exit(f"record {i + 1} differs in {', '.join(keys)}: {[x.get(k) for k in keys]} vs {[y.get(k) for k in keys]}")
print(f"{len(a)} records equal")
PY
}
