"""The offline demo benchmark: mirrors of the demo repositories and the gold solutions of its tasks.

Fast tests pin what build_mirrors produces (the commits the tasks name, idempotence, clones through
git's URL rewriting) and that every task file is well formed. The slow test runs each gold
solution for real: a fresh virtualenv (so `pip install -r requirements.txt` gets today's numpy 2
and the dependency hurdles are real), a fresh IPython kernel started from it through
jupyter_client, a fresh working directory, and git redirected to the mirrors. It checks the printed
JSON against `answer`, every landmark against the cell outputs, the script-executed metric for
Auto tasks, the 2-minute budget, and (Expert tasks run twice) determinism.

    .venv/bin/pytest tests/test_demo_repos.py -q                 # fast tests
    .venv/bin/pytest tests/test_demo_repos.py -q -m slow -s      # the gold runs, with timings
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = ROOT / "tasks"
REPOS_DIR = TASKS_DIR / "repos"
sys.path.insert(0, str(REPOS_DIR))

import build_mirrors as mirrors  # noqa: E402

from pytest_super.scoring import ExecutedCell, score_script_executed  # noqa: E402

TASK_FILES = sorted(TASKS_DIR.glob("[ema]*/*.yaml"))
TASK_BUDGET_S = 120.0
CELL_TIMEOUT_S = 300.0
TIMINGS_FILE = Path(tempfile.gettempdir()) / "super-demo-timings.jsonl"
TRANSCRIPTS_DIR = Path(tempfile.gettempdir()) / "super-demo-transcripts"


def load(path: Path) -> dict:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def task_set(path: Path) -> str:
    return path.parent.name


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
    started = time.perf_counter()
    mirrors.build_mirrors(dest)
    assert time.perf_counter() - started < 2.0
    assert marker.exists()
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
    """Every edit's `before` occurs exactly once in its file, once the earlier edits are applied."""
    for path in TASK_FILES:
        data = load(path)
        repo = REPOS_DIR / data["repository"]["url"].rsplit("/", 1)[-1]
        files: dict[str, str] = {}
        for cell in data.get("pre_executed", []) + data.get("solution", []):
            if "edit" not in cell:
                continue
            e = cell["edit"]
            text = files.get(e["file"], (repo / e["file"]).read_text(encoding="utf-8"))
            files[e["file"]] = replace_lines_once(
                text, e["before"], e["after"], f"{path}: {e['file']}"
            )


# ------------------------------------------------------------------------------ running tasks


def replace_lines_once(text: str, before: str, after: str, where: str) -> str:
    """SUPER's edit: replace the exact lines `before` with `after`; they must occur exactly once."""
    lines = text.splitlines(keepends=True)
    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    if old and not old[-1].endswith("\n"):
        old[-1] += "\n"
    if new and not new[-1].endswith("\n"):
        new[-1] += "\n"
    hits = [i for i in range(len(lines) - len(old) + 1) if lines[i : i + len(old)] == old]
    if len(hits) != 1:
        raise AssertionError(
            f"{where}: the lines to replace occur {len(hits)} times, not once:\n{before}"
        )
    i = hits[0]
    return "".join(lines[:i] + new + lines[i + len(old) :])


@dataclass
class CellRun:
    code: str
    output: str
    duration_s: float
    error: str | None = None


@dataclass
class TaskRun:
    cells: list[CellRun] = field(default_factory=list)
    duration_s: float = 0.0

    def outputs(self) -> list[str]:
        return [c.output for c in self.cells]


class VenvKernel:
    """An IPython kernel started from its own fresh virtualenv, in a fresh working directory."""

    def __init__(self, base_site: Path, mirror_dir: Path, workdir: Path) -> None:
        self.venv = workdir / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        # ipykernel comes from a shared base virtualenv that holds nothing else (no numpy),
        # appended to sys.path after the task's own site-packages
        site = Path(
            subprocess.run(
                [
                    str(self.venv / "bin" / "python"),
                    "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        (site / "_super_demo_base.pth").write_text(f"{base_site}\n")
        self.cwd = workdir / "content"
        self.cwd.mkdir()
        specs = workdir / "kernels"
        (specs / "demo").mkdir(parents=True)
        (specs / "demo" / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [
                        str(self.venv / "bin" / "python"),
                        "-m",
                        "ipykernel_launcher",
                        "-f",
                        "{connection_file}",
                    ],
                    "display_name": "demo venv",
                    "language": "python",
                }
            )
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(
                ("PYTHON", "VIRTUAL_ENV", "GIT_CONFIG", "PIP_FIND_LINKS", "JUPYTER")
            )
        }
        env.update(mirrors.git_mirror_env(mirror_dir))
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.venv)
        env["PIP_CONFIG_FILE"] = os.devnull  # like a container: no local wheel folders or indexes
        self.km = KernelManager(
            kernel_name="demo", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)])
        )
        self.km.start_kernel(cwd=str(self.cwd), env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def execute(self, code: str) -> CellRun:
        chunks: list[str] = []

        def hook(msg: dict) -> None:
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                chunks.append(content["text"])
            elif kind in ("execute_result", "display_data"):
                chunks.append(content["data"].get("text/plain", "") + "\n")
            elif kind == "error":
                chunks.append(
                    f"{content['ename']}: {content['evalue']}\n" + "\n".join(content["traceback"])
                )

        started = time.perf_counter()
        reply = self.kc.execute_interactive(code, timeout=CELL_TIMEOUT_S, output_hook=hook)
        duration = time.perf_counter() - started
        error = None
        if reply["content"]["status"] == "error":
            error = f"{reply['content']['ename']}: {reply['content']['evalue']}"
        return CellRun(code, "".join(chunks), duration, error)

    def cwd_now(self) -> Path:
        reply: list[str] = []
        self.kc.execute_interactive(
            "import os as _o; print(_o.getcwd())",
            store_history=False,
            output_hook=lambda m: (
                reply.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None
            ),
            timeout=30,
        )
        return Path("".join(reply).strip())

    def run_cell(self, cell: dict) -> CellRun:
        if "execute" in cell:
            return self.execute(cell["execute"])
        e = cell["edit"]
        path = self.cwd_now() / e["file"]
        started = time.perf_counter()
        text = replace_lines_once(
            path.read_text(encoding="utf-8"), e["before"], e["after"], str(path)
        )
        path.write_text(text, encoding="utf-8")
        return CellRun(f"edit {e['file']}", f"Edited {e['file']}.\n", time.perf_counter() - started)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="session")
def base_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("base-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "ipykernel"],
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
        check=True,
    )
    site = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import numpy"], capture_output=True
    )
    assert probe.returncode != 0, "the base virtualenv must not hold numpy"
    return Path(site)


def run_task(data: dict, base_site: Path, mirror_dir: Path, workdir: Path) -> TaskRun:
    kernel = VenvKernel(base_site, mirror_dir, workdir)
    run = TaskRun()
    try:
        started = time.perf_counter()
        for cell in data.get("pre_executed", []) + data["solution"]:
            result = kernel.run_cell(cell)
            run.cells.append(result)
            assert result.error is None, (
                f"cell failed: {result.error}\n{result.code}\n{result.output}"
            )
        run.duration_s = time.perf_counter() - started
    finally:
        kernel.close()
    return run


def printed_answer(run: TaskRun) -> object:
    lines = [ln for ln in run.cells[-1].output.strip().splitlines() if ln.strip()]
    assert lines, "the last solution cell printed nothing"
    return json.loads(lines[-1])


def check_landmarks(landmarks: list[str], run: TaskRun) -> None:
    outputs = [o.replace("\n", " ") for o in run.outputs()]
    missed = [lm for lm in landmarks if not any(re.search(lm, o) for o in outputs)]
    assert not missed, f"landmarks not found in any cell output: {missed}"


def script_executed(entrypoint: str, run: TaskRun) -> float | None:
    cells = [ExecutedCell(c.code, c.output, c.duration_s) for c in run.cells]
    return score_script_executed(entrypoint, cells)


def record_timing(path: Path, runs: list[TaskRun]) -> None:
    """Append the run times to TIMINGS_FILE and write each run's cells and outputs for review."""
    TRANSCRIPTS_DIR.mkdir(exist_ok=True)
    for i, run in enumerate(runs):
        text = "".join(
            f"### [{c.duration_s:.1f} s] {c.code.rstrip()}\n{c.output}\n" for c in run.cells
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
@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_gold_solution_runs(path: Path, base_site: Path, mirror_dir: Path, tmp_path: Path) -> None:
    data = load(path)
    runs = []
    for attempt in range(2 if task_set(path) == "expert" else 1):
        runs.append(run_task(data, base_site, mirror_dir, tmp_path / f"run{attempt}"))
        shutil.rmtree(tmp_path / f"run{attempt}", ignore_errors=True)
    record_timing(path, runs)
    for run in runs:
        assert run.duration_s < TASK_BUDGET_S, (
            f"took {run.duration_s:.0f} s, budget {TASK_BUDGET_S:.0f} s"
        )
        if task_set(path) == "auto":
            assert script_executed(data["entrypoint"], run) == 1.0, (
                f"no cell ran {data['entrypoint']} for 10 s without a traceback:\n"
                + "\n".join(
                    f"[{c.duration_s:.1f} s] {c.code}\n{c.output[-500:]}" for c in run.cells
                )
            )
            continue
        assert printed_answer(run) == data["answer"], run.cells[-1].output
        check_landmarks(data["landmarks"], run)
