"""The pass rule of an LMR task's unit test (lmr/unit_tests.py) on the shapes of upstream's real
tests (shuoYan97/LMR-Bench at da757c9), which exit 0 whether the function is right or wrong:

- 16-KnowProb's unit_test_2..5, 18-MassActiv, 25-AdaLora: the assertion is caught and only
  "Test Failed: ..." is logged, never raised;
- 01-DPO: no assertion at all; each checked index logs "Test Passed" or "Test Failed".

The scoring cell runs here in a subprocess of this Python, as the kernel runs it in the box (the
same cell text, from the repository's folder): a wrong function fails, a right one passes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super.lmr.unit_tests import _CELL, RUNNER, outcome
from pytest_super.tasks import lmr_tasks

DEMO = Path(__file__).resolve().parents[1] / "tasks" / "lmr" / "01-NgramMetrics"

HEADER = """\
import sys
import os
sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), '..')))

import unittest
import logging
from pathlib import Path
from lm.metrics import perplexity

log_dir = Path(__file__).resolve().parent / 'logs'
log_dir.mkdir(parents=True, exist_ok=True)
log_file = log_dir / 'unit_test_1.log'
logging.basicConfig(filename=log_file, filemode='w', level=logging.INFO, format="%(asctime)s = %(message)s")
"""

#: 16-KnowProb/unit_test_2.py's shape: the assertion caught, "Test Failed" logged, not raised
CAUGHT = (
    HEADER
    + """
class TestPerplexity(unittest.TestCase):
    def test_output_matches_expected(self):
        result = perplexity([0.0, 0.0])
        try:
            self.assertTrue(abs(result - 1.0) < 1e-9, "The output of perplexity does not match.")
            logging.info("Test Passed")
        except AssertionError as e:
            logging.info(f"Test Failed: {e}")

if __name__ == "__main__":
    unittest.main()
"""
)

#: 01-DPO/unit_test_1.py's shape: no assertion, one log line per checked index
NO_ASSERTION = (
    HEADER
    + """
class TestModelOutputs(unittest.TestCase):
    def test_random_pairs(self):
        all_passed = True
        failed_indices = []
        for idx, (inputs, expected) in enumerate([([0.0, 0.0], 1.0), ([-1.0], 2.718281828)]):
            got = perplexity(inputs)
            if abs(got - expected) < 1e-6:
                logging.info(f"Index {idx}: Test Passed: (expected {expected}, got {got})")
            else:
                logging.info(f"Index {idx}: Test Failed: (expected {expected}, got {got})")
                all_passed = False
                failed_indices.append(idx)
        if not all_passed:
            logging.error(f"Failed at indices: {failed_indices}")
        else:
            logging.info("All random-pair tests passed.")

if __name__ == "__main__":
    unittest.main()
"""
)

RIGHT = "import math\n\ndef perplexity(log_probs):\n    return math.exp(-sum(log_probs) / len(log_probs))\n"
WRONG = "def perplexity(log_probs):\n    return 0.0\n"


def _score(tmp_path: Path, test: str, function: str):
    folder = tmp_path / "01-NgramMetrics"
    shutil.copytree(DEMO, folder)
    repo = folder / "ngram-lm"
    (repo / "unit_test" / "unit_test_1.py").write_text(test)
    (repo / "lm" / "metrics.py").write_text(function)
    task = lmr_tasks(folder / "info.json")[0]
    result_file = tmp_path / "result.json"
    cell = _CELL.format(
        runner=RUNNER,
        test_file=str(repo / task.unit_test_file),
        result_file=str(result_file),
        timeout=60.0,
    )
    subprocess.run([sys.executable, "-c", cell], cwd=repo, check=True, timeout=120)
    done = json.loads(Path(f"{result_file}.done").read_text())
    return outcome(done, task), done


@pytest.mark.parametrize("test", [CAUGHT, NO_ASSERTION], ids=["caught", "no-assertion"])
def test_a_wrong_function_fails_though_upstreams_test_exits_0(tmp_path, test):
    found, done = _score(tmp_path, test, WRONG)
    assert not found.passed, found
    assert (found.run, found.failed, found.errored) == (1, 1, 0)
    assert "logged by the test itself" in found.why and "Test Failed" in found.why
    assert found.problems[0].startswith("lmr_unit_test.")  # named by the test that logged it
    assert found.upstream_verdict.startswith("FAIL (found ")  # upstream's grep agrees here
    assert done["exit_code"] == 1  # our runner's verdict, not the test's own exit


@pytest.mark.parametrize("test", [CAUGHT, NO_ASSERTION], ids=["caught", "no-assertion"])
def test_a_right_function_passes(tmp_path, test):
    found, _ = _score(tmp_path, test, RIGHT)
    assert found.passed, found
    assert (found.run, found.failed, found.errored) == (1, 0, 0)
    assert found.upstream_verdict == "PASS"
