"""The report folder and the ini file are where pytest finds them (issue 44): pytest takes its
config file and rootdir from the paths named, and pytest-super follows it; when those paths lie
outside the project pytest is started in, the project's config file is read by neither and a
warning says so, with the `-c` that reads it. `SuperRun.resolve` (outside pytest) takes the rootdir
a pytest run in that folder takes. In-process pytester runs, collect-only: no Docker, no task run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_super import options
from pytest_super.settings import SuperRun

TASK = """id: where
query: 'Report x as a json structured as follows: {"x": 0}.'
answer: {x: 1}
solution:
  - execute: |
      print('{"x": 1}')
"""


def _clone_and_elsewhere(pytester: pytest.Pytester) -> tuple[Path, Path]:
    clone = pytester.path / "clone"
    clone.mkdir()
    (clone / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nsuper_report_dir = "myreports"\n'
    )
    elsewhere = pytester.path / "elsewhere" / "expert"  # the folder names the task's set
    elsewhere.mkdir(parents=True)
    (elsewhere / "where.yaml").write_text(TASK)
    return clone, elsewhere / "where.yaml"


RUN = ("--super-agent=gold", "--super-backend=local", "--collect-only", "-p", "no:cacheprovider")


def test_a_path_outside_the_project_says_its_config_file_went_unread(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    clone, task = _clone_and_elsewhere(pytester)
    monkeypatch.chdir(clone)
    result = pytester.runpytest_inprocess(str(task), *RUN)
    out = result.stdout.str()
    assert result.ret == 0, out
    assert f"rootdir: {pytester.path}\n" in out  # pytest's own choice: the common ancestor
    assert "1 test collected" in out, out
    assert f"{clone / 'pyproject.toml'} was not read (by pytest or pytest-super)" in out, out
    assert f"reports go to {pytester.path / 'reports'}." in out, out
    assert f"add `-c {clone / 'pyproject.toml'}`" in out, out


def test_with_the_suggested_c_the_projects_settings_and_report_folder_hold(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    clone, task = _clone_and_elsewhere(pytester)
    monkeypatch.chdir(clone)
    result = pytester.runpytest_inprocess("-c", str(clone / "pyproject.toml"), str(task), *RUN)
    out = result.stdout.str()
    assert result.ret == 0 and "1 test collected" in out, out
    assert f"rootdir: {clone}\n" in out, out
    assert "reports in myreports/" in out, out  # the project's super_report_dir, under it
    assert "was not read" not in out, out


@pytest.mark.parametrize(
    "marker",
    [
        None,  # no config file anywhere: the folder itself
        "pyproject.toml",  # a pyproject.toml without a [tool.pytest] table above: its folder
        "setup.py",  # a setup.py above: its folder
    ],
)
def test_super_run_resolve_takes_the_rootdir_pytest_takes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, marker: str | None
):
    top = pytester.path / "top"
    sub = top / "a" / "b"
    sub.mkdir(parents=True)
    if marker:
        (top / marker).write_text("[project]\nname = 'x'\n" if marker.endswith("toml") else "")
    monkeypatch.chdir(sub)
    config = pytester.parseconfigure("-p", "no:cacheprovider")
    # pytest names a table-less pyproject.toml as its (empty) config file; no other here
    assert config.inipath in (None, top / "pyproject.toml")
    assert config.rootpath == (top if marker else sub)
    pytests = options.run_of(config).report_dir
    assert pytests == config.rootpath / "reports"
    assert SuperRun.resolve(rootdir=sub).report_dir == pytests
