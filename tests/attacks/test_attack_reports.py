"""Round three of attacks on the reports (issue 24): task ids whose page names collide or run past
a file name's 255 bytes, and a run folder whose name is a `javascript:` URL."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest
from markupsafe import escape

from pytest_super import html

HOSTILE_IDS = ["a/b", "a+b", "a@b", "a=b", "a_b", "long-" + "x" * 300]


def _run(folder: Path, ids: list[str]) -> Path:
    folder.mkdir(parents=True)
    lines = [
        json.dumps({"task_id": tid, "outcome": "passed", "set": "expert", "accuracy": 1.0})
        for tid in ids
    ]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _hrefs(page: Path) -> list[str]:
    return re.findall(r'href="([^"]*)"', page.read_text())


def test_every_task_gets_its_own_bounded_page_whatever_its_id(tmp_path: Path) -> None:
    """Red on 636b730: `a/b`, `a+b`, `a@b`, `a=b` and `a_b` shared `tasks/a_b.html`, and the long
    id's name failed with "File name too long": no index.html at all."""
    run = _run(tmp_path / "run", HOSTILE_IDS)
    index = html.write_run_report(run)
    pages = {html.page_name(tid) for tid in HOSTILE_IDS}
    assert len(pages) == len(HOSTILE_IDS)
    for page in pages:
        assert len(Path(page).name.encode()) <= 255 and "/" not in page.removeprefix("tasks/")
        assert (run / page).is_file()
    links = [unquote(h) for h in _hrefs(index) if h.startswith("./tasks/")]
    assert sorted(links) == sorted(f"./{p}" for p in pages)
    for tid in HOSTILE_IDS:  # each page is the page of its own task
        assert f"<h1>{escape(tid)}" in (run / html.page_name(tid)).read_text()


def test_a_run_folder_named_like_a_url_is_only_ever_a_relative_link(tmp_path: Path) -> None:
    """Red on 636b730: a run folder `javascript:...` became a clickable `javascript:` link on the
    comparison page. Every link of every page is relative, to a file of the report."""
    evil = _run(tmp_path / "javascript:document.title='PWNED'", ["t1"])
    other = _run(tmp_path / "https:evil.example", ["t1"])
    index = html.write_comparison([evil, other], tmp_path)
    pages = [index, *tmp_path.glob("*/index.html"), *tmp_path.glob("*/tasks/*.html")]
    assert len(pages) == 5
    for page in pages:
        for href in _hrefs(page):
            assert href.startswith(("./", "../", "#")), (page, href)
            assert not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href), (page, href)
    # and they lead where they say: the comparison's links open the runs' own pages
    for href in _hrefs(index):
        if not href.startswith("#"):
            assert (index.parent / unquote(href)).is_file(), href


# -- 3. a read-only or full report folder -----------------------------------------------------------
ANSWER_X1 = """\
id: {id}
query: 'Report x as a json structured as follows: {{"x": 0}}.'
answer: {{x: 1}}
solution:
  - execute: |
      print('{{"x": 1}}')
"""


@pytest.fixture
def small_disk(tmp_path: Path):
    """A filesystem of its own, 1 MiB (tmpfs; the tests run as root, as CI does)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.fail("mounting a small filesystem needs root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _project(pytester: pytest.Pytester, count: int) -> None:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    (pytester.path / "tasks" / "expert").mkdir(parents=True)
    for i in range(count):
        (pytester.path / "tasks" / "expert" / f"t{i}.yaml").write_text(ANSWER_X1.format(id=f"t{i}"))


def test_a_read_only_report_folder_is_a_usage_error_before_any_task(
    pytester: pytest.Pytester, small_disk: Path
) -> None:
    """Red on 636b730: INTERNALERROR before any task."""
    _project(pytester, 1)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    result = pytester.runpytest_subprocess(
        "--super-agent=gold", "--super-backend=local", f"--super-report-dir={small_disk}"
    )
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"cannot write the run's reports in {small_disk}/" in out
    assert "--super-report-dir" in out and "Read-only file system" in out


def test_a_report_folder_that_fills_up_mid_run_ends_the_run_cleanly(
    pytester: pytest.Pytester, small_disk: Path
) -> None:
    """Red on 636b730: INTERNALERROR, results.jsonl empty, no JUnit (on another disk with room),
    and the tasks after the first never ran. Now: said once, every task reported in JUnit, and
    what was written is whole JSON lines."""
    _project(pytester, 4)
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (1024 * 1024 - 16 * 1024))  # about 16 KiB left
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "--super-agent=gold",
        "--super-backend=local",
        f"--super-report-dir={small_disk}",
        f"--junitxml={junit}",
        "-p",
        "no:randomly",
    )
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    cases = re.findall(r'<testcase [^>]*name="(t\d)"', junit.read_text())
    assert sorted(cases) == ["t0", "t1", "t2", "t3"]  # every task ran and was reported
    # each task that could not be recorded is an error of the harness in one sentence (no
    # traceback), and the reports that could not be written are said once
    assert "ReportWriteError: cannot write" in out and "No space left on device; free space" in out
    assert "Traceback" not in out and "OSError" not in out
    assert out.count("were not written") + out.count("could not be written") <= 2
    (run_dir,) = [p for p in small_disk.iterdir() if p.is_dir()]
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        json.loads(line)
