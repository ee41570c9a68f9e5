"""The offline demo benchmark: mirrors of the demo repositories and the gold solutions of its tasks.

Fast tests pin what build_mirrors produces (the commits the tasks name, idempotence, clones through
git's URL rewriting) and that every task file is well formed. The slow test runs each gold
solution for real through the project's own runner (`runner.run_episode` with the gold agent: its
kernel driver, edit tool, answer parsing and landmark matching): a fresh virtualenv (so
`pip install -r requirements.txt` gets today's numpy 2 and the dependency hurdles are real), a
local kernel started from it (`LocalBox(python=...)`) in a fresh working directory, and git
redirected to the mirrors. It checks the accuracy, every landmark, the script-executed metric for
Auto tasks, and (Expert tasks run a second time, in the long group) determinism. The 2-minute
budget per task is a figure, not an assertion: benchmarks/bench_demo_gold.py prints each run's time
against it and against a baseline measured in the same run.

    .venv/bin/pytest tests/test_demo_repos.py -q                 # fast tests
    .venv/bin/pytest tests/test_demo_repos.py -q -m slow -s      # the gold runs, with timings
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from pytest_super.edit import EditRequest, apply_edit
from pytest_super.runner import TaskResult
from pytest_super.trajectory import load_trajectory
from tests.support.demo_gold import (
    REPOS_DIR,
    TASK_FILES,
    TASKS_DIR,
    make_base_site,
    make_venv,
    mirrors,
    run_gold,
    task_set,
)

TIMINGS_FILE = Path(tempfile.gettempdir()) / "super-demo-timings.jsonl"
TRANSCRIPTS_DIR = Path(tempfile.gettempdir()) / "super-demo-transcripts"


def load(path: Path) -> dict:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


#: every demo task's gold solution, as (task file, attempt). `make test` runs the Expert set's four
#: once, on one xdist worker (`demo-gold`: the session's base virtualenv and mirrors are then made
#: once, about 100 s each time on 2 cores); `make test-all` adds the Expert set's second runs
#: (determinism) and the Masked and Auto sets' (docs/testing.md)
GOLD_RUNS = [
    pytest.param(
        path,
        attempt,
        marks=(pytest.mark.xdist_group("demo-gold"),)
        if task_set(path) == "expert" and attempt == 0
        else (pytest.mark.long,),
        id=f"{path.parent.name}/{path.stem}" + ("" if attempt == 0 else "#again"),
    )
    for path in TASK_FILES
    for attempt in ((0, 1) if task_set(path) == "expert" else (0,))
]


@pytest.fixture(scope="session")
def mirror_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mirrors.build_mirrors(tmp_path_factory.mktemp("mirrors"))


# ------------------------------------------------------------------------------ fast tests


def test_task_files_exist_for_every_set() -> None:
    sets = {task_set(p) for p in TASK_FILES}
    assert sets == {"expert", "masked", "auto"}
    assert sum(task_set(p) == "expert" for p in TASK_FILES) >= 4
    assert sum(task_set(p) == "masked" for p in TASK_FILES) >= 10
    assert sum(task_set(p) == "auto" for p in TASK_FILES) >= 3


def test_mirror_commits_are_the_ones_tasks_name(mirror_dir: Path) -> None:
    heads = {h.name: mirrors.commit_hashes(mirror_dir, h.name) for h in mirrors.HISTORY}
    for name, commits in heads.items():
        assert len(commits) >= 2, f"{name} should have a history of 2+ commits"
    for path in TASK_FILES:
        repo = load(path)["repository"]
        name = repo["url"].removeprefix(mirrors.URL_PREFIX)
        assert name in heads, f"{path}: {repo['url']} is not a demo repository"
        assert repo["commit"] in heads[name], f"{path}: commit {repo['commit']} not in {name}"


def test_mirror_hashes_do_not_depend_on_destination(tmp_path: Path, mirror_dir: Path) -> None:
    other = mirrors.build_mirrors(tmp_path / "elsewhere")
    for h in mirrors.HISTORY:
        assert mirrors.commit_hashes(other, h.name) == mirrors.commit_hashes(mirror_dir, h.name)


def test_build_mirrors_skips_unchanged_and_rebuilds_stale(tmp_path: Path) -> None:
    dest = mirrors.build_mirrors(tmp_path / "m")
    stamp = dest / "bow-sentiment" / ".git" / mirrors.STAMP_NAME
    head = mirrors.commit_hashes(dest, "bow-sentiment")
    marker = dest / "bow-sentiment" / "untracked-marker"
    marker.write_text("still here if the repository was not rebuilt")
    mirrors.build_mirrors(dest)
    assert marker.exists()  # skipped: a rebuild would have removed the untracked file
    stamp.write_text("stale\n")
    mirrors.build_mirrors(dest)
    assert not marker.exists()
    assert mirrors.commit_hashes(dest, "bow-sentiment") == head


def test_clone_through_insteadof_checks_out_named_commit(mirror_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, **mirrors.git_mirror_env(mirror_dir)}
    task = load(TASKS_DIR / "expert" / "tabular-mlp.yaml")
    for url in (task["repository"]["url"], task["repository"]["url"] + ".git"):
        target = tmp_path / url.rsplit("/", 1)[-1]
        subprocess.run(["git", "clone", "-q", url, str(target)], env=env, check=True)
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=target, capture_output=True, text=True, check=True
        ).stdout.strip()
        assert head == task["repository"]["commit"]
        assert (target / "data" / "train.csv").is_file()


def test_run_script_is_executable_in_the_mirror(mirror_dir: Path) -> None:
    out = subprocess.run(
        ["git", "ls-files", "-s", "run.sh"],
        cwd=mirror_dir / "bow-sentiment",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("100755 ")


def test_task_files_are_generated_from_make_demo_tasks() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPOS_DIR / "make_demo_tasks.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_task_file_shape(path: Path) -> None:
    data = load(path)
    assert data["id"] == path.stem
    assert data["query"].rstrip().endswith(data["repository"]["url"]) or (
        "I have already executed some of the required steps. Now, " in data["query"]
    )
    if task_set(path) == "auto":
        assert "answer" not in data
        assert (
            REPOS_DIR / data["repository"]["url"].rsplit("/", 1)[-1] / data["entrypoint"]
        ).is_file()
        return
    assert 2 <= len(data["landmarks"]) <= 6
    assert "replace 0.0 with the actual value" in data["query"]
    last = data["solution"][-1]["execute"]
    assert "json.dumps" in last and "print(" in last
    if task_set(path) == "masked":
        parent = load(TASKS_DIR / "expert" / f"{data['id'].rsplit('_', 1)[0]}.yaml")
        assert data["answer"] == parent["answer"]
        assert data["landmarks"] == parent["landmarks"]
        assert data["categories"] == data["id"].rsplit("_", 1)[1].split(",")


def test_masked_set_covers_every_category_and_both_cell_kinds() -> None:
    masked = [load(p) for p in TASK_FILES if task_set(p) == "masked"]
    covered = {c for m in masked for c in m["categories"]}
    assert covered == {"dependencies", "cpu", "configuration", "data", "issue", "goal", "other"}
    assert any(len(m["categories"]) == 2 for m in masked)
    kinds = {next(iter(c)) for m in masked for c in m["pre_executed"]}
    assert kinds == {"execute", "edit"}


def test_edit_cells_match_the_repository_files() -> None:
    """Every edit applies (the project's edit tool) to its file, once the earlier edits are applied."""
    for path in TASK_FILES:
        data = load(path)
        repo = REPOS_DIR / data["repository"]["url"].rsplit("/", 1)[-1]
        files: dict[str, str] = {}
        for cell in data.get("pre_executed", []) + data.get("solution", []):
            if "edit" not in cell:
                continue
            e = cell["edit"]
            text = files.get(e["file"], (repo / e["file"]).read_text(encoding="utf-8"))
            request = EditRequest(file=e["file"], before=e["before"], after=e["after"])
            outcome = apply_edit(text, request)
            assert outcome.ok and outcome.new_text is not None, f"{path}: {outcome.message}"
            files[e["file"]] = outcome.new_text


# ------------------------------------------------------------------------------ running tasks


@pytest.fixture(scope="session")
def base_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_base_site(tmp_path_factory.mktemp("base-venv"))


def record_timing(path: Path, runs: list[TaskResult]) -> None:
    """Append the run times to TIMINGS_FILE and write each run's cells and outputs for review."""
    TRANSCRIPTS_DIR.mkdir(exist_ok=True)
    for i, run in enumerate(runs):
        steps = load_trajectory(Path(run.trajectory).with_suffix(".json")).steps
        text = "".join(
            f"### [{s.duration_s:.1f} s] {s.content.rstrip()}\n{s.output}\n" for s in steps
        )
        (TRANSCRIPTS_DIR / f"{path.parent.name}__{path.stem}__{i}.txt").write_text(text)
    with TIMINGS_FILE.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "task": f"{path.parent.name}/{path.stem}",
                    "seconds": [round(r.duration_s, 1) for r in runs],
                }
            )
            + "\n"
        )
    print(f"\n{path.parent.name}/{path.stem}: " + ", ".join(f"{r.duration_s:.1f} s" for r in runs))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("path", "attempt"), GOLD_RUNS)
def test_gold_solution_runs(
    path: Path,
    attempt: int,
    base_site: Path,
    mirror_dir: Path,
    tmp_path: Path,
) -> None:
    data = load(path)
    workdir = tmp_path / f"run{attempt}"
    workdir.mkdir()
    venv = make_venv(base_site, workdir)
    run = run_gold(path, venv, mirror_dir, workdir)
    record_timing(path, [run])
    steps = load_trajectory(Path(run.trajectory).with_suffix(".json")).steps
    failed = [s for s in steps if s.cell_status not in (None, "ok")]
    assert not failed, f"cell failed: {failed[0].content}\n{failed[0].output[-2000:]}"
    if task_set(path) == "auto":
        assert run.script_executed == 1.0, (
            f"no cell ran {data['entrypoint']} for 10 s without a traceback:\n"
            + "\n".join(f"[{s.duration_s:.1f} s] {s.content}\n{s.output[-500:]}" for s in steps)
        )
    else:
        assert run.submission == data["answer"] and run.accuracy == 1.0, run.last_observation
        assert run.landmarks == 1.0, (
            f"landmarks not found in any cell output: {run.landmarks_missed}"
        )
    shutil.rmtree(workdir, ignore_errors=True)
