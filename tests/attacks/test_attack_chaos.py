"""The chaos run of issue 11: every attack at once, under xdist, then a SIGTERM.

21 tasks for the ReAct agent on the real engine, with a real scripted endpoint on 127.0.0.1:
16 ordinary masked tasks (14 YAML files, 2 rows of a SUPER JSONL file) whose one step runs the
`act.py` their prefix wrote, printing the landmark `done`; and the attacks: a task file nested
5,000 deep, a junk line in the JSONL file, one endpoint reply with usage.prompt_tokens = -10**12,
a task that prints one 500 MB line, a task whose landmark `(a+)+$` backtracks catastrophically on
its output; and one task that sleeps for an hour, so the run is still going when the signal comes.
Every reply is the same action; the poisoned one goes to the ordinary task whose query names
POISONED_TASK (routed by the scripted server: under -n 2 which request comes third is chance, and
when it went to the 500 MB task that task never printed).

When the 16 ordinary tasks have results (or a deadline passed), the run's process group gets
SIGTERM. Then: every ordinary task has exactly one result in results.jsonl and in JUnit (15
passed, 1 `llm_error`), the two broken inputs are one error record each, the harness's peak memory
(the summed RSS of the controller and its workers, sampled every 0.1 s) stays under 400 MB, and no
container, lease or key folder of the run is left.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from pytest_super.kernels.docker.engine import docker_client_for
from pytest_super.kernels.docker.image import build_image
from tests.support.attack_runs import Run, junit_cases, recorded, run_leftovers
from tests.support.openai_server import FakeOpenAIServer, Status

pytestmark = pytest.mark.docker

HARNESS_PEAK_LIMIT_MB = 400  # the bound for the controller plus its workers
ORDINARY_YAML = 14
#: the 16 ordinary tasks took 70-90 s under -n 2 here (a loaded 2-core machine): SIGTERM after this
#: at the latest, whatever is still running
ORDINARY_DEADLINE_S = 240
POISONED_TASK = "chaos05_cpu"
ACT = "Thought: Run the prepared script.\nAction: execute\n<content>\nexec(open('act.py').read())\n"


def masked_yaml(task_id: str, act: str, landmarks: list[str]) -> str:
    body = "\n".join("      " + line for line in act.splitlines())
    return (
        f"id: {task_id}\n"
        f"query: Run act.py (task {task_id}).\n"
        "answer: {x: 1}\n"
        f"landmarks: {json.dumps(landmarks)}\n"
        "pre_executed:\n"
        "  - execute: |\n"
        "      %%writefile act.py\n"
        f"{body}\n"
    )


def super_row(task_id: str, act: str) -> bytes:
    cell = json.dumps({"type": "execute", "content": f"%%writefile act.py\n{act}\n"})
    row = {
        "task_id": task_id,
        "query": "Run act.py.",
        "answer": json.dumps({"x": 1}),
        "landmarks": ["done"],
        "pre_execute_cells": [cell],
    }
    return json.dumps(row).encode()


def build_project(root: Path) -> list[str]:
    """Write the 21 tasks; return the ids of the 16 ordinary ones."""
    (root / "pytest.ini").write_text("[pytest]\nsuper_tasks = tasks\n")
    masked = root / "tasks" / "masked"
    masked.mkdir(parents=True)
    ordinary = []
    for i in range(ORDINARY_YAML):
        task_id = f"chaos{i:02d}_cpu"
        (masked / f"{task_id}.yaml").write_text(masked_yaml(task_id, "print('done')", ["done"]))
        ordinary.append(task_id)
    rows = [
        super_row("chaosj0_cpu", "print('done')"),
        b"\x00\xff junk \x80",
        super_row("chaosj1_cpu", "print('done')"),
        # still running when the SIGTERM comes (without it a fast machine finished the whole run
        # first, and the signal landed in the exiting process: exit -15). Collected last: an xdist
        # worker runs an item only once the next is queued on it, so one behind it would wait.
        super_row("sleeper_cpu", "import time\ntime.sleep(3600)"),
    ]
    (root / "tasks" / "masked.jsonl").write_bytes(b"\n".join(rows) + b"\n")
    ordinary += ["chaosj0_cpu", "chaosj1_cpu"]
    deep = "[" * 5000 + "1" + "]" * 5000
    (masked / "deep_cpu.yaml").write_text(f"id: deep_cpu\nquery: q\nanswer: {deep}\n")
    big = "import sys\nchunk = 'y' * (1 << 20)\nfor _ in range(500):\n    sys.stdout.write(chunk)\nprint()\nprint('done')"
    (masked / "bigprint_cpu.yaml").write_text(masked_yaml("bigprint_cpu", big, ["done"]))
    (masked / "regex_cpu.yaml").write_text(
        masked_yaml("regex_cpu", "print('a' * 64 + 'b')", ["(a+)+$"])
    )
    return ordinary


class MemoryWatch:
    """Peak of the summed RSS of every process in one session (the run's controller and its
    xdist workers: they run in the session the run was started in; kernels run in containers)."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.peak_kb = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            total = 0
            for pid in (p for p in os.listdir("/proc") if p.isdigit()):
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[3]) != self.session_id:
                        continue
                    status = Path(f"/proc/{pid}/status").read_text()
                except (OSError, ValueError, IndexError):
                    continue
                for line in status.splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            self.peak_kb = max(self.peak_kb, total)
            self.samples += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def test_chaos_run_under_xdist_then_sigterm(tmp_path: Path) -> None:
    # the JSONL rows would run in SUPER's colab image by default; the attacks need no more than this
    image = build_image(offline=True, log=lambda line: None)
    engine = docker_client_for(None)
    ordinary = build_project(tmp_path)
    server = FakeOpenAIServer()
    poisoned = FakeOpenAIServer._completion({}, ACT)
    poisoned["usage"]["prompt_tokens"] = -(10**12)
    server.script([ACT] * 40)
    server.route(f"(task {POISONED_TASK})", Status(200, body=poisoned))
    junit = tmp_path / "junit.xml"
    run = Run(
        tmp_path,
        "--super-agent=react",
        "--super-model=gpt-4o",
        f"--super-base-url={server.base_url}",
        "--super-steps=1",
        "--super-pass-metric=landmarks",
        f"--super-image={image}",
        "-n",
        "2",
        f"--junitxml={junit}",
    )
    memory = MemoryWatch(run.proc.pid)
    try:
        with_deadline = time.monotonic() + ORDINARY_DEADLINE_S
        while time.monotonic() < with_deadline and run.proc.poll() is None:
            if set(ordinary) <= set(recorded(tmp_path / "reports")):
                break
            time.sleep(0.5)
        assert run.proc.poll() is None, "the run ended before the SIGTERM: " + run.output()[-3000:]
        os.killpg(run.proc.pid, signal.SIGTERM)
        code = run.wait(120)
    finally:
        run.kill()
        memory.stop()
        server.stop()
    out = run.output()
    assert "INTERNALERROR" not in out, out[-5000:]
    assert code == pytest.ExitCode.INTERRUPTED, out[-5000:]

    # every condition is checked and all that fail are reported together: some wait for other
    # branches (see the module docstring), the rest must hold already
    problems = []
    done = recorded(tmp_path / "reports")  # asserts one line per task id
    missing = sorted(set(ordinary) - set(done))
    if missing:
        problems.append(f"ordinary tasks without a result in results.jsonl: {missing}")
    outcomes = sorted(done[t] for t in ordinary if t in done)
    if outcomes != ["error"] + ["passed"] * (len(outcomes) - 1):
        problems.append(f"outcomes: {[(t, done.get(t)) for t in ordinary]}")
    lines = [
        json.loads(ln)
        for ln in next((tmp_path / "reports").glob("*/results.jsonl")).read_text().splitlines()
    ]
    statuses = {r["task_id"]: r.get("exit_status") for r in lines}
    if [t for t, status in statuses.items() if status == "llm_error"] != [POISONED_TASK]:
        problems.append(f"llm_error should be {POISONED_TASK}'s alone: {statuses}")
    for broken in ("tasks/masked/deep_cpu.yaml", "tasks/masked.jsonl::line2"):
        if done.get(broken) != "error":
            problems.append(f"{broken}: {done.get(broken)} (expected one error record)")
    cases = junit_cases(junit) if junit.exists() else {}  # asserts one case per name
    wrong = {
        t: cases.get(t)
        for t in ordinary
        if cases.get(t) != {"passed": "passed"}.get(done.get(t), "error" if done.get(t) else None)
    }
    if not junit.exists() or wrong:
        problems.append(f"JUnit cases that do not match results.jsonl: {wrong}")
    peak_mb = memory.peak_kb / 1024
    print(f"harness peak RSS (controller + workers): {peak_mb:.0f} MB, {memory.samples} samples")
    if memory.samples < 10 or peak_mb >= HARNESS_PEAK_LIMIT_MB:
        problems.append(f"harness peak RSS {peak_mb:.0f} MB (limit {HARNESS_PEAK_LIMIT_MB} MB)")
    left = run_leftovers(engine, tmp_path / "reports")
    if left:
        problems.append(f"containers or leases left: {left}")
    if run.key_folders():
        problems.append(f"key folders left: {run.key_folders()}")
    assert not problems, "\n".join(problems) + "\n" + out[-3000:]
