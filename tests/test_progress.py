"""`--super-progress` (issue 33 item 5): the controller's status line of an xdist run, on a real
terminal (tmux: a terminal emulator whose screen we read) and in a pipe, on the local backend (a
real ipykernel, no Docker) with tiny tasks; and the ETA's arithmetic (progress.Tally)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_super import durations
from pytest_super.progress import INTERVAL_ENV, Tally, known
from tests.support.projects import FAIL, make_project, sleep_then_answer, task_yaml

STATUS = re.compile(
    r"pytest-super: (\d+) running, (\d+) queued, (\d+)/(\d+) done, (\d+) failed, (\d+) errors?; "
    r"(ETA \d\d:\d\d:\d\d \(in [0-9hms]+\)|ETA unknown \(no duration known yet\)|finished)"
)
RUN = (
    "-p",
    "no:cacheprovider",
    "--super-agent=gold",
    "--super-backend=local",
    "-W",
    "ignore::UserWarning",
    "-n",
    "2",
)


def project(root: Path, tasks: int = 5, sleep: float = 1.5) -> Path:
    """`tasks` tasks of one cell sleeping `sleep` s, and one whose gold answer is not reproduced
    (an environment error: a gold miss is never a failure)."""
    made = {f"expert/t{i}": task_yaml(f"t{i}", sleep_then_answer(sleep)) for i in range(tasks)}
    made["expert/bad"] = task_yaml("bad", FAIL)
    return make_project(root, made)


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    clean.pop("PYTEST_SUPER_CONTROLLER_PID", None)
    return {**clean, **extra}


def piped(project: Path, *args: str, interval: str = "1") -> list[tuple[float, str]]:
    """pytest's output through a pipe, each line with when it arrived (monotonic)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *RUN, *args],
        cwd=project,
        env=env(**{INTERVAL_ENV: interval}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    lines = [(time.monotonic(), raw.decode(errors="replace")) for raw in proc.stdout]
    assert proc.wait(timeout=300) == 1, "".join(line for _, line in lines)  # `bad` errors
    return lines


def test_in_a_pipe_one_status_line_per_interval_on_lines_of_its_own(tmp_path):
    lines = piped(project(tmp_path))
    text = "".join(line for _, line in lines)
    assert "\r" not in text and "\x1b" not in text, text
    status = [(t, line) for t, line in lines if "pytest-super: " in line and " running, " in line]
    assert len(status) >= 3, text
    for _, line in status:  # each on a line of its own, nothing of pytest's in it
        assert STATUS.fullmatch(line.rstrip("\n")), line
    gaps = [b - a for (a, _), (b, _) in zip(status, status[1:], strict=False)]
    assert min(gaps) > 0.8, gaps  # at most one a second (PYTEST_SUPER_PROGRESS_INTERVAL=1)
    counts = [
        tuple(map(int, STATUS.fullmatch(line.rstrip("\n")).groups()[:6])) for _, line in status
    ]
    assert all(total == 6 for *_, total, _, _ in counts), counts
    done = [c[2] for c in counts]
    assert done == sorted(done) and done[-1] >= 3, counts  # goes up as tasks end
    assert any(c[5] == 1 for c in counts), counts  # the error, once it happened
    # pytest's own lines are whole: the result letters and the summary
    assert re.search(r"^[.E]+\s", text, re.M), text
    assert re.search(r"^=+ 5 passed, 1 error", text, re.M), text


def test_off_and_a_run_on_one_process_print_no_status(tmp_path):
    made = project(tmp_path, tasks=2, sleep=1.5)
    off = "".join(line for _, line in piped(made, "--super-progress=off"))
    assert " running, " not in off and re.search(r"2 passed, 1 error", off), off
    proc = subprocess.run(  # auto: one process (-n 0) has pytest's own line per task
        [sys.executable, "-m", "pytest", *RUN, "-n", "0"],
        cwd=made,
        env=env(**{INTERVAL_ENV: "1"}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1 and " running, " not in proc.stdout, proc.stdout


def test_a_bad_progress_value_is_a_usage_error(tmp_path):
    made = project(tmp_path, tasks=1)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *RUN, "--super-progress=sometimes", "--collect-only"],
        cwd=made,
        env=env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "--super-progress 'sometimes'" in proc.stderr, proc.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (a terminal emulator)")
def test_on_a_terminal_the_line_is_redrawn_in_place_and_pytests_lines_stay_whole(tmp_path):
    made = project(tmp_path, tasks=5, sleep=2)
    socket = f"psp-{os.getpid()}"  # a tmux server of this test's own
    tmux = ["tmux", "-L", socket]
    raw = tmp_path / "raw.out"
    command = " ".join([sys.executable, "-m", "pytest", *RUN, "; echo END-OF-RUN; sleep 120"])
    # the window's size said outright: a COLUMNS inherited from elsewhere, or a size the
    # terminal is not yet known to have, made pytest's writer 80 wide and cut the line (CI)
    environment = env(TERM="xterm", COLUMNS="160", LINES="60")
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "160", "-y", "60", f"cd {made} && {command}"],
        env=environment,
        check=True,
    )
    try:
        subprocess.run([*tmux, "pipe-pane", "-o", f"cat >> {raw}"], check=True)
        screens = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=True
            ).stdout
            screens.append(screen)
            if "END-OF-RUN" in screen:
                break
            time.sleep(0.3)
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
    final = screens[-1]
    assert "END-OF-RUN" in final, final
    during = [s for s in screens if " running, " in s]
    assert len(during) >= 3, screens
    for screen in during:  # one status line at a time, whole, on a line of its own
        shown = [
            line for line in screen.splitlines() if "pytest-super: " in line and "running" in line
        ]
        assert len(shown) == 1 and STATUS.fullmatch(shown[0].rstrip()), screen
    assert len({s for s in during}) >= 2  # it changed
    drawn = raw.read_bytes().decode(errors="replace").count(" running, ")
    assert drawn >= 5, drawn  # redrawn many times ...
    # ... in place: the finished screen holds none of it, and pytest's lines are whole
    assert " running, " not in final, final
    assert re.search(r"^[.E]{6}\s+\[100%\]$", final, re.M), final
    assert re.search(r"^=+ 5 passed, 1 error in [\d.]+s", final, re.M), final


def test_the_eta_spreads_the_known_work_left_over_the_tasks_that_run_at_once():
    known = {"a": 10.0, "b": 10.0, "c": 30.0}
    tally = Tally(estimate=known.get, ids={"a", "b", "c", "d"}, slots=2)
    assert tally.left_s(0.0) is None  # d: nothing known of it, nothing finished to go by
    tally.start("a", 0.0)
    tally.finish("a", "passed", 12.0)  # took 12 s: d is estimated at the mean, 12
    tally.start("c", 12.0)
    # at 17: c has 25 s left, b 10, d 12: 47 s of work on 2 slots, but c alone needs 25
    assert tally.left_s(17.0) == pytest.approx(25.0)
    tally.slots = 1
    assert tally.left_s(17.0) == pytest.approx(47.0)
    assert tally.queued() == 2 and len(tally.running) == 1
    line = tally.line(17.0, 0.0)
    assert line.startswith("pytest-super: 1 running, 2 queued, 1/4 done, 0 failed, 0 errors; ETA ")
    tally.finish("c", "failed", 40.0, node="host-b/abc")
    assert "1 failed" in tally.line(40.0, 0.0) and "host-b/abc: 1 done" in tally.line(40.0, 0.0)


def test_the_eta_comes_only_from_durations_of_the_runs_agent_and_model(tmp_path):
    """Issue 44: a durations file (an earlier run's results.jsonl) of the gold agent gave a react
    run's ETA ("(in 2s)" for most of a 47 s run); now it gives none until a task of this run ends."""
    run = tmp_path / "20260101-000000-aa"
    run.mkdir()
    (run / "results.jsonl").write_text(
        "".join(
            f'{{"task_id": "t{i}", "outcome": "passed", "duration_s": 2, "agent": "gold"}}\n'
            for i in range(3)
        )
    )
    gold = durations.latest_earlier_run(tmp_path, agent="gold", model=None)
    assert dict(gold.seconds) == {"t0": 2.0, "t1": 2.0, "t2": 2.0}

    def tally(whose):
        made = Tally(estimate=known(lambda: gold, whose), ids={"t0", "t1", "t2"}, slots=1)
        made.start("t0", 0.0)
        return made

    assert "ETA unknown (no duration known yet)" in tally(("react", "gpt-4o")).line(1.0, 0.0)
    assert "ETA unknown" in tally(("gold", "gpt-4o")).line(1.0, 0.0)  # a model named: not gold's
    assert "(in 5s)" in tally(("gold", None)).line(1.0, 0.0)  # 1 s of t0 left, then 2 + 2
    other = tally(("react", "gpt-4o"))
    other.finish("t0", "passed", 20.0)  # this run's own: t1 and t2 estimated at 20 s each
    assert "(in 40s)" in other.line(20.0, 0.0)


def test_a_task_another_scheduler_finished_counts_as_running_until_its_report():
    """Each task is running, queued or done: the dispatcher no longer runs a task whose result
    it returned, and its report has not come yet (a fresh clone's cluster run printed "3 running,
    1 queued, 2/7 done")."""
    tally = Tally(ids={f"t{i}" for i in range(7)}, slots=4)
    tally.external = lambda: ({"t3": 0.0, "t4": 0.0, "t5": 0.0}, 1)
    tally.finish("t0", "passed", 1.0)
    tally.finish("t1", "passed", 1.0)
    running, queued, done = map(int, STATUS.search(tally.line(2.0, 0.0)).groups()[:3])
    assert (running, queued, done) == (4, 1, 2)


def test_a_task_reported_before_the_schedulers_next_word_is_done_not_running_too():
    """The other way round (a CI run printed a line whose counts did not add up to its 7
    tasks; the code before gave 4 running, 3 queued, 1 done here): the dispatcher's last word
    still has a task running whose report has come; it is counted done."""
    tally = Tally(ids={f"t{i}" for i in range(7)}, slots=4)
    tally.external = lambda: ({"t0": 0.0, "t1": 0.0, "t2": 0.0, "t3": 0.0}, 3)
    tally.finish("t0", "passed", 1.0)
    running, queued, done = map(int, STATUS.search(tally.line(2.0, 0.0)).groups()[:3])
    assert (running, queued, done) == (3, 3, 1)
    tally.finish("t4", "failed", 1.0)  # a queued task reported (no node left for it, say)
    running, queued, done = map(int, STATUS.search(tally.line(2.0, 0.0)).groups()[:3])
    assert (running, queued, done) == (3, 2, 2)
