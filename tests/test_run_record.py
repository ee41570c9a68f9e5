"""One settings model for pytest and scripts (settings.py), and a run record below pytest
(run_record.py): `SuperRun()` holds a pytest run's defaults, `SuperRun.resolve(rootdir=...)` the
settings a pytest run in that folder holds (sources and errors included), `load_tasks` the tasks
collection finds, and `run_tasks` leaves the run folder a pytest run leaves."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_super.settings import SettingError, SuperRun

pytest_plugins = ["pytester"]

#: a conftest that writes the SuperRun pytest resolved, as JSON, to run.json
DUMP_CONFTEST = """\
import dataclasses, json
from pytest_super.options import run_of

def pytest_sessionstart(session):
    run = run_of(session.config)
    data = dataclasses.asdict(run)
    data["sources"] = run.sources
    with open("run.json", "w") as f:
        json.dump(data, f, default=str)
"""

#: what differs between two resolutions of the same settings: the run's own id and names
PER_RUN = {"run_id", "worker"}


def _plain(run: SuperRun) -> dict[str, Any]:
    data = json.loads(json.dumps(dataclasses.asdict(run), default=str))
    data["sources"] = run.sources
    return _less_per_run(data)


def _less_per_run(data: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in data.items() if k not in PER_RUN}
    data["kernel"] = {k: v for k, v in data["kernel"].items() if k not in PER_RUN}
    return data


def _pytest_run(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    pytester.makeconftest(DUMP_CONFTEST)
    result = pytester.runpytest_subprocess("--collect-only", "-p", "no:cacheprovider", *args)
    assert (pytester.path / "run.json").exists(), result.stdout.str()[-3000:]
    return _less_per_run(json.loads((pytester.path / "run.json").read_text()))


def test_superrun_holds_the_defaults_of_a_pytest_run(pytester, monkeypatch):
    for var in ("RAY_ADDRESS", "SUPER_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    pytester.makefile(".ini", pytest="[pytest]\n")
    pytester.mkdir("tasks")
    theirs = _pytest_run(pytester)
    mine = _plain(SuperRun(report_dir=pytester.path / "reports"))
    mine["task_roots"] = theirs["task_roots"]  # the ini's folders: only resolve reads them
    mine["sources"] = theirs["sources"] = {}  # SuperRun() was given nothing: no sources
    assert mine == theirs
    assert theirs["kernel"]["disk_bytes"] == 20 * 2**30
    assert theirs["executor_settings"]["ray_address"] == "auto"  # an executor's own setting


INI_FILES = {
    "pytest.ini": "[pytest]\n{lines}",
    "pyproject.toml": "[tool.pytest.ini_options]\n{toml}",
    "tox.ini": "[pytest]\n{lines}",
    "setup.cfg": "[tool:pytest]\n{lines}",
}
SETTINGS = {
    "super_mem": "3g",
    "super_cell_timeout": "120",
    "super_ray_address": "ini-host:1",
    "super_git_mirrors": "https://github.com/super-demo/=mirrors",
}


@pytest.mark.parametrize("ini_name", sorted(INI_FILES))
def test_resolve_equals_a_pytest_run_in_that_folder(pytester, monkeypatch, ini_name):
    monkeypatch.setenv("RAY_ADDRESS", "env-host:2")  # the environment beats the ini
    lines = "".join(f"{k} = {v}\n" for k, v in SETTINGS.items())
    toml = "".join(f'{k} = "{v}"\n' for k, v in SETTINGS.items())
    (pytester.path / ini_name).write_text(INI_FILES[ini_name].format(lines=lines, toml=toml))
    pytester.mkdir("tasks")
    theirs = _pytest_run(pytester, "--super-agent=gold", "--super-cpus=1.5")
    sub = pytester.mkdir("sub")  # resolved from a folder below the ini's, as pytest finds it
    mine = _plain(SuperRun.resolve(rootdir=sub, agent="gold", cpus="1.5"))
    for name in ("agent", "cpus"):
        assert mine["sources"][name] == f"SuperRun.resolve({name}=...)"
        assert theirs["sources"][name] == f"--super-{name}"
        mine["sources"][name] = theirs["sources"][name]
    assert mine == theirs
    assert mine["sources"]["mem"] == f"ini super_mem ({ini_name})"
    assert mine["sources"]["ray_address"] == "environment variable RAY_ADDRESS"
    assert mine["sources"]["git_mirror https://github.com/super-demo/"] == (
        f"ini super_git_mirrors ({ini_name})"
    )
    assert mine["kernel"]["git_mirrors"] == {
        "https://github.com/super-demo/": str(pytester.path / "mirrors")
    }


@pytest.mark.parametrize(
    ("ini", "given", "expected"),
    [
        ("super_cpus = abc\n", {}, "ini super_cpus (pytest.ini) 'abc': expected a finite number"),
        ("", {"cpus": "abc"}, "'abc': expected a finite number of CPUs from 0.01 to 1024"),
        ("super_disk = 5\n", {}, "ini super_disk (pytest.ini) 5: expected a size from 1m"),
        ("", {"set": "nope"}, "--super-set: unknown set 'nope'"),
        ("", {"agent": "nobody"}, "--super-agent: "),
    ],
)
def test_a_bad_value_is_refused_with_the_message_pytest_gives(pytester, ini, given, expected):
    pytester.makefile(".ini", pytest="[pytest]\n" + ini)
    with pytest.raises(SettingError) as caught:
        SuperRun.resolve(rootdir=pytester.path, **given)
    assert expected in str(caught.value)
    args = [f"--super-{k}={v}" for k, v in given.items()]
    result = pytester.runpytest_subprocess("--collect-only", "-p", "no:cacheprovider", *args)
    message = str(caught.value).replace(f"SuperRun.resolve({next(iter(given), '')}=...)", "")
    assert message.strip() in result.stderr.str().replace("\n", " ") or message in (
        result.stderr.str()
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("retries", -5),
        ("repeat", 0),
        ("max_containers", 0),
        ("progress", "sometimes"),
        ("order", "random"),
        ("backend", "nonexistent-backend"),
        ("executor", "nonexistent-executor"),
        ("agent", "nonexistent-agent"),
    ],
)
def test_a_superrun_built_directly_refuses_what_the_option_refuses(tmp_path, name, value):
    """Issue 45: `SuperRun(retries=-5, agent="nonexistent-agent")` was accepted unchecked. Built
    directly, it says what `SuperRun.resolve` (the option path: the test above compares it with
    pytest's) says, with its own source in the place of the option's."""
    with pytest.raises(SettingError) as direct:
        SuperRun(**{name: value})
    with pytest.raises(SettingError) as resolved:
        SuperRun.resolve(rootdir=tmp_path, **{name: value})
    said = str(direct.value)
    assert said.startswith(f"SuperRun({name}=...)"), said
    option_source = "--super-agent" if name == "agent" else f"SuperRun.resolve({name}=...)"
    assert said.removeprefix(f"SuperRun({name}=...)") == str(resolved.value).removeprefix(
        option_source
    )


def test_a_superrun_built_directly_is_checked_whole(tmp_path):
    with pytest.raises(SettingError, match=r"^SuperRun\(retries=...\) -5: expected a whole"):
        SuperRun(retries=-5, agent="nonexistent-agent")
    with pytest.raises(SettingError, match=r"^SuperRun\(agent=...\): .*nonexistent-agent"):
        SuperRun(retries=2, agent="nonexistent-agent")
    with pytest.raises(SettingError, match=r"^SuperRun\(retries=...\) '3': a str, where .* int"):
        SuperRun(retries="3")  # type: ignore[arg-type]
    run = SuperRun(agent="gold", retries=3, repeat=2, max_containers=4, order="longest")
    assert (run.retries, run.repeat, run.max_containers, run.order) == (3, 2, 4, "longest")
    assert dataclasses.replace(run, retries=1).retries == 1


def test_an_unknown_keyword_is_a_type_error_naming_the_known_ones(tmp_path):
    with pytest.raises(TypeError, match="unknown settings memory; known: .*mem"):
        SuperRun.resolve(rootdir=tmp_path, memory="3g")


# -- load_tasks: the tasks collection finds -------------------------------------------------------
YAML_TASK = """\
id: {id}
query: 'Report x as a json structured as follows: {{"x": 0}}.'
answer: {{x: 1}}
solution:
  - execute: "print('{{\\"x\\": 1}}')"
"""


def _super_row(task_id: str) -> str:
    return json.dumps(
        {
            "task_id": task_id,
            "github_repo": "https://github.com/super-demo/vocab-stats",
            "git_commit": "abc123",
            "query": "Train it and report the accuracy.",
            "query_components": {"e2e_task": "Train it"},
            "answer": '{"accuracy": 0.5}',
            "landmarks": ["Epoch 1/1"],
            "entrypoint": "",
            "pre_execute_cells": [],
            "solution": [],
        }
    )


def _tasks_folder(root, files: dict[str, str]):
    for name, text in files.items():
        path = root / "tasks" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "pytest.ini").write_text("[pytest]\nsuper_tasks = tasks\n")
    return root / "tasks"


def _collected(pytester: pytest.Pytester) -> tuple[list[str], str]:
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "-p", "no:cacheprovider", "--super-agent=gold"
    )
    ids = [ln.split("::")[-1] for ln in result.outlines if "::" in ln]
    return ids, result.stdout.str()


def test_load_tasks_returns_what_collection_collects(pytester):
    from pytest_super import load_tasks

    folder = _tasks_folder(
        pytester.path,
        {
            "expert/b.yaml": YAML_TASK.format(id="b"),
            "expert/a.yml": YAML_TASK.format(id="a"),
            "expert.jsonl": _super_row("j1") + "\n" + _super_row("j2") + "\n",
            "repos/ignored.yaml": "not: a task",
            ".hidden/ignored.yaml": "not: a task",
        },
    )
    ids, _ = _collected(pytester)
    assert sorted(t.id for t in load_tasks(folder)) == sorted(ids) == ["a", "b", "j1", "j2"]
    assert [t.id for t in load_tasks(folder / "expert.jsonl")] == ["j1", "j2"]
    assert [t.id for t in load_tasks(str(folder / "expert" / "a.yml"))] == ["a"]
    assert {t.set for t in load_tasks(folder)} == {"expert"}


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"expert/a.yaml": "id: a\nquery: q\n"}, "a.yaml"),  # no answer: invalid
        (
            {"expert/a.yaml": YAML_TASK.format(id="a"), "expert/b.yaml": YAML_TASK.format(id="a")},
            "duplicate task id",
        ),
        ({"expert.jsonl": _super_row("j1") + "\n{not json\n"}, "not a JSON object"),
        ({"expert.jsonl": _super_row("j1") + "\n" + _super_row("j1") + "\n"}, "duplicate task id"),
    ],
)
def test_load_tasks_refuses_what_collection_refuses_with_its_message(pytester, files, expected):
    from pytest_super import load_tasks
    from pytest_super.tasks import TaskFileError

    folder = _tasks_folder(pytester.path, files)
    with pytest.raises(TaskFileError) as caught:
        load_tasks(folder)
    _, output = _collected(pytester)
    message = str(caught.value)
    assert expected in message
    relative = message.replace(str(pytester.path) + "/", "")
    assert message in output or relative in output, (message, output[-2000:])


def test_load_tasks_names_a_path_that_is_no_task_file(tmp_path):
    from pytest_super import load_tasks
    from pytest_super.tasks import TaskFileError

    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(TaskFileError, match="notes.txt: not a task file"):
        load_tasks(tmp_path / "notes.txt")
    with pytest.raises(TaskFileError, match="missing.yaml: cannot read the task file"):
        load_tasks(tmp_path / "missing.yaml")


# -- a script: resolve, load_tasks, run_tasks; the run folder a pytest run leaves -------------------
ROOT = Path(__file__).resolve().parent.parent
MIRRORS = ROOT / ".super-cache" / "mirrors"
MIRROR_TASK = ROOT / "tasks" / "expert" / "hmm-tagger.yaml"  # clones super-demo/hmm-tagger

SCRIPT = """\
import json, sys
from pathlib import Path
from pytest_super import SuperRun, load_tasks, run_tasks

run = SuperRun.resolve(rootdir=Path(sys.argv[1]), agent="gold")
results = run_tasks(load_tasks(Path(sys.argv[1]) / "tasks"), run)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pytest", "_pytest", "xdist"))
print(json.dumps({"run_dir": str(run.run_dir), "sources": run.sources, "mem": run.kernel.mem,
                  "mirrors": run.kernel.git_mirrors, "pytest_modules": loaded,
                  "results": [(r.task.id, r.exit_status.value, r.accuracy) for r in results]}))
"""


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.docker
@pytest.mark.slow
def test_a_script_runs_a_task_that_needs_the_ini_s_mirror_and_leaves_a_pytest_run_folder(
    tmp_path, image
):
    # the mirrors the ini names: made here, not left to whichever pytest run with --super-agent
    # came first (the root conftest.py makes them then; alone, the test found none)
    from tests.support.demo_gold import mirrors

    mirrors.build_mirrors(MIRRORS)
    (tmp_path / "tasks" / "expert").mkdir(parents=True)
    shutil.copy(MIRROR_TASK, tmp_path / "tasks" / "expert")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nsuper_tasks = tasks\nsuper_mem = 3g\n"
        f"super_git_mirrors =\n    https://github.com/super-demo/={MIRRORS}\n"
    )
    alone = _run([sys.executable, "-c", SCRIPT, str(tmp_path)], ROOT)
    assert alone.returncode == 0, alone.stdout[-2000:] + alone.stderr[-3000:]
    got = json.loads(alone.stdout.strip().splitlines()[-1])
    assert got["pytest_modules"] == []  # no pytest in that process
    assert got["results"] == [["hmm-tagger", "submitted", 1.0]]
    assert got["mem"] == "3g" and got["sources"]["mem"] == "ini super_mem (pytest.ini)"
    assert got["sources"]["git_mirror https://github.com/super-demo/"] == (
        "ini super_git_mirrors (pytest.ini)"
    )
    run_dir = Path(got["run_dir"])
    assert run_dir.parent == tmp_path / "reports"
    (line,) = (run_dir / "results.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["task_id"] == "hmm-tagger" and record["outcome"] == "passed"
    assert (tmp_path / record["trajectory"]).exists()  # relative, as pytest writes it
    assert {p.name for p in run_dir.iterdir()} >= {"results.jsonl", "summary.md", "index.html"}
    assert (run_dir / "trajectories" / "hmm-tagger.json").exists()
    assert (run_dir / "trajectories" / "hmm-tagger.ipynb").exists()

    (run_dir / "index.html").unlink()  # made again from the folder alone
    html = _run([sys.executable, "-m", "pytest_super.cli", "html", str(run_dir)], ROOT)
    assert html.returncode == 0, html.stderr[-2000:]
    assert "hmm-tagger" in (run_dir / "index.html").read_text()

    resumed = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--super-agent=gold",
            "--super-resume",
            "-p",
            "no:cacheprovider",
            "-rs",
        ],
        tmp_path,
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert f"resumed: passed in run {run_dir.name}" in resumed.stdout


# -- the CLI's shared options come from the same table ------------------------------------------------
@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["image", "build"], "docker_host"),
        (["image", "build"], "ray_address"),
        (["image", "push"], "docker_host"),
        (["cleanup"], "docker_host"),
    ],
)
def test_a_subcommands_shared_option_is_the_settings_tables(command, name, capsys):
    from pytest_super.cli import main
    from pytest_super.settings import all_settings

    (setting,) = [s for s in all_settings() if s.name == name]
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--" + name.replace("_", "-") in out
    assert " ".join(setting.help.split()) in out


def test_the_clis_ray_address_resolves_as_the_setting_does(monkeypatch):
    from pytest_super.settings import resolve_setting

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_setting("ray_address", None) == "auto"  # the table's default
    monkeypatch.setenv("RAY_ADDRESS", "env-host:2")
    assert resolve_setting("ray_address", None) == "env-host:2"
    assert resolve_setting("ray_address", "opt-host:3") == "opt-host:3"
    with pytest.raises(SettingError, match="--cpus 'abc': expected a finite number"):
        resolve_setting("cpus", "abc")


DEADLINE_SCRIPT = """\
import json, sys, time
from pathlib import Path
from pytest_super import SuperRun, load_tasks, run_tasks

run = SuperRun.resolve(rootdir=Path(sys.argv[1]), agent="gold")
started = time.monotonic()
results = run_tasks(load_tasks(Path(sys.argv[1]) / "tasks"), run, deadline_s=45)
print(json.dumps({"run_dir": str(run.run_dir), "run_id": run.run_id,
                  "took": time.monotonic() - started,
                  "results": [(r.task.id, r.exit_status.value) for r in results]}))
"""


@pytest.mark.docker
@pytest.mark.slow
def test_a_scripts_task_past_its_deadline_is_recorded_as_a_timeout_and_the_next_runs(
    tmp_path, image, engine
):
    """run_tasks(deadline_s=...) bounds each task with deadlines.enforce, the Ray node's
    mechanism: the 600 s task ends at 45 s (a kernel's start on a loaded machine fits in it),
    recorded as pytest records a timeout; the next task runs."""
    from tests.support.projects import containers, make_project, sleep_then_answer, task_yaml

    make_project(
        tmp_path,
        {
            "expert/a_late": task_yaml("a_late", sleep_then_answer(600)),
            "expert/b_quick": task_yaml("b_quick", sleep_then_answer(0)),
        },
    )
    done = _run([sys.executable, "-c", DEADLINE_SCRIPT, str(tmp_path)], ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["results"] == [["b_quick", "submitted"]], got
    assert got["took"] < 300, got  # not the 600 s sleep
    lines = (Path(got["run_dir"]) / "results.jsonl").read_text().splitlines()
    records = {r["task_id"]: r for r in map(json.loads, lines)}
    assert records["a_late"]["outcome"] == "error", records
    assert records["a_late"]["exit_status"] == "timeout", records
    assert records["b_quick"]["outcome"] == "passed", records
    assert "a_late: its deadline of 45 s passed" in done.stderr
    assert containers(engine, run_id=got["run_id"]) == []
