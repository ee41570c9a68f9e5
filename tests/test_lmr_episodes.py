"""LMR-Bench's episodes through the whole plugin, on the demo set (tasks/lmr), in real Docker
containers (issue 46, items 3 and 4): the gold agent puts the golden function in place and the
unit tests pass; an agent that leaves the function masked fails (a failure, not an error), and
so does one that rewrites the unit test to pass (the tests are restored before scoring); the
golden files are nowhere in the box. The LLM agents' scripted runs are in test_lmr_agents.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_super.kernels.docker.image import build_image
from tests.support.lmr_runs import run_lmr

pytestmark = pytest.mark.docker

DEMO = Path(__file__).resolve().parents[1] / "tasks" / "lmr"

AGENTS = '''
from pytest_super.environment import AgentResult
from pytest_super.errors import ExitStatus
from pytest_super.trajectory import Action, Step

ALWAYS_PASSES = """import unittest

class TestNothing(unittest.TestCase):
    def test_nothing(self):
        pass
"""


class Tamper:
    """Leaves the goal masked, rewrites the unit test to pass, and looks for golden files."""

    name = "tamper"
    needs_llm = False

    def run(self, env):
        env.kernel.write_file(env.task.unit_test_file, ALWAYS_PASSES)
        found = env.kernel.execute(
            "import subprocess\\n"
            "print(subprocess.run('find / -xdev -iname \\"*golden*\\" 2>/dev/null; echo END',"
            " shell=True, capture_output=True, text=True).stdout)",
            60,
        )
        env.record(Step(thought="look", action=Action.EXECUTE, content="find", observation=found.output))
        return AgentResult(ExitStatus.SUBMITTED)
'''


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture
def project(pytester: pytest.Pytester, image: str) -> pytest.Pytester:
    shutil.copytree(DEMO, pytester.path / "lmr")
    (pytester.path / "lmr_agents.py").write_text(AGENTS)
    pytester.makeini("[pytest]\npythonpath = .\n")
    return pytester


def test_a_golden_function_that_fails_its_unit_test_is_an_environment_error(project):
    """Issue 44: under gold any miss is the environment's, on LMR-Bench too (the golden function
    is known to pass). Red before: `1 failed`."""
    golden = project.path / "lmr/02-LabelSmoothing/golden_files/losses_golden.py"
    text = golden.read_text()
    assert text.count("        return loss\n") == 1
    golden.write_text(text.replace("        return loss\n", "        return loss + 1.0\n"))
    result, records = run_lmr(project, "lmr/02-LabelSmoothing", "--super-agent=gold")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*EnvironmentFault: the golden function did not pass the task's unit test: *"]
    )
    (record,) = records.values()
    assert (record["outcome"], record["exit_status"]) == ("error", "environment_error"), record


def test_gold_puts_each_golden_function_in_place_and_the_unit_tests_pass(project):
    result, records = run_lmr(project, "lmr", "--super-agent=gold")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(  # the summary in LMR-Bench's shape, upstream's runs beside
        [
            "LMR-Bench*tasks*pass*err*pass%*OpenHands/gpt4o%*",
            "all * 3 * 3 * 0 * 100.0 * - *",
            "Evaluation Metrics * 2 * 2 * 0 * 100.0 *",
        ]
    )
    assert sorted(records) == ["01-NgramMetrics/1", "01-NgramMetrics/2", "02-LabelSmoothing/1"]
    for record in records.values():
        assert record["outcome"] == "passed"
        assert (record["unit_tests"], record["tests_run"]) == (1.0, 1), record
        assert (record["tests_failed"], record["tests_errored"]) == (0, 0), record
        assert record["upstream_verdict"] == "PASS", record


def test_a_masked_function_fails_as_the_agents_failure_even_with_its_test_rewritten(project):
    result, records = run_lmr(
        project, "lmr/01-NgramMetrics", "lmr/02-LabelSmoothing", "--super-agent=lmr_agents:Tamper"
    )
    result.assert_outcomes(failed=3)  # failures, not errors: the agent did not do the work
    result.stdout.fnmatch_lines(
        [
            "*LMR-Bench task 01-NgramMetrics/1 (lmr) did not pass: unit-tests 0.000 < 1",
            "*unit test: 0 failed and 1 errored of 1 tests*",
            "*upstream's log verdict: FAIL (found 0 failure lines)",
            "*NameError: name 'ppl' is not defined*",
        ]
    )
    result.stdout.fnmatch_lines(["*NameError: name 'loss' is not defined*"])
    for record in records.values():
        assert (record["outcome"], record["unit_tests"], record["tests_errored"]) == (
            "failed",
            0.0,
            1,
        ), record
    # the golden files were nowhere in the box
    (run_dir,) = (project.path / "reports").iterdir()
    for trajectory in (run_dir / "trajectories").glob("*.json"):
        steps = json.loads(trajectory.read_text())["steps"]
        (look,) = [s for s in steps if s["content"] == "find"]
        assert "END" in look["observation"] and "golden" not in look["observation"].lower()
