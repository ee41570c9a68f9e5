"""Scoring an LMR task: its unit test, run after the episode in the same box.

First the unit tests are restored from the task folder (an agent's edit of a test cannot pass
it; a goal file that stands in `unit_test/` is the agent's work and is kept) and the test's old
log removed. Then the test file runs in a process of its own, from the repository's folder as
upstream runs it (`PYTHONPATH` the repository, the test's folder first on `sys.path`), under a
deadline of its own (`UNIT_TEST_TIMEOUT_S`). A small runner loads the file with unittest and
writes unittest's own result (tests run, failures, errors, each problem's traceback) to a file
named for this scoring only. The task passes when the process exited 0, ran at least one
test, none failed or errored, and no test logged a failure line itself: upstream's tests often
catch their own `AssertionError` (or never assert) and only log "Test Failed", so unittest counts
them passed; the runner's logging handler reads each log record a test emits while it runs (not
the log file) and one holding the word "Failed" (upstream's scorer's word) is that test's
failure (docs/lmr-bench.md, "The pass rule"). Upstream's verdict is recorded beside ours: its grep of the test's log
(`unit_test/logs/<test>.log`: PASS when no "Failed" and at least one "Passed").
"""

from __future__ import annotations

import json
import re
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TypedDict

from pytest_super.errors import InfrastructureError, SuperWarning
from pytest_super.kernels.base import Kernel
from pytest_super.tasks.lmr import LmrTask

#: the unit test's own deadline, apart from the episode's limits
UNIT_TEST_TIMEOUT_S = 600.0
OUTPUT_TAIL = 3000

#: runs one unittest file and writes unittest's result (python -c RUNNER TEST_FILE RESULT_FILE);
#: a log record holding "Failed" that a test emits while it runs counts as that test's failure
#: (`logged`): upstream's tests catch their own assertion and only log "Test Failed"
RUNNER = """
import importlib.util, json, logging, os, re, sys, traceback, unittest
test_file, result_file = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(test_file)))
record = {"run": 0, "failed": 0, "errored": 0, "skipped": 0, "problems": [], "load_error": "",
          "logged": []}
ok = False

class Seen(logging.Handler):
    current = "(outside a test)"
    def emit(self, entry):
        try:
            text = entry.getMessage()
        except Exception:
            return
        if re.search(r"\\bFailed\\b", text):
            record["logged"].append([self.current, text[:500]])

class Result(unittest.TextTestResult):
    def startTest(self, test):
        seen.current = test.id()
        super().startTest(test)
    def stopTest(self, test):
        super().stopTest(test)
        seen.current = "(outside a test)"

seen = Seen()
try:
    spec = importlib.util.spec_from_file_location("lmr_unit_test", test_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # its logging.basicConfig first: ours must not stop it
    root = logging.getLogger()
    root.addHandler(seen)
    if root.level > logging.INFO:
        root.setLevel(logging.INFO)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=Result)
    result = runner.run(suite)
    problems = result.failures + result.errors
    caught = {name for name, _ in record["logged"]} - {t.id() for t, _ in problems}
    record.update(run=result.testsRun, failed=len(result.failures) + len(caught),
                  errored=len(result.errors), skipped=len(result.skipped),
                  problems=[t.id() + ": " + tb for t, tb in problems])
    ok = result.wasSuccessful() and result.testsRun > 0 and not record["logged"]
except BaseException:
    record["load_error"] = traceback.format_exc()
with open(result_file, "w") as out:
    json.dump(record, out)
sys.exit(0 if ok else 1)
"""

#: the cell that runs it: the runner's result, its exit code and output into one JSON file
_CELL = """
def _pytest_super_unit_test(runner, test_file, result_file, timeout):
    import json, os, subprocess, sys
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    done = {{"exit_code": None, "output": "", "timed_out": False}}
    try:
        proc = subprocess.run([sys.executable, "-c", runner, test_file, result_file],
                              capture_output=True, text=True, errors="replace", timeout=timeout,
                              env=env, stdin=subprocess.DEVNULL)
        done.update(exit_code=proc.returncode, output=proc.stdout + proc.stderr)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        done.update(timed_out=True, output=out.decode("utf-8", "replace") if isinstance(out, bytes) else out)
    try:
        with open(result_file) as f:
            done["result"] = json.load(f)
        os.remove(result_file)
    except (OSError, ValueError):
        done["result"] = None
    log = os.path.join(os.path.dirname(test_file), "logs",
                       os.path.splitext(os.path.basename(test_file))[0] + ".log")
    try:
        with open(log, errors="replace") as f:
            done["log"] = f.read()
    except OSError:
        done["log"] = None
    with open(result_file + ".done", "w") as f:
        json.dump(done, f)
_pytest_super_unit_test({runner!r}, {test_file!r}, {result_file!r}, {timeout!r})
del _pytest_super_unit_test
"""


@dataclass
class UnitTestOutcome:
    """What the unit test did: our verdict from unittest's result, and upstream's from its log."""

    passed: bool
    run: int = 0
    failed: int = 0
    errored: int = 0
    exit_code: int | None = None
    timed_out: bool = False
    problems: list[str] = field(default_factory=list)
    output_tail: str = ""
    upstream_verdict: str = ""
    why: str = ""  # why it did not pass, in a sentence

    @property
    def upstream_passed(self) -> bool:
        return self.upstream_verdict == "PASS"

    def properties(self) -> dict[str, object]:
        """The `super.*` JUnit properties (and results.jsonl fields) of the unit test."""
        return {
            "super.unit_tests": 1.0 if self.passed else 0.0,
            "super.tests_run": self.run,
            "super.tests_failed": self.failed,
            "super.tests_errored": self.errored,
            "super.upstream_verdict": self.upstream_verdict,
        }


def upstream_verdict(log: str | None) -> str:
    """Upstream's `get_statistics.py` on a test's log: PASS when it has no "Failed" and at least
    one "Passed"; else `FAIL (found N failure lines)`, as its results.txt writes it."""
    if log is None:
        return "FAIL (no log)"
    failed = len(re.findall("Failed", log))
    if failed == 0 and re.search("Passed", log):
        return "PASS"
    return f"FAIL (found {failed} failure lines)"


def restore(task: LmrTask, kernel: Kernel, repo: str) -> None:
    """The task folder's unit-test files written over the box's (all but the goal file)."""
    test_dir = task.repo_path / PurePosixPath(task.unit_test_file).parent
    goal = (task.repo_path / task.goal_file).resolve()
    for path in sorted(test_dir.rglob("*")):
        if (
            path.is_file()
            and path.resolve() != goal
            and "logs" not in path.relative_to(test_dir).parts
        ):
            rel = path.relative_to(task.repo_path).as_posix()
            kernel.write_bytes(f"{repo}/{rel}", path.read_bytes())


def run_unit_test(task: LmrTask, kernel: Kernel, repo: str) -> UnitTestOutcome:
    """Restore the tests, run the task's unit test in the box and read its result."""
    restore(task, kernel, repo)
    stem = PurePosixPath(task.unit_test_file)
    log = f"{repo}/{stem.parent}/logs/{stem.stem}.log"
    kernel.execute(f"import os\nif os.path.exists({log!r}): os.remove({log!r})", 60.0)
    result_file = f"/tmp/pytest-super-unit-test-{uuid.uuid4().hex}.json"
    cell = _CELL.format(
        runner=RUNNER,
        test_file=f"{repo}/{task.unit_test_file}",
        result_file=result_file,
        timeout=UNIT_TEST_TIMEOUT_S,
    )
    done_cell = kernel.execute(cell, UNIT_TEST_TIMEOUT_S + 120.0)
    if done_cell.status != "ok":
        raise InfrastructureError(
            f"task {task.id}: the unit test's runner cell ended {done_cell.status}: "
            f"{done_cell.output[-1000:]}"
        )
    try:
        done: RunnerRecord = json.loads(kernel.read_file(result_file + ".done"))
    except ValueError as exc:
        raise InfrastructureError(
            f"task {task.id}: the unit test's record is unreadable: {exc}"
        ) from None
    found = outcome(done, task)
    if found.passed != found.upstream_passed:
        warnings.warn(SuperWarning(differs(task, found)), stacklevel=2)
    return found


def differs(task: LmrTask, found: UnitTestOutcome) -> str:
    """The sentence for a unit test whose two verdicts differ."""
    ours = "PASS" if found.passed else "FAIL"
    return (
        f"task {task.id}: our unit-test verdict {ours} (unittest: ran {found.run}, failed "
        f"{found.failed}, errored {found.errored}, exit code {found.exit_code}) differs from "
        f"upstream's log verdict {found.upstream_verdict}"
    )


class UnitTestRecord(TypedDict, total=False):
    """What RUNNER writes of the unit test's run (`result` of the runner cell's record)."""

    run: int
    failed: int
    errored: int
    problems: list[str]
    load_error: str
    logged: list[tuple[str, str]]  # a test's name, the failure line it logged


class RunnerRecord(TypedDict, total=False):
    """The runner cell's record (`<result_file>.done`)."""

    result: UnitTestRecord
    exit_code: int | None
    timed_out: bool
    output: str
    log: str | None


def outcome(done: RunnerRecord, task: LmrTask) -> UnitTestOutcome:
    """Our verdict and upstream's from what the runner cell recorded."""
    record = done.get("result") or {}
    exit_code = done.get("exit_code")
    found = UnitTestOutcome(
        passed=False,
        run=int(record.get("run", 0)),
        failed=int(record.get("failed", 0)),
        errored=int(record.get("errored", 0)),
        exit_code=exit_code,
        timed_out=bool(done.get("timed_out")),
        problems=[str(p) for p in record.get("problems", [])],
        output_tail=str(done.get("output", ""))[-OUTPUT_TAIL:],
        upstream_verdict=upstream_verdict(done.get("log")),
    )
    if found.timed_out:
        found.why = f"the unit test did not finish within {UNIT_TEST_TIMEOUT_S:g} s"
    elif not record:
        found.why = f"the unit test process (exit code {exit_code}) wrote no result"
    elif record.get("load_error"):
        found.problems.insert(0, str(record["load_error"]))
        found.why = f"{task.unit_test_file} could not be loaded"
    elif found.run == 0:
        found.why = f"{task.unit_test_file} ran no test"
    elif record.get("logged"):
        logged = [f"{name}: logged {text!r}" for name, text in record["logged"]]
        found.problems[:0] = logged
        found.why = (
            f"{len(logged)} failure line(s) logged by the test itself (its assertion caught, "
            f"so unittest counts it passed): {logged[0]}"
        )
    elif exit_code != 0 or found.failed or found.errored:
        found.why = (
            f"{found.failed} failed and {found.errored} errored of {found.run} tests "
            f"(exit code {exit_code})"
        )
    else:
        found.passed = True
    return found
