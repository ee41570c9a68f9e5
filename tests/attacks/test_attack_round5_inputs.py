"""Round five of attacks (issue 41, causes 2, 3, 4 and 9): files we did not write, read by the
readers the last round added; replays that one bad episode ended; tracebacks instead of one line.

Every reader of such a file goes through `pytest_super.safe_read`: a FIFO, a folder, a 1.5 GiB
file (sparse: it takes no disk), JSON nested 100,000 deep or a value of the wrong shape is a named
error of that file (or episode) alone, and the rest is read. Commands run in subprocesses with a
timeout, and in-process readers under a pytest-timeout, so a hang is a failure, not a stuck suite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_super.errors import TaskFileError
from pytest_super.tasks import load_tasks
from tests.support.projects import PASS, make_project, run_pytest, task_yaml

#: a file larger than any reader's cap, made sparse (no block written)
HUGE_BYTES = 1536 * 1024 * 1024


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _huge(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.truncate(HUGE_BYTES)
    return path


# -- cause 2: load_tasks and collection --------------------------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["a.yaml", "a.jsonl"])
@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_load_tasks_names_a_fifo_or_a_huge_task_file_given_directly(
    tmp_path: Path, name: str, kind: str
) -> None:
    """Before: a FIFO blocked forever (the timeout failed it), 1.5 GiB was a bare MemoryError or
    read whole."""
    path = (_fifo if kind == "fifo" else _huge)(tmp_path / name)
    with pytest.raises(TaskFileError) as error:
        load_tasks(path, set_name="expert")
    expected = "a FIFO" if kind == "fifo" else "larger than the"
    assert str(path) in str(error.value) and expected in str(error.value), str(error.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["a.yaml", "a.jsonl"])
def test_load_tasks_of_a_folder_names_its_fifo(tmp_path: Path, name: str) -> None:
    make_project(tmp_path, {"expert/good": task_yaml("good", PASS)})
    fifo = _fifo(tmp_path / "tasks" / "expert" / name)
    with pytest.raises(TaskFileError, match="a FIFO") as error:
        load_tasks(tmp_path / "tasks")
    assert str(fifo) in str(error.value)


def test_collection_names_fifos_and_huge_task_files_and_collects_the_rest(tmp_path: Path) -> None:
    """Before: the FIFOs were left out without a word, and the 1.5 GiB JSONL file was read whole
    (a peak of 1.6 GB) before it failed as JSON."""
    project = make_project(tmp_path / "p", {"expert/good": task_yaml("good", PASS)})
    tasks = project / "tasks"
    bad = [
        _fifo(tasks / "expert" / "fifo.yaml"),
        _fifo(tasks / "masked.jsonl"),
        _huge(tasks / "expert.jsonl"),
        _huge(tasks / "expert" / "huge.yaml"),
    ]
    code, out = run_pytest(project, "--collect-only", "-q", "-p", "no:cacheprovider", timeout=120)
    assert "tasks/expert/good.yaml::good" in out, out
    assert "4 errors" in out, out
    for path in bad:
        assert f"{path.relative_to(project)}" in out, out
    assert out.count("a FIFO") >= 2 and out.count("larger than the") >= 2, out
    assert "INTERNALERROR" not in out and "MemoryError" not in out, out
    assert code == 2, out
