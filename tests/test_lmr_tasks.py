"""LMR-Bench task folders as tasks: the loader and collection (issue 46, item 1).

The data is a compact copy of LMR-Bench's real `info.json` set at commit da757c9 (tests/data/
lmr-bench: the 29 files verbatim, MIT, see its LICENSE.md) with `files.txt`, the list of the files
the loader looks for that the real tree has (Dockerfiles, goal files, unit tests, golden files,
paper.json). The tree is rebuilt from the two in a temporary folder, the listed files empty: the
loader reads info.json (and paper.json, for the prompt) and checks that the files it names exist. The real tree's broken
parts are kept: three folders without their repository (10, 19, 21), two unit-test files that do
not exist (13, 18), four null categories (24, 26, 27, 29).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_super import load_tasks
from pytest_super.errors import TaskFileError
from pytest_super.tasks import LmrTask, load_lmr_folder

DATA = Path(__file__).parent / "data" / "lmr-bench"

#: the implementations of the real tree that are whole (one item each)
WHOLE = [
    "01-DPO/1", "02-HITs/1", "03-DoLa/1", "04-CD/1", "05-SimPO/1", "06-RepE/1", "07-bertscore/1",
    "08-StepLength/1", "09-GDPZero/1", "11-moverscore/1", "14-EmojiCrypt/1", "15-EmpathyBias/1",
    "15-EmpathyBias/2", "16-KnowProb/1", "16-KnowProb/2", "16-KnowProb/3", "16-KnowProb/4",
    "16-KnowProb/5", "20-CAD/1", "22-TokenDPO/1", "23-SimCLR/1", "25-AdaLora/1", "28-SPIN/1",
    "30-ERGO/1", "31-Syn-Chain/1",
]  # fmt: skip
#: the broken ones: id -> (the field named, words of the message)
BROKEN = {
    "10-TimeDistill/1": ("repo_folder_name", "no repository"),
    "13-DecBound/1": ("implementations[0].unit_test_file", "unit_test_1.py: name one of them"),
    "18-MassActiv/1": ("implementations[0].unit_test_file", "does not exist"),
    "19-Native-Sparse-Attention/1": ("repo_folder_name", "no repository"),
    "21-TimeMixer/1": ("repo_folder_name", "no repository"),
    "21-TimeMixer/2": ("repo_folder_name", "no repository"),
    "24-DeViEnt/1": ("implementations[0].category", "category is null"),
    "26-Hyena/1": ("implementations[0].category", "category is null"),
    "27-Lion/1": ("implementations[0].category", "category is null"),
    "29-Sophia/1": ("implementations[0].category", "category is null"),
}


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    """The real tree's layout, rebuilt: info.json verbatim, the files it names empty (paper.json
    an empty object)."""
    root = tmp_path / "benchmark"
    shutil.copytree(DATA / "benchmark", root)
    for rel in (DATA / "files.txt").read_text().split():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("{}" if rel.endswith("paper.json") else "")
    return root


def _entries(bench: Path) -> dict[str, LmrTask | TaskFileError]:
    found: dict[str, LmrTask | TaskFileError] = {}
    for info in sorted(bench.glob("*/info.json")):
        found.update(load_lmr_folder(info))
    return found


def test_the_real_info_set_loads_each_whole_implementation_and_names_each_broken_one(bench):
    entries = _entries(bench)
    assert sorted(k for k, v in entries.items() if isinstance(v, LmrTask)) == sorted(WHOLE)
    errors = {k: v for k, v in entries.items() if isinstance(v, TaskFileError)}
    assert sorted(errors) == sorted(BROKEN)
    for task_id, (field, words) in BROKEN.items():
        error = errors[task_id]
        assert error.field == field and words in str(error), (task_id, str(error))
        assert error.path.endswith(f"{task_id.split('/')[0]}/info.json")


def test_a_task_carries_what_its_implementation_says(bench):
    entries = _entries(bench)
    hits = entries["02-HITs/1"]
    assert isinstance(hits, LmrTask)
    assert (hits.set, hits.class_name, hits.goal_function) == (
        "lmr",
        "HierarchyTransformerLoss",
        "forward",
    )
    assert hits.categories == ("training_objectives_optimization_techniques",)
    assert hits.category == "Training Objectives & Optimization Techniques"
    assert hits.repo_path == bench / "02-HITs" / "HierarchyTransformers"
    assert hits.goal_file == "src/hierarchy_transformers/losses/hit_loss.py"
    assert hits.unit_test_file == "unit_test/unit_test_1.py"
    assert hits.dockerfile == bench / "02-HITs" / "Dockerfile"
    # the retrieval list is read under either spelling; an empty category is "uncategorized"
    assert isinstance(entries["04-CD/1"], LmrTask) and isinstance(entries["01-DPO/1"], LmrTask)
    syn = entries["31-Syn-Chain/1"]
    assert isinstance(syn, LmrTask) and syn.categories == ("uncategorized",)
    dpo = entries["01-DPO/1"]
    assert isinstance(dpo, LmrTask) and dpo.class_name is None


def _rewrite(info: Path, change) -> None:
    data = json.loads(info.read_text())
    change(data["implementations"][0])
    info.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda e: e.update(retrieval_context=[]), "implementations[0].retrieval_content",
         "retrieval written twice"),
        (lambda e: e.update(goal_file="../../../etc/passwd"), "implementations[0].goal_file",
         "must name a file inside"),
        (lambda e: e.update(golden_file="golden_files/nowhere.py"),
         "implementations[0].golden_file", "does not exist"),
        (lambda e: e.update(index=0), "implementations[0].index", "whole number"),
        (lambda e: e.update(goal_function=""), "implementations[0].goal_function", "non-empty"),
        (lambda e: e.update(colour="red"), "implementations[0].colour", "unknown key"),
        (lambda e: e.update(retrieval_content="x"), "implementations[0].retrieval_content",
         "list of strings"),
    ],
)  # fmt: skip
def test_a_broken_implementation_is_named_and_the_others_of_its_folder_load(
    bench, change, field, words
):
    info = bench / "16-KnowProb" / "info.json"
    _rewrite(info, change)
    (first, error), *rest = load_lmr_folder(info)
    assert first == "16-KnowProb/1" and isinstance(error, TaskFileError)
    assert error.field == field and words in str(error), str(error)
    assert "16-KnowProb" in str(error) and "info.json" in str(error)
    assert [k for k, v in rest if isinstance(v, LmrTask)] == [
        f"16-KnowProb/{n}" for n in range(2, 6)
    ]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "is not valid JSON"),
        ('{"implementations": [], "paper_name": "x"}', "non-empty list of implementations"),
        ('{"implementations": [{}], "implementations": [{}]}', "duplicate key"),
        ('{"implementations": [{}], "paper": "x"}', "unknown key"),
    ],
)
def test_an_unreadable_info_json_is_one_error_naming_the_file(bench, text, words):
    info = bench / "01-DPO" / "info.json"
    info.write_text(text)
    with pytest.raises(TaskFileError, match=words) as caught:
        load_lmr_folder(info)
    assert "01-DPO" in str(caught.value)


def test_load_tasks_reads_an_lmr_folder_a_file_and_stops_at_the_first_broken_part(bench):
    tasks = load_tasks(bench / "16-KnowProb")
    assert [t.id for t in tasks] == [f"16-KnowProb/{n}" for n in range(1, 6)]
    assert [t.id for t in load_tasks(bench / "02-HITs" / "info.json")] == ["02-HITs/1"]
    (bench / "02-HITs" / "HierarchyTransformers" / "config.yaml").write_text("not: a task\n")
    assert [t.id for t in load_tasks(bench / "02-HITs")] == ["02-HITs/1"]  # the repo is no tasks
    with pytest.raises(TaskFileError, match="no repository"):
        load_tasks(bench)  # 10-TimeDistill, the first broken folder


def _project(pytester: pytest.Pytester, bench: Path) -> Path:
    target = pytester.path / "benchmark"
    shutil.copytree(bench, target)
    # a file pytest would collect as a test module (`*_test.py`) inside a repository
    (target / "16-KnowProb" / "KnowProb-main" / "unit_test" / "unit_test.py").write_text(
        "def test_not_ours():\n    pass\n"
    )
    return target


def test_collection_gives_an_item_per_implementation_and_an_error_per_broken_one(pytester, bench):
    _project(pytester, bench)
    result = pytester.runpytest_subprocess(
        "benchmark", "--collect-only", "-q", "--super-agent=gold", "--strict-markers"
    )
    for task_id in WHOLE:
        folder = task_id.split("/")[0]
        result.stdout.fnmatch_lines([f"benchmark/{folder}/info.json::{task_id}"])
    for task_id in BROKEN:
        folder = task_id.split("/")[0]
        result.stdout.fnmatch_lines([f"ERROR benchmark/{folder}/info.json::{task_id}"])
    result.stdout.fnmatch_lines(["*no repository*", "*category is null*"])
    result.stdout.no_fnmatch_line("*test_not_ours*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.fnmatch_lines([f"{len(WHOLE)} tests collected, {len(BROKEN)} errors*"])


def test_markers_k_and_super_tasks_select_lmr_items(pytester, bench):
    _project(pytester, bench)
    pytester.makeini("[pytest]\nsuper_tasks = benchmark\n")
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "--strict-markers", "-m", "lmr and evaluation_metrics"
    )
    result.stdout.fnmatch_lines(
        ["*::07-bertscore/1", "*::14-EmojiCrypt/1", "*::15-EmpathyBias/1", "*::15-EmpathyBias/2"]
    )
    result.stdout.fnmatch_lines(["4/* tests collected (* deselected)*"])
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-k", "KnowProb and 3")
    result.stdout.fnmatch_lines(["*::16-KnowProb/3", "1/* tests collected*"])


DEMO = Path(__file__).resolve().parents[1] / "tasks" / "lmr"


def _function(source: str, name: str, class_name: str | None):
    import ast

    scope: list = ast.parse(source).body
    if class_name:
        scope = next(n for n in scope if isinstance(n, ast.ClassDef) and n.name == class_name).body
    return next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)


def test_the_demo_set_is_masked_lmr_format_pure_python():
    """tasks/lmr/: two papers, three implementations, one a method of a class; each goal
    function masked as upstream masks (docstring and `return` kept, the body gone), its golden
    file beside the repository, never inside it."""
    import ast

    tasks = load_tasks(DEMO)
    assert [t.id for t in tasks] == [
        "01-NgramMetrics/1",
        "01-NgramMetrics/2",
        "02-LabelSmoothing/1",
    ]
    assert [t.class_name for t in tasks] == [None, None, "LabelSmoothingLoss"]
    for task in tasks:
        assert isinstance(task, LmrTask) and task.dockerfile is None
        assert (task.repo_path / "paper.json").is_file()
        masked = _function(
            (task.repo_path / task.goal_file).read_text(), task.goal_function, task.class_name
        )
        golden = _function(
            (Path(task.folder) / task.golden_file).read_text(), task.goal_function, task.class_name
        )
        assert [type(n) for n in masked.body] == [ast.Expr, ast.Return], (
            task.id
        )  # docstring, return
        assert len(golden.body) > 2 and ast.get_docstring(golden) == ast.get_docstring(masked)
        assert not list(task.repo_path.rglob("*golden*")), task.id


# -- the unit test's verdicts, from what the runner cell recorded (lmr/unit_tests.py) -------------
def _demo_task() -> LmrTask:
    (task, *_) = load_tasks(DEMO / "01-NgramMetrics")
    assert isinstance(task, LmrTask)
    return task


@pytest.mark.parametrize(
    ("done", "passed", "why", "upstream"),
    [
        ({"exit_code": 0, "result": {"run": 2}, "log": "INFO Test Passed"}, True, "", "PASS"),
        # upstream's tests catch their AssertionError and log it: the runner saw it logged
        ({"exit_code": 1, "result": {"run": 1, "failed": 1,
                                     "logged": [["t.T.test_x", "Test Failed: 3 != 4"]]},
          "log": "Test Failed: 3 != 4"}, False,
         "1 failure line(s) logged by the test itself (its assertion caught, so unittest counts "
         "it passed): t.T.test_x: logged 'Test Failed: 3 != 4'", "FAIL (found 1 failure lines)"),
        # a failure line written to the log file, not logged while a test ran: unittest decides
        ({"exit_code": 0, "result": {"run": 1}, "log": "Test Failed: 3 != 4"}, True, "",
         "FAIL (found 1 failure lines)"),
        ({"exit_code": 0, "result": {"run": 0}, "log": None}, False, "ran no test", "FAIL (no log)"),
        ({"exit_code": 1, "result": {"run": 1, "errored": 1, "problems": ["NameError: ppl"]},
          "log": ""}, False, "0 failed and 1 errored of 1 tests (exit code 1)",
         "FAIL (found 0 failure lines)"),
        ({"exit_code": 1, "result": {"run": 1}, "log": "Test Passed"}, False, "(exit code 1)", "PASS"),
        ({"exit_code": -9, "result": None, "log": None}, False, "wrote no result", "FAIL (no log)"),
        ({"exit_code": None, "timed_out": True, "result": None}, False, "did not finish within",
         "FAIL (no log)"),
        ({"exit_code": 1, "result": {"load_error": "ImportError: lm"}}, False, "could not be loaded",
         "FAIL (no log)"),
    ],
)  # fmt: skip
def test_our_verdict_reads_unittests_result_and_upstreams_reads_the_log(
    done, passed, why, upstream
):
    from pytest_super.lmr.unit_tests import differs, outcome

    found = outcome(done, _demo_task())
    assert found.passed is passed and why in found.why and found.upstream_verdict == upstream
    assert found.properties()["super.unit_tests"] == float(passed)
    if found.passed != found.upstream_passed:  # the run warns with both verdicts
        assert f"differs from upstream's log verdict {upstream}" in differs(_demo_task(), found)
