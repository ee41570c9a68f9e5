"""`--lf` scoped to the run's agent and model (issue 44 item 6: a `--lf` after a gold run reran
another agent's failures, silently): pytest's own --lf and --ff, in process (pytester), on plain
test functions (which items fail is all --lf reads; no task runs, no kernel, no Docker)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TESTS = """
import os

def test_a():
    assert os.environ.get("FAIL_A") != "1"

def test_b():
    assert os.environ.get("FAIL_B") != "1"
"""
GOLD = ("--super-agent=gold", "--super-backend=local", "-p", "no:randomly", "-n", "0")
REPLAY = ("--super-agent=replay", *GOLD[1:])


def _run(pytester: pytest.Pytester, *args: str, fail: str = "") -> pytest.RunResult:
    with pytest.MonkeyPatch.context() as env:  # the run in process sets the controller's pid
        env.delenv("PYTEST_SUPER_CONTROLLER_PID", raising=False)
        env.setenv("FAIL_A", "1" if "a" in fail else "0")
        env.setenv("FAIL_B", "1" if "b" in fail else "0")
        return pytester.runpytest_inprocess("test_x.py", *args)


def _ran(result: pytest.RunResult) -> set[str]:
    return {
        line.split("::")[1].split()[0]
        for line in result.outlines
        if line.startswith("test_x.py::") and ("PASSED" in line or "FAILED" in line)
    }


def test_lf_reruns_the_last_failures_of_the_same_agent_and_model(pytester: pytest.Pytester):
    pytester.makepyfile(test_x=TESTS)
    _run(pytester, *GOLD, fail="a").assert_outcomes(passed=1, failed=1)
    _run(pytester, *REPLAY, fail="b").assert_outcomes(passed=1, failed=1)  # pytest's record: b

    gold = _run(pytester, *GOLD, "--lf", "-v")
    assert _ran(gold) == {"test_a"}, gold.stdout.str()  # gold's failure, not replay's test_b
    gold.stdout.fnmatch_lines(
        ["pytest-super: --lf reruns the last failures of agent gold, model (none): 1 recorded *"]
    )
    other_model = _run(pytester, *GOLD, "--super-model=m1", "--lf", "--lfnf=none", "-v")
    assert _ran(other_model) == set()  # gold with model m1 has failed nothing yet
    other_model.stdout.fnmatch_lines(["*agent gold, model m1: 0 recorded*"])

    replay = _run(pytester, *REPLAY, "--lf", "-v")
    assert _ran(replay) == {"test_b"}, replay.stdout.str()  # kept, after gold's runs
    assert _ran(_run(pytester, *GOLD, "--ff", "-v")) == {"test_a", "test_b"}
    assert _ran(_run(pytester, *GOLD, "--lf", "--lfnf=none", "-v")) == set()  # test_a passed
