"""Longest tasks first from known durations (issue 33 item 1): the ordering, each source of
durations, the report header, pytest-split's shards, and the start order under real xdist workers
on the real Docker engine (the Ray executor's order: tests/test_ray_backend.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super import durations as known
from pytest_super import ordering
from tests.support.projects import make_project, run_pytest, sleep_then_answer, task_yaml

ROOT = Path(__file__).resolve().parent.parent
#: a gold project whose collection order puts the two long tasks last
ORDER = ("a", "b", "c", "d", "long1", "long2")
SECONDS = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "long1": 60.0, "long2": 50.0}
#: the project's conftest: each item's start time (worker side), for the start-order test
STARTS_PLUGIN = """

def pytest_runtest_setup(item):
    import time
    with open(pathlib.Path(str(item.config.rootpath), "starts.txt"), "a") as out:
        out.write(f"{time.time()} {item.name}\\n")
"""

#: the project's conftest: which worker starts which item, in order (skipped items too)
LOGSTART_PLUGIN = """

def pytest_runtest_logstart(nodeid, location):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    if worker != "controller":
        with open("starts.txt", "a") as out:
            out.write(f"{worker} {nodeid.rsplit('::', 1)[-1]}\\n")
"""


# -- the ordering --------------------------------------------------------------------------------
def test_longest_first_puts_unknown_durations_first_and_keeps_equals_in_order() -> None:
    seconds = {"a": 5.0, "b": None, "c": 30.0, "d": 5.0, "e": None}
    got = ordering.longest_first(list(seconds), seconds.get)
    assert got == ["b", "e", "c", "a", "d"]
    assert ordering.in_order(list(seconds), seconds.get, "collection") == list(seconds)
    with pytest.raises(ValueError, match="unknown order 'random'"):
        ordering.in_order([], seconds.get, "random")


def test_xdist_gets_the_longest_tasks_dealt_one_per_worker_in_the_runs_it_hands_out() -> None:
    ordered = ["L1", "L2", "L3", "s1", "s2", "s3", "s4", "s5"]
    # worksteal: two runs of 4, each worker's run headed by one of the longest
    assert ordering.first_blocks(8, 2, "worksteal", None) == [4, 4]
    assert ordering.for_xdist(ordered, 2, "worksteal") == [
        *("L1", "L3", "s2", "s4"),
        *("L2", "s1", "s3", "s5"),
    ]
    # load: chunks of 2 first, the rest handed out in order as workers free
    assert ordering.first_blocks(8, 2, "load", None) == [2, 2]
    assert ordering.for_xdist(ordered, 2, "load") == ["L1", "L3", "L2", "s1", *ordered[4:]]
    assert ordering.first_blocks(801, 8, "load", None) == [25] * 8
    assert ordering.first_blocks(801, 8, "load", 10) == [10] * 8
    # fewer than two items a worker: load deals them one at a time, round robin
    assert ordering.for_xdist(ordered[:3], 2, "load") == ordered[:3]
    assert ordering.for_xdist(ordered, 1, "load") == ordered
    assert ordering.for_xdist(ordered, 2, "loadscope") == ordered
    assert sorted(ordering.for_xdist(ordered, 3, "worksteal")) == sorted(ordered)


def test_the_order_chosen_longest_only_where_slots_free_one_after_another() -> None:
    assert ordering.choose_order(None, any_known=True, one_process=False) == "longest"
    assert ordering.choose_order(None, any_known=False, one_process=False) == "collection"
    assert ordering.choose_order(None, any_known=True, one_process=True) == "collection"
    assert ordering.choose_order("longest", any_known=False, one_process=True) == "longest"
    assert ordering.choose_order("collection", any_known=True, one_process=False) == "collection"


# -- the sources -----------------------------------------------------------------------------------
def test_a_pytest_split_file_gives_durations_by_node_id_task_id_and_repeat(tmp_path: Path) -> None:
    path = tmp_path / ".test_durations"
    path.write_text(json.dumps({"tasks/expert/a.yaml::a": 12, "b": 3.5}))
    got = known.read_durations_file(path)
    assert got.source == f"--super-durations {path}"
    assert got.get("tasks/expert/a.yaml::a") == 12.0
    assert got.get("tasks/expert.jsonl::b") == 3.5  # by the task id (the last part)
    assert got.get("tasks/expert.jsonl::b[repeat2]") == 3.5  # by the task without its repeat
    assert got.get("tasks/expert/x.yaml::x") is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object of test id to seconds, found a list"),
        ('{"a": 1, "b": "slow"}', "entry 'b' is 'slow', not a number of seconds"),
        ('{"a": -4}', "entry 'a' is '-4', not a number of seconds"),
        ('{"a": true}', "entry 'a' is 'True', not a number of seconds"),
        ("[" * 100 + "]" * 100, "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_a_bad_durations_file_names_the_file_and_what_is_wrong(
    tmp_path: Path, text: str | bytes, says: str
) -> None:
    path = tmp_path / "durations.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(known.DurationsFileError) as raised:
        known.read_durations_file(path)
    assert str(path) in str(raised.value) and says in str(raised.value)


def test_a_missing_or_foreign_durations_file_is_named(tmp_path: Path) -> None:
    for path, says in ((tmp_path / "nope.json", "cannot be read"), (tmp_path, "not a regular")):
        with pytest.raises(known.DurationsFileError, match=says) as raised:
            known.read_durations_file(path)
        assert str(path) in str(raised.value)


def _results(run_dir: Path, *lines: str) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "results.jsonl").write_text("".join(line + "\n" for line in lines))


def test_the_latest_earlier_run_with_durations_wins_and_bad_lines_are_skipped(
    tmp_path: Path,
) -> None:
    record = '{{"task_id": "{}", "outcome": "passed", "duration_s": {}}}'
    _results(tmp_path / "20260101-000000-aa", record.format("a", 7), record.format("b", 1))
    _results(tmp_path / "20260102-000000-bb", record.format("a", 9), "{trunc", '{"task_id": 5}')
    _results(tmp_path / "20260103-000000-cc", '{"task_id": "a", "outcome": "skipped"}')
    got = known.latest_earlier_run(tmp_path, agent=None, model=None)
    assert got.source == "earlier run 20260102-000000-bb"  # the newest has no duration
    assert dict(got.seconds) == {"a": 9.0}
    older = known.latest_earlier_run(
        tmp_path, exclude_run="20260102-000000-bb", agent=None, model=None
    )
    assert dict(older.seconds) == {"a": 7.0, "b": 1.0}
    assert known.latest_earlier_run(tmp_path / "none", agent=None, model=None).source == "none"


def test_sources_in_order_file_then_earlier_run_then_shipped_table(tmp_path: Path) -> None:
    shipped = known.known_durations(None, tmp_path, agent=None, model=None)
    assert shipped.source == "shipped table"
    assert len(shipped.seconds) == 189  # 45 Expert + 144 Masked published episodes
    assert shipped.get("tasks/masked.jsonl::acqsurvey_issue") == 1860.0
    _results(
        tmp_path / "20260101-000000-aa", '{"task_id": "a", "outcome": "failed", "duration_s": 4}'
    )
    assert (
        known.known_durations(None, tmp_path, agent=None, model=None).source
        == "earlier run 20260101-000000-aa"
    )
    given = tmp_path / "d.json"
    given.write_text('{"x": 1}')
    assert (
        known.known_durations(given, tmp_path, agent=None, model=None).source
        == f"--super-durations {given}"
    )


def test_an_earlier_run_of_another_agent_or_model_gives_no_durations(tmp_path: Path) -> None:
    """Issue 44: durations are keyed by agent and model; a gold run's seconds are not a react
    run's, and the ETA takes only the run's own (the shipped table is the paper's react-super
    runs with gpt-4o-2024-08-06; a --super-durations file is the user's word)."""
    record = (
        '{{"task_id": "a", "outcome": "passed", "duration_s": {}, "agent": "{}", "model": "{}"}}'
    )
    _results(tmp_path / "20260101-000000-aa", record.format(30, "react", "gpt-4o"))
    _results(tmp_path / "20260102-000000-bb", record.format(2, "gold", ""))
    react = known.latest_earlier_run(tmp_path, agent="react", model="gpt-4o")
    assert (react.source, dict(react.seconds)) == ("earlier run 20260101-000000-aa", {"a": 30.0})
    assert react.for_eta("react", "gpt-4o") and not react.for_eta("gold", None)
    gold = known.latest_earlier_run(tmp_path, agent="gold", model=None)
    assert (gold.source, dict(gold.seconds)) == ("earlier run 20260102-000000-bb", {"a": 2.0})
    assert not gold.for_eta("react", "gpt-4o")
    assert known.latest_earlier_run(tmp_path, agent="react", model="o3").source == "none"
    shipped = known.known_durations(None, tmp_path, agent="react", model="o3")
    assert shipped.source == "shipped table" and not shipped.for_eta("react", "o3")
    assert not shipped.for_eta("gold", None)
    assert shipped.for_eta("react-super", "gpt-4o-2024-08-06")
    given = tmp_path / "d.json"
    given.write_text('{"a": 5}')
    assert known.known_durations(given, tmp_path, agent="gold", model=None).for_eta("gold", None)


def test_regenerating_the_shipped_table_gives_the_same_file(tmp_path: Path) -> None:
    table = json.loads(known.SHIPPED_TABLE.read_text())
    assert table["command"].startswith("python benchmarks/bench_cluster_sim.py --write-durations")
    out = tmp_path / "super_durations.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_cluster_sim.py", "--write-durations", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == known.SHIPPED_TABLE.read_bytes()


# -- pytest: the order collected, the header, a bad file, pytest-split -----------------------------
def _project(root: Path, seconds: float = 0) -> Path:
    project = make_project(
        root, {f"expert/{t}": task_yaml(t, sleep_then_answer(seconds)) for t in ORDER}
    )
    (project / "durations.json").write_text(
        json.dumps({f"tasks/expert/{t}.yaml::{t}": s for t, s in SECONDS.items()})
    )
    return project


def _collected(output: str) -> list[str]:
    """The task items of `--collect-only` output, in order (-q's node ids, or the tree)."""
    lines = [line.strip() for line in output.splitlines()]
    ids = [line.rsplit("::", 1)[1] for line in lines if "::" in line]
    return ids or [line[15:-1] for line in lines if line.startswith("<SuperTaskItem ")]


def test_one_process_keeps_collection_order_unless_longest_is_asked_for(tmp_path: Path) -> None:
    project = _project(tmp_path)
    args = ("-p", "no:cacheprovider", "--super-agent=gold", "--collect-only", "-q")
    code, out = run_pytest(project, *args, "--super-durations=durations.json")
    assert code == 0, out
    assert _collected(out) == list(ORDER)
    code, out = run_pytest(
        project, *args[:-1], "--super-durations=durations.json", "--super-order=longest"
    )
    assert code == 0, out
    assert _collected(out) == ["long1", "long2", "d", "c", "b", "a"]
    assert "pytest-super: order longest (--super-order); durations: --super-durations " in out
    assert "durations.json, 6 known" in out


def test_the_header_says_when_the_durations_give_no_eta(tmp_path: Path) -> None:
    """Issue 44: the shipped table (react-super with gpt-4o-2024-08-06) orders a gold run's tasks
    but gives it no ETA, and the header says so; a --super-durations file gives any run's."""
    project = _project(tmp_path)
    code, out = run_pytest(project, "--super-agent=gold", "--collect-only")
    assert code == 0, out
    assert "durations: shipped table, 189 known (another agent's or model's: no ETA" in out, out
    code, out = run_pytest(
        project, "--super-agent=gold", "--collect-only", "--super-durations=durations.json"
    )
    assert code == 0 and "durations.json, 6 known\n" in out, out


def test_last_failed_keeps_working_with_longest_first(tmp_path: Path) -> None:
    """`--lf` picks the items (pytest's cache: the record of the gold agent's last failures,
    last_failed.py), our order sorts what it picked."""
    project = _project(tmp_path)
    cache = project / ".pytest_cache" / "v" / "pytest-super"
    cache.mkdir(parents=True)
    failed = {f"tasks/expert/{t}.yaml::{t}": True for t in ("a", "long2", "c")}
    (cache / "lastfailed").write_text(json.dumps({"gold\t": failed, "react\tm": {"x": True}}))
    code, out = run_pytest(
        project,
        "--super-agent=gold",
        "--collect-only",
        "-q",
        "--lf",
        "--super-durations=durations.json",
        "--super-order=longest",
    )
    assert code == 0, out
    assert _collected(out) == ["long2", "c", "a"]
    assert "3 tests collected" in out


def test_a_bad_durations_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "durations.json").write_text('{"tasks/expert/a.yaml::a": "1 min"}')
    code, out = run_pytest(
        project, "-p", "no:cacheprovider", "--super-agent=gold", "--super-durations=durations.json"
    )
    assert code == 4, out
    assert "durations.json: entry 'tasks/expert/a.yaml::a' is '1 min', not a number" in out
    assert "INTERNALERROR" not in out


def test_pytest_split_shards_task_items_by_the_same_file(tmp_path: Path) -> None:
    project = _project(tmp_path)
    groups = []
    for group in (1, 2):
        code, out = run_pytest(
            project,
            "-p",
            "no:cacheprovider",
            "--super-agent=gold",
            "--collect-only",
            "-q",
            "--splits=2",
            f"--group={group}",
            "--splitting-algorithm=least_duration",
            "--durations-path=durations.json",
        )
        assert code == 0, out
        groups.append(set(_collected(out)))
    assert groups[0] and groups[1] and not groups[0] & groups[1]
    assert groups[0] | groups[1] == set(ORDER)
    assert not {"long1", "long2"} <= groups[0] and not {"long1", "long2"} <= groups[1]


def test_under_xdist_items_of_no_known_duration_keep_collection_order(tmp_path: Path) -> None:
    """The shipped table is always there, but it knows none of these tasks: the workers get
    collection order's runs, not a dealt one. Every task has a result of an earlier run without a
    duration, so --super-resume skips them all (no container) and only the order is seen."""
    project = _project(tmp_path)
    conftest = project / "conftest.py"
    conftest.write_text(conftest.read_text() + LOGSTART_PLUGIN)
    record = '{{"task_id": "{}", "outcome": "passed", "agent": "gold", "model": ""}}'
    _results(project / "reports" / "20260101-000000-aa", *(record.format(t) for t in ORDER))
    code, out = run_pytest(
        project,
        "-p",
        "no:cacheprovider",
        "--super-agent=gold",
        "--super-resume",
        "-n",
        "2",
        "--dist",
        "worksteal",
    )
    assert code == 0, out
    assert "durations: shipped table" in out and "6 skipped" in out
    by_worker: dict[str, list[str]] = {}
    for line in (project / "starts.txt").read_text().splitlines():
        worker, name = line.split()
        by_worker.setdefault(worker, []).append(name)
    assert sorted(n for names in by_worker.values() for n in names) == sorted(ORDER)
    # worksteal's first run for a worker is a, b, c (stealing takes from a run's end only)
    (first,) = [names for names in by_worker.values() if names[0] == "a"]
    assert first[:2] == ["a", "b"], by_worker


# -- the start order under xdist (real engine) -----------------------------------------------------
def _starts(project: Path) -> list[str]:
    lines = (project / "starts.txt").read_text().split("\n")
    return [name for _, name in sorted(line.split() for line in lines if line)]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("dist", ["load", "worksteal"])
def test_under_xdist_the_longest_tasks_start_first(image: str, tmp_path: Path, dist: str) -> None:
    """Both long tasks (listed last) start first, one on each worker: xdist hands each worker a
    run of consecutive items, so plain longest first would queue both on the first worker."""
    project = _project(tmp_path, seconds=1)
    conftest = project / "conftest.py"
    conftest.write_text(conftest.read_text() + STARTS_PLUGIN)
    code, out = run_pytest(
        project,
        "-p",
        "no:cacheprovider",
        "--super-agent=gold",
        "--super-durations=durations.json",
        "-n",
        "2",
        "--dist",
        dist,
    )
    assert code == 0, out
    assert "pytest-super: order longest (default); durations: --super-durations" in out
    starts = _starts(project)
    assert sorted(starts) == sorted(ORDER)
    assert set(starts[:2]) == {"long1", "long2"}, starts  # each worker's first task
    if dist == "load":  # --super-resume after it: every task resumed, ordered by that run
        code, out = run_pytest(
            project, "-p", "no:cacheprovider", "--super-agent=gold", "--super-resume", "-n", "2"
        )
        assert code == 0, out
        assert "6 skipped" in out
        assert "durations: earlier run " in out and ", 6 known" in out
