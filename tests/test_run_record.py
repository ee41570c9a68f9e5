"""One settings model for pytest and scripts (settings.py), and a run record below pytest
(run_record.py): `SuperRun()` holds a pytest run's defaults, `SuperRun.resolve(rootdir=...)` the
settings a pytest run in that folder holds (sources and errors included), `load_tasks` the tasks
collection finds, and `run_tasks` leaves the run folder a pytest run leaves."""

from __future__ import annotations

import dataclasses
import json
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
    assert theirs["kernel"]["disk_bytes"] == 20 * 2**30 and theirs["ray_address"] == "auto"


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
