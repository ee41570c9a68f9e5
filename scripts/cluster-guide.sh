#!/usr/bin/env bash
# docs/cluster.md's step-by-step guide, run end to end on this machine (tests/test_cluster_guide.py
# runs it; it needs root, Docker's engine with the kernel image, and this checkout's .venv):
#
#   scripts/cluster-guide.sh [WORK]        (WORK: a new short folder, default /tmp/cg.XXXXXX)
#
# 1. wheels: `pip wheel` of this checkout (its files as they are, committed or not, as the tests
#    run them), and a second one with the version raised, for the upgrade (the only step that needs PyPI: pip's isolated build fetches
#    setuptools);
# 2. a venv per "machine" (head, worker, controller = head) with pytest-super from the wheel. The
#    one shortcut of this script: the venvs reach ray and the other dependencies through a .pth
#    file naming .venv's site-packages instead of downloading them (the guide installs
#    "$WHEEL[ray]"), and "$VENV/bin/pip" is .venv's pip aimed at the venv (`pip --python`);
# then, in a network namespace of its own with only loopback, holding the node address
# 192.0.2.10 (TEST-NET-1, on lo: Ray binds it and nothing outside the namespace can reach it):
# 3. the head and one worker started with `pytest-super ray-node` (from the wheel), the worker's engine the main one
#    (unix sockets cross network namespaces); what they listen on (ss), `status`;
# 4. `pytest-super image build --executor ray`, then a gold task with --super-executor=ray, and a
#    Ray task saying which pytest-super the worker runs;
# 5. the upgrade: the new wheel installed, the worker restarted, the task run again on it;
# 6. stop, scoped to these nodes: the head keeps running while the worker stops, and a process
#    `ray stop` would kill (a program named raylet) survives both stops; then nothing is left:
#    no process and no listener in the namespace, no container of the runs on the engine.
#
# Each step prints "== N. what (S s)", S the seconds since the start; the last line is
# "cluster-guide: done in S s". On a failure it stops what it started and exits non-zero.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_PY=${BUILD_PY:-$ROOT/.venv/bin/python}
NODE_SCRIPT=$ROOT/scripts/ray-node.sh
HEAD_IP=192.0.2.10
# the sizing of the worker: TASKS tasks of --super-cpus CPUS and --super-mem MEM at once
TASKS=2
CPUS=1
MEM=1g
ENGINE=${ENGINE:-unix:///var/run/docker.sock}
START=${CLUSTER_GUIDE_START:-$EPOCHSECONDS}

step() {
  echo "== $1 ($((EPOCHSECONDS - START)) s)"
}

fail() {
  echo "cluster-guide: $*" >&2
  exit 1
}

# ---- outside the namespace: wheels and venvs ------------------------------------------------
prepare() {
  local work=$1
  step "1. wheels of pytest-super (this checkout, and again with the version raised)"
  mkdir -p "$work/src" "$work/src2" "$work/wheels/1" "$work/wheels/2"
  # the checkout's files as they are (what the tests run), not only what is committed
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    tar --null -T - -c --ignore-failed-read 2>/dev/null) | tee >(tar -x -C "$work/src2") | tar -x -C "$work/src"
  sed -i -E 's/^version = "([^"]+)"/version = "\1.post1"/' "$work/src2/pyproject.toml"
  local PYTHON=$BUILD_PY SRC=$work/src WHEELS=$work/wheels/1
  "$PYTHON" -m pip wheel -q --no-deps "$SRC" -w "$WHEELS" &
  local first=$!
  SRC=$work/src2 WHEELS=$work/wheels/2
  "$PYTHON" -m pip wheel -q --no-deps "$SRC" -w "$WHEELS"
  wait "$first"
  ls "$work"/wheels/*/*.whl

  step "2. a venv per machine (head, worker) with pytest-super from the wheel"
  local site
  site=$("$BUILD_PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  local VENV WHEEL
  WHEEL=$(ls "$work"/wheels/1/*.whl)
  for VENV in "$work/head/venv" "$work/w1/venv"; do
    "$BUILD_PY" -m venv --without-pip "$VENV"
    echo "$site" >"$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/guide-deps.pth"
    printf '#!/bin/sh\nexec %q -m pip --python %q "$@"\n' "$BUILD_PY" "$VENV/bin/python" >"$VENV/bin/pip"
    chmod +x "$VENV/bin/pip"
    "$VENV/bin/pip" install -q --no-deps "$WHEEL"
  done
}

# ---- inside the namespace ---------------------------------------------------------------------
start_worker() {
  local work=$1 NODE_DIR=$1/w1 VENV=$1/w1/venv NODE_IP=$HEAD_IP
  "$VENV/bin/pytest-super" ray-node worker "$NODE_DIR" --address "$HEAD_IP:6379" --ip "$NODE_IP" --docker-host "$ENGINE" --tasks "$TASKS" --super-cpus "$CPUS" --super-mem "$MEM" --python "$VENV/bin/python" --attempts 5
}

# a Ray task (1 CPU: only the worker offers CPUs) says which pytest-super that node imports. From
# the project folder: Ray puts the driver's working folder first on its workers' sys.path, so a
# driver started in this checkout would have the node import the checkout's pytest_super
node_version() {
  local VENV=$1/head/venv
  cd "$1/project"
  "$VENV/bin/python" - "$HEAD_IP:6379" <<'EOF'
import importlib.metadata, sys
import ray

ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=1)
def which():
    import os, pytest_super
    return importlib.metadata.version("pytest-super"), pytest_super.__file__, os.environ.get("DOCKER_HOST")

version, path, engine = ray.get(which.remote())
print(f"node-version: pytest-super {version} from {path}, DOCKER_HOST={engine}")
EOF
  cd "$ROOT"
}

# a gold task, run with --super-executor=ray by the controller (the head's venv)
run_task() {
  local work=$1 VENV=$1/head/venv
  (
    cd "$work/project"
    "$VENV/bin/python" -m pytest tasks --super-agent=gold --super-executor=ray --super-ray-address="$HEAD_IP:6379" --super-cpus "$CPUS" --super-mem "$MEM" -p no:cacheprovider -q
  )
  local run
  run=$(ls -t "$work/project/reports" | grep -v '^\.' | head -n 1)
  echo "$run" >>"$work/runs"
  grep -h '"outcome"' "$work/project/reports/$run/results.jsonl" |
    "$VENV/bin/python" -c 'import json, sys; r = json.loads(sys.stdin.readline()); print("task:", r["task_id"], r["outcome"], "on", r.get("node"))'
}

# every process of this network namespace outside this script's session
namespace_processes() {
  local mine theirs pid
  mine=$(readlink /proc/$$/ns/net)
  local own_sid
  own_sid=$(ps -o sid= -p $$ | tr -d ' ')
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    theirs=$(readlink "/proc/$pid/ns/net" 2>/dev/null) || continue
    [[ $theirs == "$mine" ]] || continue
    [[ $(ps -o sid= -p "$pid" 2>/dev/null | tr -d ' ') == "$own_sid" ]] && continue
    ps -o pid=,sid=,args= -p "$pid" 2>/dev/null || true
  done
}

cleanup_inside() {
  local work=$1
  for dir in "$work/w1" "$work/head"; do
    [[ -f $dir/node.pid ]] && "$NODE_SCRIPT" stop "$dir" --grace 3 >&2 || true
  done
  [[ -f $work/bystander.pid ]] && kill "$(cat "$work/bystander.pid")" 2>/dev/null || true
}

inside() {
  local work=$1
  WORKDIR=$work
  trap 'cleanup_inside "$WORKDIR"' EXIT
  cd "$ROOT"
  ip link set lo up
  ip addr add "$HEAD_IP/32" dev lo

  step "3. the head and a worker (pytest-super ray-node)"
  local NODE_DIR=$work/head VENV=$work/head/venv
  "$VENV/bin/pytest-super" ray-node head "$NODE_DIR" --ip "$HEAD_IP" --python "$VENV/bin/python" --attempts 5
  start_worker "$work"
  echo "worker-command: $(cat "$work/w1/command")"
  echo "listeners:"
  ss -ltnupH | awk '{ print "  " $1, $5, $7 }' | sed -E 's/users:\(\("([^"]+)".*/\1/' | sort -t: -k2 -n
  NODE_DIR=$work/w1
  "$VENV/bin/pytest-super" ray-node status "$NODE_DIR"

  step "4. the kernel image on every node, then a gold task on the cluster"
  "$VENV/bin/pytest-super" image build --executor ray --ray-address "$HEAD_IP:6379"
  mkdir -p "$work/project/tasks/expert"
  printf '[pytest]\nsuper_tasks = tasks\n' >"$work/project/pytest.ini"
  cat >"$work/project/tasks/expert/guide.yaml" <<'EOF'
id: guide
query: 'Report x as a json structured as follows: {"x": 0}.'
answer: {x: 1}
solution:
  - execute: |
      print('{"x": 1}')
EOF
  run_task "$work"
  node_version "$work"

  step "5. upgrade: the new wheel on every machine, the worker restarted"
  # a process `ray stop` would stop (it matches the names raylet, gcs_server, ...), for step 6
  cp /bin/sleep "$work/raylet"
  setsid "$work/raylet" 3600 </dev/null >/dev/null 2>&1 &
  echo $! >"$work/bystander.pid"
  local head_before
  head_before=$(ps -e -o sid= | grep -cx " *$(cat "$work/head/node.pid")")
  local WHEEL
  WHEEL=$(ls "$work"/wheels/2/*.whl)
  for VENV in "$work/head/venv" "$work/w1/venv"; do
    "$VENV/bin/pip" install -q --no-deps --force-reinstall "$WHEEL"
  done
  NODE_DIR=$work/w1
  "$VENV/bin/pytest-super" ray-node stop "$NODE_DIR"
  local head_after
  head_after=$(ps -e -o sid= | grep -cx " *$(cat "$work/head/node.pid")")
  echo "head processes while the worker stopped: $head_before before, $head_after after"
  ((head_after > 0)) || fail "stopping the worker stopped the head"
  start_worker "$work"
  run_task "$work"
  node_version "$work"

  step "6. stop the nodes: theirs only, nothing left"
  NODE_DIR=$work/w1
  "$VENV/bin/pytest-super" ray-node stop "$NODE_DIR"
  NODE_DIR=$work/head
  "$VENV/bin/pytest-super" ray-node stop "$NODE_DIR"
  kill -0 "$(cat "$work/bystander.pid")" || fail "the bystander 'raylet' did not survive the stops"
  echo "bystander: $work/raylet (pid $(cat "$work/bystander.pid")) still runs"
  "$BUILD_PY" - "$(cat "$work/bystander.pid")" <<'EOF'
import sys
import psutil
from ray.autoscaler._private.constants import RAY_PROCESSES

bystander = int(sys.argv[1])
hits = []
for proc in psutil.process_iter(["name", "cmdline"]):
    name, args = proc.info["name"] or "", " ".join(proc.info["cmdline"] or [])
    if any((k in name) if by_name else (k in args) for k, by_name in RAY_PROCESSES):
        hits.append(proc.pid)
print(f"ray-stop-would-stop: {len(hits)} processes of this machine, the bystander "
      f"{'among them' if bystander in hits else 'NOT among them'}")
EOF
  kill "$(cat "$work/bystander.pid")"
  rm -f "$work/bystander.pid"
  local listening left containers label
  listening=$(ss -ltnupH)
  [[ -z $listening ]] || fail "still listening in the namespace: $listening"
  left=$(namespace_processes)
  [[ -z $left ]] || fail "processes left in the namespace: $left"
  label=$("$work/head/venv/bin/python" -c 'from pytest_super.kernels.docker.engine import LABEL_RUN; print(LABEL_RUN)')
  for run in $(cat "$work/runs"); do
    containers=$(docker -H "$ENGINE" ps -aq --filter "label=$label=$run")
    [[ -z $containers ]] || fail "containers of run $run left on $ENGINE: $containers"
  done
  echo "left: no process, no listener, no container"
}

if [[ ${1:-} == --inside ]]; then
  inside "$2"
  exit 0
fi

[[ $(id -u) == 0 ]] || fail "needs root (a network namespace: unshare -n)"
WORK=${1:-$(mktemp -d /tmp/cg.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
((${#WORK} <= 20)) || fail "$WORK: use a shorter folder (Ray's socket paths under it must stay under 108 bytes)"
prepare "$WORK"
CLUSTER_GUIDE_START=$START unshare -n -- "$0" --inside "$WORK"
echo "cluster-guide: done in $((EPOCHSECONDS - START)) s"
