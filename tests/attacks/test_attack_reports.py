"""Round three of attacks on the reports (issue 24): task ids whose page names collide or run past
a file name's 255 bytes, and a run folder whose name is a `javascript:` URL."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

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
