"""Settings are resolved once (options.py): each from its option, else its environment variable,
else its ini key, else its default; a bad value names where it came from; the report header says
what runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_super.options import SETTINGS
from tests.support.toy_providers import install_toy_provider

pytest_plugins = ["pytester"]

TASK = """\
id: t
query: 'Report x as a json structured as follows: {"x": 0}.'
answer: {x: 1}
solution:
  - execute: print('{"x": 1}')
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".yaml", **{"tasks/expert/t": TASK})
    return pytester


def _header(result: pytest.RunResult) -> str:
    return "\n".join(line for line in result.outlines if line.startswith("pytest-super:"))


def test_an_ini_value_is_read_and_the_option_beats_it(project):
    project.makefile(".ini", pytest="[pytest]\nsuper_tasks = tasks\nsuper_image = from-ini:1\n")
    result = project.runpytest_subprocess("--collect-only", "--super-agent=gold")
    assert "image from-ini:1" in _header(result)
    result = project.runpytest_subprocess(
        "--collect-only", "--super-agent=gold", "--super-image=from-option:2"
    )
    assert "image from-option:2" in _header(result)


def test_the_environment_beats_the_ini_and_the_option_beats_both(project, monkeypatch):
    project.makefile(
        ".ini", pytest="[pytest]\nsuper_tasks = tasks\nsuper_ray_address = ini-host:1\n"
    )
    monkeypatch.setenv("RAY_ADDRESS", "env-host:2")
    args = ["--collect-only", "--super-agent=gold", "--super-executor=ray"]
    result = project.runpytest_subprocess(*args)
    assert "executor ray at env-host:2 (environment variable RAY_ADDRESS)" in _header(result)
    result = project.runpytest_subprocess(*args, "--super-ray-address=opt-host:3")
    assert "executor ray at opt-host:3 (--super-ray-address)" in _header(result)
    monkeypatch.delenv("RAY_ADDRESS")
    result = project.runpytest_subprocess(*args)
    assert "executor ray at ini-host:1 (ini super_ray_address (pytest.ini))" in _header(result)


def test_the_old_backend_ray_is_the_ray_executor_with_a_deprecation_warning(project):
    """`--super-backend=ray` (deprecated) runs as `--super-executor=ray` with docker kernels, and
    says once what to write instead; `--super-executor` also comes from the ini."""
    result = project.runpytest_subprocess(
        "--collect-only", "--super-agent=gold", "--super-backend=ray"
    )
    assert "backend docker, executor ray at auto" in _header(result)
    said = result.stdout.str() + result.stderr.str()
    assert said.count("--super-backend=ray is deprecated: use --super-executor=ray") == 1, said
    project.makefile(".ini", pytest="[pytest]\nsuper_tasks = tasks\nsuper_executor = ray\n")
    result = project.runpytest_subprocess("--collect-only", "--super-agent=gold")
    assert "backend docker, executor ray at auto" in _header(result)
    result = project.runpytest_subprocess(
        "--collect-only", "--super-agent=gold", "--super-executor=nowhere"
    )
    assert "unknown executor 'nowhere'; known executors: local, ray" in result.stderr.str()


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("option", "--super-cpus 'abc': expected a finite number of CPUs from 0.01 to 1024"),
        (
            "ini",
            "ini super_cpus (pytest.ini) 'abc': expected a finite number of CPUs from 0.01 to 1024",
        ),
    ],
)
def test_a_bad_value_names_where_it_came_from(project, where, expected):
    ini = "[pytest]\nsuper_tasks = tasks\n" + ("super_cpus = abc\n" if where == "ini" else "")
    project.makefile(".ini", pytest=ini)
    args = ["--super-agent=gold"] + (["--super-cpus=abc"] if where == "option" else [])
    result = project.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{expected}*"])


def test_an_unknown_backend_lists_the_known_ones(project):
    project.makefile(".ini", pytest="[pytest]\nsuper_tasks = tasks\n")
    result = project.runpytest_subprocess("--super-agent=gold", "--super-backend=nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--super-backend 'nope': unknown kernel backend 'nope'*docker*"])


def test_every_valued_setting_but_the_per_invocation_ones_has_an_ini_key():
    without = {s.name for s in SETTINGS if not s.ini and not s.boolean}
    assert without == {"replay"}
    assert {
        "model",
        "base_url",
        "backend",
        "image",
        "report_dir",
        "steps",
        "token_budget",
        "compute_limit",
        "cell_timeout",
    } <= {s.name for s in SETTINGS if s.ini}


def test_the_header_says_what_runs(project):
    project.makefile(".ini", pytest="[pytest]\nsuper_tasks = tasks\n")
    result = project.runpytest_subprocess("--collect-only", "--super-agent=gold")
    header = _header(result)
    assert "agent gold, model -, backend docker" in header
    assert "pytest-super: run " in header and "reports in" in header


TOY_EXECUTOR = """\
from pytest_super.settings import Setting, number_reader
from pytest_super.tasks.model import Bounds


class ToyExecutor:
    remote = True
    settings = (
        Setting(
            "{name}",
            number_reader(Bounds(1, 8, whole=True)),
            2,
            "slots of the toy cluster",
            env=("TOY_SLOTS",),
            metavar="N",
        ),
    )

    @staticmethod
    def describe(run):
        return f"with {{run.executor_settings['{name}']}} slots ({{run.sources['{name}']}})"

    pytest_loop = ""

    def start(self, run):
        pass

    def submit(self, task, run, *, name, deadline_s, on_step=None):
        raise RuntimeError("nothing runs elsewhere in this test")

    def stop(self):
        return []

    def cleanup(self, run):
        pass
"""


def _install_toy_executor(site: Path, setting: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party executor declaring the setting `setting`, an entry point of
    `pytest_super.executors`."""
    source = TOY_EXECUTOR.format(name=setting)
    target = "toy_executor:ToyExecutor"
    install_toy_provider(
        site, monkeypatch, group="pytest_super.executors", target=target, source=source
    )


def test_an_executor_declares_its_own_settings(project, tmp_path, monkeypatch):
    """An executor's `settings` are `--super-*` options and ini keys with an environment
    variable, resolved as the table's are, held in `run.executor_settings`; the header says what
    the executor says of itself (`describe`)."""
    _install_toy_executor(tmp_path / "site", "toy_slots", monkeypatch)
    project.makefile(".ini", pytest="[pytest]\nsuper_tasks = tasks\nsuper_toy_slots = 3\n")
    args = ["--collect-only", "--super-agent=gold", "--super-executor=toy"]
    monkeypatch.setenv("TOY_SLOTS", "5")
    result = project.runpytest_subprocess(*args)
    assert "executor toy with 5 slots (environment variable TOY_SLOTS)" in _header(result)
    monkeypatch.delenv("TOY_SLOTS")
    result = project.runpytest_subprocess(*args, "--super-toy-slots=7")
    assert "executor toy with 7 slots (--super-toy-slots)" in _header(result)
    result = project.runpytest_subprocess(*args)
    assert "executor toy with 3 slots (ini super_toy_slots (pytest.ini))" in _header(result)
    result = project.runpytest_subprocess(*args, "--super-toy-slots=9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--super-toy-slots 9: expected a whole number*"])


def test_an_executor_may_not_take_a_setting_that_is_already_one(project, tmp_path, monkeypatch):
    _install_toy_executor(tmp_path / "site", "mem", monkeypatch)
    result = project.runpytest_subprocess("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*executor 'toy' declares the setting 'mem', which is pytest-super's already*"]
    )
