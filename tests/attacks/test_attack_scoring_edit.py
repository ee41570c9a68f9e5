"""Attacks on scoring, task loading and the edit tool (issue 11, items 8, 9 and 13).

Each test reproduces a break found by attacking the plugin: a landmark regex that backtracks without
end, gold answers that can never match or that YAML 1.1 reads as a string, and an edit of a file
that is not UTF-8. Each failed before its fix.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super import scoring
from pytest_super.edit import EditRequest, edit_file
from pytest_super.errors import SuperWarning
from pytest_super.kernels.jupyter.runtime import JupyterKernel
from pytest_super.kernels.local import LocalBox
from pytest_super.tasks import iter_jsonl_tasks, load_yaml_task

CATASTROPHIC = r"(a+)+$"
#: scoring that takes longer hangs. The bound is 5 s of CPU per regex (the regex engine counts
#: process CPU time); on this shared 2-core machine under a load of 10 that took up to 50 s of
#: wall time (measured); without a bound the regex below never ends.
HANG_S = 150.0

SCORE = f"""
import json, warnings
from pytest_super import scoring
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    value = scoring.score_landmarks([{CATASTROPHIC!r}, "trained"],
                                    ["trained for 3 epochs", "a" * 100_000 + "!"])
print(json.dumps({{"value": value, "warnings": [str(w.message) for w in caught]}}))
"""

EPISODE = f"""
import json, sys, warnings
from pathlib import Path
from pytest_super.agents.gold import GoldAgent
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.local import start_local_kernel
from pytest_super.runner import EpisodeSettings, run_episode
from pytest_super.tasks import Cell, Task
task = Task(id="catastrophic", set="expert", query="q", answer={{"answer": 1}},
            landmarks=({CATASTROPHIC!r}, "started"),
            solution=(Cell(kind="execute", code="print('started')"),
                      Cell(kind="execute", code="print('a' * 100_000 + '!')"),
                      Cell(kind="execute", code="print('{{\\"answer\\": 1}}')")))
new_kernel = lambda: start_local_kernel(KernelSettings(backend="local"), task_id=task.id)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result = run_episode(task, GoldAgent(), new_kernel, EpisodeSettings(), Path(sys.argv[1]))
print(json.dumps({{"accuracy": result.accuracy, "landmarks": result.landmarks,
                  "missed": result.landmarks_missed,
                  "warned": any("not hit" in str(w.message) for w in caught)}}))
"""


def _run_python(code: str, *args: str) -> dict:
    """Run `code` in a fresh interpreter (its own process group); fail if it outlives HANG_S.
    A regex stuck in the `re` engine holds the GIL, so a thread could not even time out."""
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"scoring hung on the landmark {CATASTROPHIC!r} for {HANG_S:g} s")
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


# -- item 8: a catastrophic landmark regex must not hang scoring ------------------------------------


def test_catastrophic_landmark_counts_as_not_hit_with_a_warning() -> None:
    found = _run_python(SCORE)
    assert found["value"] == 0.5
    assert found["warnings"] and all(
        CATASTROPHIC in m and "not hit" in m for m in found["warnings"]
    )


def test_an_episode_with_a_catastrophic_landmark_is_scored_not_hung(tmp_path: Path) -> None:
    """The whole path: a gold run whose output meets the regex is scored and recorded."""
    found = _run_python(EPISODE, str(tmp_path / "t.json"))
    assert found == {"accuracy": 1.0, "landmarks": 0.5, "missed": [CATASTROPHIC], "warned": True}


# -- item 9: gold answers that can never match, and YAML 1.1 exponent floats ------------------------

TASK = """\
id: t
set: expert
query: q
answer: {answer}
"""


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "[1, .NaN]"])
def test_a_gold_answer_that_can_never_match_warns_at_load(tmp_path: Path, value: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(TASK.format(answer=f"{{score: {value}}}"))
    with pytest.warns(SuperWarning, match=r"score.*can ever match"):
        load_yaml_task(path)


def test_a_jsonl_gold_answer_with_nan_warns_at_load(tmp_path: Path) -> None:
    row = {"task_id": "t", "query": "q", "answer": '{"f1": NaN, "acc": Infinity}'}
    path = tmp_path / "expert.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.warns(SuperWarning, match=r"f1, acc are NaN or infinite"):
        (task,) = list(iter_jsonl_tasks(path))
    assert task.id == "t"


@pytest.mark.parametrize(
    ("written", "number"), [("1e308", 1e308), ("-2E-5", -2e-5), ("3e+2", 300.0), ("1.5e3", 1500.0)]
)
def test_exponent_floats_are_numbers(tmp_path: Path, written: str, number: float) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(TASK.format(answer=f"{{big: {written}, name: '1e5'}}"))
    task = load_yaml_task(path)
    assert task.answer == {"big": number, "name": "1e5"}
    assert isinstance(task.answer["big"], float)
    assert scoring.score_accuracy(task.answer, {"big": number, "name": "1e5"}) == 1.0


# -- item 13: an edit of a file that is not UTF-8 --------------------------------------------------


@pytest.fixture(scope="module")
def kernel_and_dir():
    box = LocalBox(task_id="attack-edit")
    kernel = JupyterKernel(box)
    try:
        yield kernel, Path(box.work_dir)
    finally:
        kernel.close()


LATIN1 = "# auteur: Ren\xe9 M\xfcller\nlr = 0.1\nname = 'caf\xe9'\n".encode("latin-1")


def test_edit_of_a_latin1_file_keeps_the_bytes_of_untouched_lines(kernel_and_dir) -> None:
    kernel, workdir = kernel_and_dir
    path = workdir / "config.py"
    path.write_bytes(LATIN1 + b"\xff\xfe raw\n")
    outcome = edit_file(kernel, EditRequest("config.py", "lr = 0.1\n", "lr = 0.01\n"))
    assert outcome.ok, outcome.message
    assert path.read_bytes() == LATIN1.replace(b"lr = 0.1", b"lr = 0.01") + b"\xff\xfe raw\n"
    outcome.message.encode("utf-8")  # the feedback shown to the model is valid text
    assert "\ufffd" in outcome.message  # undecodable bytes show as the replacement character
