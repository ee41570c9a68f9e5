#!/usr/bin/env bash
# Start, stop and inspect one Ray node of a pytest-super cluster: `pytest-super ray-node` runs it
# (it ships in the package; docs/cluster.md walks through it, scripts/cluster-guide.sh runs it).
#
#   pytest-super ray-node head   DIR [--ip ADDR] [--port 6379] [--ports-from 6380] [OPTIONS]
#   pytest-super ray-node worker DIR --address HEAD:6379 --docker-host URL
#                                --tasks N --super-cpus C --super-mem M [--ip ADDR] [OPTIONS]
#   pytest-super ray-node stop   DIR [--grace S]     (default 15 s before SIGKILL)
#   pytest-super ray-node status DIR
#
# DIR is the node's own folder (keep it short: Ray's unix sockets live under it and a socket path
# must stay under 108 bytes). It holds the node's Ray temp dir (DIR/t, given as --temp-dir), its
# log (DIR/node.log), the exact command it ran (DIR/command), the cluster's address (DIR/address)
# and the pid of its `ray start --block` (DIR/node.pid), which leads a session of its own: every
# process of the node (gcs_server, raylet, agents, Ray workers) stays in that session, and `stop`
# signals that session and nothing else. `ray stop` is never used: it has no --temp-dir or any
# other scope and stops every Ray process of the machine (ray/scripts/scripts.py: it matches
# process names such as raylet and gcs_server).
#
# Sizing: a worker offers Ray --num-cpus = N x C and --memory = N x M bytes, N the tasks it should
# hold at once and C/M the run's --super-cpus/--super-mem (M read as the engine and the executor
# read it: k, m, g are powers of 1024), so Ray places exactly N tasks there. A head offers no CPU
# and no memory (--num-cpus=0 --memory=0): no task lands on it unless --tasks is given.
#
# Options (head and worker):
#   --ip ADDR                 --node-ip-address: the address other nodes reach this one at
#   --ports-from P            the node's fixed ports: node manager P, object manager P+1,
#                             dashboard agent P+2/P+3, metrics P+4, runtime env agent P+5, a
#                             head's Ray client server P+6, autoscaler and dashboard metrics
#                             P+7/P+8 (AUTOSCALER_METRIC_PORT, DASHBOARD_METRIC_PORT), Ray
#                             workers P+100..P+199 (default 6380 for a head, 20000 for a worker)
#   --object-store-memory B   Ray's object store (default 200m; Ray's own: 30% of available memory)
#   --python PY               the Python pytest-super[ray] is installed in (default: the one
#                             `pytest-super ray-node` runs in: $PYTEST_SUPER_NODE_PYTHON;
#                             else python3);
#                             `PY -m ray.scripts.scripts` is that environment's `ray` command
#   --wait S                  seconds to wait for `Ray runtime started.` (default 120)
#   --attempts K              starts when Ray's 30 s for the raylet to register with the GCS
#                             run out (a loaded machine; default 3)
# Head only: --port P (the GCS: the cluster's address, default 6379), --dashboard (Ray's dashboard and
# state API on 127.0.0.1:8265; off by default).
set -euo pipefail

PROG=${PYTEST_SUPER_NODE_PROG:-pytest-super ray-node}

die() {
  echo "$PROG: $*" >&2
  exit 2
}

usage() {
  sed -n '5,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Docker's memory size ("4g", "512m", "1073741824") in bytes, as docker.utils.parse_bytes reads
# it; $2 names the option it came from
bytes_of() {
  local size=${1,,}
  size=${size%b}
  [[ $size =~ ^([0-9]+)([kmg]?)$ ]] || die "$2 $1: not a size (examples: 4g, 512m)"
  local n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case $unit in
    k) echo $((n << 10)) ;;
    m) echo $((n << 20)) ;;
    g) echo $((n << 30)) ;;
    *) echo "$n" ;;
  esac
}

# N x C as a whole number of CPUs (Ray's --num-cpus takes an integer)
cpus_of() {
  local tasks=$1 cpus=$2
  awk -v n="$tasks" -v c="$cpus" 'BEGIN {
    if (c !~ /^[0-9]+(\.[0-9]+)?$/) exit 3
    t = n * c; if (t != int(t)) exit 4; printf "%d\n", t }' || {
    case $? in
      3) die "--super-cpus $cpus: not a number of CPUs" ;;
      *) die "--tasks $tasks x --super-cpus $cpus is not a whole number of CPUs (Ray's --num-cpus)" ;;
    esac
  }
}

# the processes of the session `ray start --block` leads (pid = session id)
session_pids() {
  ps -e -o pid=,sid= | awk -v s="$1" '$2 == s { print $1 }'
}

alive() {
  [[ -f $1/node.pid ]] && [[ -n $(session_pids "$(cat "$1/node.pid")") ]]
}

start_node() {
  local role=$1 dir=$2
  shift 2
  local ip="" port=6379 ports_from="" address="" docker_host=${DOCKER_HOST:-}
  local tasks="" super_cpus="" super_mem="" store=200m python=${PYTEST_SUPER_NODE_PYTHON:-python3} wait_s=120 dashboard=0
  local attempts=3
  while (($#)); do
    case $1 in
      --ip) ip=$2 ;;
      --port) port=$2 ;;
      --ports-from) ports_from=$2 ;;
      --address) address=$2 ;;
      --docker-host) docker_host=$2 ;;
      --tasks) tasks=$2 ;;
      --super-cpus) super_cpus=$2 ;;
      --super-mem) super_mem=$2 ;;
      --object-store-memory) store=$2 ;;
      --python) python=$2 ;;
      --wait) wait_s=$2 ;;
      --attempts) attempts=$2 ;;
      --dashboard) dashboard=1; shift; continue ;;
      *) die "unknown option $1 for $role (see: $PROG --help)" ;;
    esac
    shift 2 || die "option $1 needs a value"
  done
  if alive "$dir"; then
    die "a node already runs from $dir (session $(cat "$dir/node.pid")): '$PROG stop $dir' first"
  fi
  mkdir -p "$dir/t"
  dir=$(cd "$dir" && pwd)

  local cmd=("$python" -m ray.scripts.scripts start --block "--temp-dir=$dir/t" --disable-usage-stats)
  [[ -n $ip ]] && cmd+=("--node-ip-address=$ip")
  if [[ $role == head ]]; then
    ports_from=${ports_from:-6380}
    cmd+=(--head "--port=$port" "--ray-client-server-port=$((ports_from + 6))")
    if ((dashboard)); then
      cmd+=(--include-dashboard=true --dashboard-host=127.0.0.1 --dashboard-port=8265)
    else
      cmd+=(--include-dashboard=false)
    fi
    echo "${ip:-127.0.0.1}:$port" >"$dir/address"
  else
    [[ -n $address ]] || die "a worker needs --address HEAD_IP:PORT (the head's DIR/address)"
    [[ -n $docker_host ]] || die "a worker needs --docker-host (its own engine, e.g. unix:///var/run/docker.sock)"
    [[ -n $tasks ]] || die "a worker needs --tasks N with --super-cpus and --super-mem (sizing)"
    ports_from=${ports_from:-20000}
    cmd+=("--address=$address")
    echo "$address" >"$dir/address"
  fi
  local num_cpus=0 memory=0 store_bytes
  if [[ -n $tasks ]]; then
    [[ -n $super_cpus && -n $super_mem ]] || die "--tasks needs --super-cpus and --super-mem"
    [[ $tasks =~ ^[0-9]+$ ]] || die "--tasks $tasks: not a whole number"
    num_cpus=$(cpus_of "$tasks" "$super_cpus") || exit 2
    memory=$(bytes_of "$super_mem" --super-mem) || exit 2
    memory=$((tasks * memory))
  fi
  store_bytes=$(bytes_of "$store" --object-store-memory) || exit 2
  cmd+=("--num-cpus=$num_cpus" "--memory=$memory" --num-gpus=0 "--object-store-memory=$store_bytes")
  cmd+=(
    "--node-manager-port=$ports_from"
    "--object-manager-port=$((ports_from + 1))"
    "--dashboard-agent-listen-port=$((ports_from + 2))"
    "--dashboard-agent-grpc-port=$((ports_from + 3))"
    "--metrics-export-port=$((ports_from + 4))"
    "--runtime-env-agent-port=$((ports_from + 5))"
    "--min-worker-port=$((ports_from + 100))"
    "--max-worker-port=$((ports_from + 199))"
  )
  printf '%q ' "${cmd[@]}" >"$dir/command"
  echo >>"$dir/command"

  local attempt
  for ((attempt = 1; ; attempt++)); do
    launch "$dir" "$docker_host" "$ports_from" "${cmd[@]}"
    if wait_started "$role" "$dir" "$wait_s"; then
      echo "$PROG: $role node started from $dir (session $(cat "$dir/node.pid"), cluster $(cat "$dir/address"))"
      return
    fi
    # Ray gives a raylet 30 s to register with the GCS (ray/_private/node.py), which a loaded
    # machine can miss: start again, --attempts times in all
    grep -q "timed out during startup" "$dir/node.log" && ((attempt < attempts)) || break
    echo "$PROG: the $role node of $dir timed out registering with the GCS; starting it again" >&2
    stop_node "$dir" --grace 3 >/dev/null
  done
  tail -n 30 "$dir/node.log" >&2
  stop_node "$dir" --grace 3 >/dev/null
  die "the $role node of $dir did not start (log above: $dir/node.log)"
}

# `ray start --block` ($4...) for node folder $1 in a new session (setsid does not fork here: a
# background job of a script leads no group), with its own engine ($2); RAY_ADDRESS of the caller
# must not leak into the node
launch() {
  local dir=$1 docker_host=$2 ports_from=$3
  shift 3
  (
    unset RAY_ADDRESS
    export DOCKER_HOST=$docker_host RAY_USAGE_STATS_ENABLED=0 PYTEST_SUPER_RAY_NODE=$dir
    # the two metrics ports Ray otherwise fixes at 44217 and 44227 on every node
    export AUTOSCALER_METRIC_PORT=$((ports_from + 7)) DASHBOARD_METRIC_PORT=$((ports_from + 8))
    [[ -n $docker_host ]] || unset DOCKER_HOST
    exec setsid "$@" >"$dir/node.log" 2>&1 </dev/null
  ) &
  echo "$!" >"$dir/node.pid"
}

# until the node's log says `Ray runtime started.` (for a worker: its raylet registered with the
# GCS); false when `ray start` stopped first or $3 seconds passed
wait_started() {
  local role=$1 dir=$2 wait_s=$3 pid
  pid=$(cat "$dir/node.pid")
  local deadline=$((SECONDS + wait_s))
  until grep -q "Ray runtime started" "$dir/node.log" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || return 1
    if ((SECONDS > deadline)); then
      echo "$PROG: the $role node of $dir did not start in $wait_s s" >&2
      return 1
    fi
    sleep 0.5
  done
}

# the pids of session $1 whose command name is (or, with "!", is not) raylet / gcs_server
session_part() {
  ps -e -o pid=,sid=,comm= | awk -v s="$1" -v part="$2" '$2 == s {
    if (part == "raylet" && $3 == "raylet") print $1
    else if (part == "rest" && $3 != "raylet" && $3 != "gcs_server" && $1 != s) print $1
    else if (part == "last") print $1 }'
}

# SIGTERM to part $2 of session $1, SIGKILL to what of it is left after $3 s; prints the count
# of processes that needed SIGKILL
stop_part() {
  local sid=$1 part=$2 grace=$3 pids left
  pids=$(session_part "$sid" "$part")
  [[ -n $pids ]] || { echo 0; return; }
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  local deadline=$((SECONDS + grace))
  while [[ -n $(session_part "$sid" "$part") ]] && ((SECONDS < deadline)); do sleep 0.2; done
  left=$(session_part "$sid" "$part")
  # shellcheck disable=SC2086
  [[ -z $left ]] || kill -KILL $left 2>/dev/null || true
  wc -w <<<"$left"
}

# In `ray stop`'s order (its buckets: raylet, then the other processes, then gcs_server and,
# here, `ray start --block` itself), each given a third of the grace period before SIGKILL
stop_node() {
  local dir=$1 grace=15
  [[ ${2:-} == --grace ]] && grace=$3
  [[ -f $dir/node.pid ]] || die "no node.pid in $dir: no node was started from there"
  local sid count killed=0
  sid=$(cat "$dir/node.pid")
  count=$(session_pids "$sid" | wc -l)
  if ((count == 0)); then
    rm -f "$dir/node.pid"
    echo "$PROG: the node of $dir was not running"
    return
  fi
  for part in raylet rest last; do
    killed=$((killed + $(stop_part "$sid" "$part" $((grace / 3 + 1)))))
  done
  while [[ -n $(session_pids "$sid") ]]; do sleep 0.2; done
  rm -f "$dir/node.pid"
  echo "$PROG: stopped the node of $dir ($count processes of session $sid, $killed after SIGKILL)"
}

status_node() {
  local dir=$1
  if ! alive "$dir"; then
    echo "$PROG: no node runs from $dir"
    return 1
  fi
  local sid
  sid=$(cat "$dir/node.pid")
  echo "$PROG: node of $dir running: session $sid, $(session_pids "$sid" | wc -l) processes, cluster $(cat "$dir/address")"
  local python
  python=$(awk '{print $1}' "$dir/command")
  RAY_ADDRESS="" "$python" -m ray.scripts.scripts status --address "$(cat "$dir/address")"
}

(($# >= 2)) || usage
action=$1
dir=$2
shift 2
case $action in
  head | worker) start_node "$action" "$dir" "$@" ;;
  stop) stop_node "$dir" "$@" ;;
  status) status_node "$dir" ;;
  *) usage ;;
esac
