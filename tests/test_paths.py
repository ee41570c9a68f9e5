"""Paths in messages: relative to the working folder inside it, absolute outside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_super.paths import shown_path


def test_a_path_inside_the_working_folder_is_shown_relative(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "reports" / "run-1" / "task.ipynb"
    assert shown_path(target) == os.path.join("reports", "run-1", "task.ipynb")
    assert shown_path(str(target)) == os.path.join("reports", "run-1", "task.ipynb")
    assert shown_path(tmp_path) == "."


def test_a_path_outside_the_working_folder_is_shown_absolute(tmp_path, monkeypatch) -> None:
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert shown_path(tmp_path / "elsewhere" / "x.json") == str(tmp_path / "elsewhere" / "x.json")
    # a sibling whose name starts with the working folder's is not inside it
    assert shown_path(tmp_path / "here-too" / "x") == str(tmp_path / "here-too" / "x")
    assert shown_path(tmp_path / "here" / ".." / "up.txt") == str(tmp_path / "up.txt")


def test_a_relative_path_is_taken_against_the_working_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert shown_path(Path("out") / "run" / ".." / "run" / "a.md") == os.path.join(
        "out", "run", "a.md"
    )
    assert shown_path("../x") == str(tmp_path.parent / "x")


def test_a_working_folder_reached_through_a_symlink(tmp_path, monkeypatch) -> None:
    """os.getcwd() names the real folder; a path through the link is still inside it."""
    real = tmp_path / "real"
    (real / "reports").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.chdir(link)
    assert shown_path(link / "reports" / "s.md") == os.path.join("reports", "s.md")
    assert shown_path(real / "reports" / "s.md") == os.path.join("reports", "s.md")


def test_a_removed_working_folder_leaves_paths_absolute(tmp_path, monkeypatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert shown_path(tmp_path / "a" / "b") == str(tmp_path / "a" / "b")


@pytest.mark.parametrize("name", ["results.jsonl", "sub/dir/file.txt"])
def test_shown_paths_name_the_same_file(tmp_path, monkeypatch, name) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / name
    assert (tmp_path / shown_path(target)).resolve() == target.resolve()
