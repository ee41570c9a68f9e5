"""The controller's guardian: a small process that says what a `--super-executor=ray` run left when
its controller ended without ending the run.

A controller killed (SIGKILL: the OOM killer's, a CI runner's) runs no Python code, no `finally`,
no pytest hook. (Ray's own way of ending a driver's process at once, with exit status 1, when the
driver's Ray node is lost, ends only the run's driver process, executors/ray/driver.py: the
controller itself says that.) The guardian is
started with the run, in a session of its own (a Ctrl-C at the terminal is the controller's), and
waits on a pipe whose only writer is the controller (the dead man's switch's loop, deadman.py's
`ended_well`): when the run ends as it should, the controller writes `ended` and the guardian
exits; when the pipe closes without it and the controller's pid is gone, the controller is gone, and
the guardian writes the summary of the results received (results.jsonl), removes the controller's
own folder, and says on the run's standard error what was kept and the command that runs the
rest. The run's Ray driver, its controller gone, cancels the run's tasks and has the nodes remove
their containers; should it be gone too, the tasks end with it and their containers go by their
leases (docs/security.md, "Nothing outlives its owner").

Only the standard library (and deadman.py, process_identity.py) is imported until the
controller is gone: the guardian costs one small
Python process for the run's length.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from pytest_super import deadman
from pytest_super.process_identity import start_ticks

#: what the controller writes when its run ended as it should
ENDED = b"ended\n"


@dataclass(frozen=True)
class Watched:
    """What the guardian needs to know of the run it watches."""

    controller_pid: int
    run_id: str
    agent: str
    run_dir: str
    #: the controller's own folder of the run (`locks.private_dir() / "ray-<run id>"`)
    private: str
    #: the command that runs what did not finish (`--super-resume`)
    resume: str
    #: the command that removes what is left of the run on the cluster's nodes
    cleanup: str


class Guardian:
    """The controller's end of the guardian: `release` once the run ended as it should."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def release(self) -> None:
        """The run ended as it should: the guardian exits without a word."""
        pipe: IO[bytes] | None = self.process.stdin
        if pipe is None or pipe.closed:
            return
        try:
            pipe.write(ENDED)
            pipe.close()
        except OSError:
            return  # the guardian is gone already: nothing to release
        self.process.poll()


def start(watched: Watched) -> Guardian:
    """The guardian of this controller, writing to this process's standard error."""
    process = subprocess.Popen(
        [sys.executable, "-m", __name__, json.dumps(asdict(watched))],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # the terminal's Ctrl-C and a SIGKILL of the group are not its
    )
    return Guardian(process)


def main(argv: list[str]) -> int:
    # the controller's Ctrl-C is passed on to its children (interrupts.py: xdist's workers),
    # this one included: the guardian must outlive it, and say nothing of it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watched = Watched(**json.loads(argv[1]))
    pid = watched.controller_pid
    ticks = start_ticks(pid) if os.getppid() == pid else None  # a controller gone already: unknown
    if deadman.ended_well(sys.stdin.buffer, deadman.holder_of(pid, ticks), ENDED):
        return 0  # the controller wrote ENDED
    _after_the_controller(watched)
    return 0


def _after_the_controller(watched: Watched) -> None:
    """The controller ended without ending its run: summary.md from results.jsonl, its own folder
    removed, and what was kept said on standard error."""
    run_dir = Path(watched.run_dir)
    kept, summary = _summary(watched, run_dir)
    shutil.rmtree(watched.private, ignore_errors=True)
    from pytest_super.paths import shown_path

    shown = shown_path(run_dir)
    lines = [
        f"pytest-super: the controller of run {watched.run_id} (pid {watched.controller_pid}) "
        "ended without ending the run: it was killed, or Ray ended it (a Ray driver whose own "
        "node is declared dead exits at once, exit status 1, with no word; docs/cluster.md).",
        f"pytest-super: {kept} result{'s' if kept != 1 else ''} received kept in "
        f"{shown}/results.jsonl{' (summary.md written from them)' if summary else ''}; no "
        "JUnit XML. Its tasks on the nodes end with it; their containers go within 2 minutes.",
        f"pytest-super: run what did not finish with: {watched.resume}",
        f"pytest-super: or remove what is left on the nodes now with: {watched.cleanup}",
    ]
    with open(2, "w", closefd=False) as err:
        err.write("\n".join(lines) + "\n")


def _summary(watched: Watched, run_dir: Path) -> tuple[int, bool]:
    """How many results results.jsonl holds, and whether summary.md was written from them."""
    path = run_dir / "results.jsonl"
    if not path.is_file():
        return 0, False
    from pytest_super import report

    records = report.read_results(path, on_bad_line=lambda line: None)
    if not records or (run_dir / "summary.md").exists():
        return len(records), False
    table = report.format_table({watched.agent or "run": report.summarize(records)}, markdown=True)
    try:
        (run_dir / "summary.md").write_text(
            f"# pytest-super run {watched.run_id}\n\nagent: {watched.agent} (the run's "
            f"controller ended without ending the run: these are the results it received)\n\n"
            f"{table}\n"
        )
    except OSError:
        return len(records), False
    return len(records), True


if __name__ == "__main__":
    sys.exit(main(sys.argv))
