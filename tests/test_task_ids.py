"""Task ids and categories as SUPER's real data has them (issue 9, item 11).

Real Masked ids end in suffixes beyond the paper's seven (`_custom`, `_customgoal`) or in two
categories joined by a comma; Auto ids may contain "/" and be long. Every id is collected with a
category (`other` for an unknown suffix, whose raw text stays in `super.category`), `-m other`
selects them, and names derived from ids (trajectory files, containers) are safe and bounded.
The ids below are real ones, taken from the published trajectory folders.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_super.kernels.docker.backend import container_name
from pytest_super.names import MAX_STEM as MAX_FILE_STEM
from pytest_super.names import file_stem as task_file_stem
from pytest_super.tasks import iter_jsonl_tasks
from tests.support.projects import junit_properties as read_junit_properties

ANSWER = json.dumps({"a": 1})
SOLUTION = ["import json\nprint(json.dumps({'a': 1}))"]
PREFIX_CELL = json.dumps({"type": "execute", "content": "print('PREFIX RAN')"})
LONG_AUTO_ID = "someone/" + "very-long-repository-name-" * 11 + "x"  # 300 characters


def _row(task_id: str, **extra) -> dict:
    return {"task_id": task_id, "query": "q", "answer": ANSWER, "solution": SOLUTION, **extra}


MASKED = [
    _row("align-to-distill_customgoal", pre_execute_cells=[PREFIX_CELL]),
    _row("quantifying-stereotypes-in-language_custom"),
    _row("conv_graph_configuration,data"),
    _row("colbert_goal,dependencies"),
    _row("amrbart_cpu"),
]
EXPERT = [_row("curriculum_learning", pre_execute_cells=[PREFIX_CELL])]
AUTO = [
    {"task_id": "allenai/some-repo", "query": "q", "entrypoint": "train.py", "solution": SOLUTION},
    {"task_id": LONG_AUTO_ID, "query": "q", "entrypoint": "train.py", "solution": SOLUTION},
]


@pytest.fixture
def data(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    for name, rows in (("masked", MASKED), ("expert", EXPERT), ("auto_gen", AUTO)):
        path = pytester.path / "tasks" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return pytester


def test_every_real_id_is_collected_and_minus_m_other_selects_the_unknown_suffixes(data):
    result = data.runpytest_subprocess("tasks", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    for row in MASKED + EXPERT + AUTO:
        assert row["task_id"] in result.stdout.str()
    result = data.runpytest_subprocess("tasks", "--collect-only", "-q", "-m", "other")
    result.stdout.fnmatch_lines(
        [
            "tasks/masked.jsonl::align-to-distill_customgoal",
            "tasks/masked.jsonl::quantifying-stereotypes-in-language_custom",
            "2/8 tests collected*",
        ]
    )
    result = data.runpytest_subprocess("tasks", "--collect-only", "-q", "-m", "data")
    result.stdout.fnmatch_lines(["tasks/masked.jsonl::conv_graph_configuration,data", "1/8 test*"])


def test_a_gold_run_records_raw_categories_and_safe_file_names(data):
    junit = data.path / "junit.xml"
    result = data.runpytest_subprocess(
        "tasks",
        "--super-agent=gold",
        "--super-backend=local",
        f"--junitxml={junit}",
        "--super-report-dir=out",
        "-p",
        "no:randomly",
    )
    # the Auto tasks never run their entrypoint for 10 s: they miss by design, which under gold
    # is an environment error (never a failure), but they run
    result.assert_outcomes(passed=6, errors=2)
    props = read_junit_properties(junit)
    assert props["align-to-distill_customgoal"]["super.category"] == "customgoal"
    assert props["quantifying-stereotypes-in-language_custom"]["super.category"] == "custom"
    assert props["conv_graph_configuration,data"]["super.category"] == "configuration,data"
    assert props["curriculum_learning"]["super.category"] == ""
    (run,) = (data.path / "out").iterdir()
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == sorted(
        r["task_id"] for r in MASKED + EXPERT + AUTO
    )
    names = [p.name for p in (run / "trajectories").glob("*.json")]
    assert len(names) == 8
    assert all(len(n) <= MAX_FILE_STEM + len(".json") and "/" not in n for n in names)
    summary = (run / "summary.md").read_text()
    assert "masked:other" in summary
    # as the reference: pre-executed cells run for Masked tasks only
    masked = json.loads((run / "trajectories" / "align-to-distill_customgoal.json").read_text())
    assert [s["output"] for s in masked["steps"] if s["pre_executed"]] == ["PREFIX RAN\n"]
    expert = json.loads((run / "trajectories" / "curriculum_learning.json").read_text())
    assert not [s for s in expert["steps"] if s["pre_executed"]]


def test_jsonl_keeps_pre_executed_cells_for_masked_tasks_only(tmp_path: Path) -> None:
    for name, rows, expected in (("masked", MASKED[:1], 1), ("expert", EXPERT, 0)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        (task,) = list(iter_jsonl_tasks(path))
        assert len(task.pre_executed) == expected


def test_file_stems_are_safe_bounded_and_unique() -> None:
    assert task_file_stem("amrbart_goal,dependencies") == "amrbart_goal,dependencies"
    slashed = task_file_stem("allenai/some-repo")
    assert "/" not in slashed and slashed.startswith("allenai_some-repo-")
    assert task_file_stem("allenai_some-repo") != slashed
    long_a, long_b = task_file_stem(LONG_AUTO_ID + "a"), task_file_stem(LONG_AUTO_ID + "b")
    assert len(long_a) <= MAX_FILE_STEM and len(long_b) <= MAX_FILE_STEM and long_a != long_b
    assert task_file_stem("..") not in ("..", ".", "")
    name = container_name(LONG_AUTO_ID, "gw0")
    assert len(name) <= 63 and "/" not in name
