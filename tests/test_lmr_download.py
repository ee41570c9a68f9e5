"""`pytest-super download lmr-bench` against a stand-in for codeload.github.com on 127.0.0.1
(issue 46, item 1): a tarball built here in upstream's layout (one top folder, `benchmark/` with
a task folder, `results/`, a Git LFS pointer, an executable), served as GitHub serves the tarball
of a commit. The CLI runs in this process, as a user runs it, with `LMR_BENCH_BASE_URL` naming the
stand-in. The pinned digest is the real tree's; tests of a good download pin the stand-in tree's
digest, computed here from the files the test wrote (the rule of docs/lmr-bench.md)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import socket
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_super import lmr_download, load_tasks
from pytest_super.cli import main as cli_main
from tests.support.openai_server import TrickleServer

DEMO = Path(__file__).resolve().parents[1] / "tasks" / "lmr" / "01-NgramMetrics"
TOP = f"LMR-Bench-{lmr_download.LMR_COMMIT}"
ARCHIVE_PATH = f"/shuoYan97/LMR-Bench/tar.gz/{lmr_download.LMR_COMMIT}"
PASSWORD = "m1rr0r-S3cret-4411"
TENSOR = b"\x80\x02tensor bytes"
LFS_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    f"oid sha256:{hashlib.sha256(TENSOR).hexdigest()}\nsize {len(TENSOR)}\n"
).encode()


def upstream_files() -> dict[str, tuple[bytes, bool]]:
    """A small tree in upstream's layout: path -> (content, executable)."""
    files = {
        "README.md": (b"# LMR-Bench\nMIT license. Check `LICENSE.md`.\n", False),
        "results/unit_test_evaluation/OpenHands/gpt4o/results.txt": (
            b"01-NgramMetrics/unit_test/unit_test_1.py: PASS\n",
            False,
        ),
        "scripts/run.sh": (b"#!/bin/sh\necho run\n", True),
        "benchmark/01-NgramMetrics/ngram-lm/unit_test/inputs.pt": (LFS_POINTER, False),
    }
    for path in sorted(DEMO.rglob("*")):
        if path.is_file():
            rel = f"benchmark/01-NgramMetrics/{path.relative_to(DEMO).as_posix()}"
            files[rel] = (path.read_bytes(), False)
    return files


def digest_of(files: dict[str, tuple[bytes, bool]]) -> str:
    """The tree digest by the documented rule: `<path> <x|-> <git blob id>` a line, in path
    order, as `git ls-tree -r` lists a commit (`git hash-object` of each file)."""
    lines = []
    for path, (content, executable) in sorted(files.items()):
        blob = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
        lines.append(f"{path} {'x' if executable else '-'} {blob}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def tarball(
    files: dict[str, tuple[bytes, bool]], extra: list[tarfile.TarInfo] | None = None
) -> bytes:
    """`files` under TOP as `git archive` writes them (folders first), then `extra` members."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.pax_headers = {"comment": lmr_download.LMR_COMMIT}  # git archive's global header
        folder = tarfile.TarInfo(TOP + "/")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o775
        tar.addfile(folder)
        for path, (content, executable) in files.items():
            info = tarfile.TarInfo(f"{TOP}/{path}")
            info.size, info.mode = len(content), 0o775 if executable else 0o664
            tar.addfile(info, io.BytesIO(content))
        for member in extra or []:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isreg() else None)
    return buffer.getvalue()


class Codeload:
    """Serves `body` at ARCHIVE_PATH (404 elsewhere) on 127.0.0.1; records each path."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.paths: list[str] = []
        served = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                served.paths.append(self.path)
                found = self.path == ARCHIVE_PATH
                body = served.body if found else b"Not Found"
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/x-gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@contextlib.contextmanager
def codeload(body: bytes, monkeypatch: pytest.MonkeyPatch) -> Iterator[Codeload]:
    server = Codeload(body)
    monkeypatch.setenv(lmr_download.BASE_URL_ENV, server.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    try:
        yield server
    finally:
        server.stop()


def _error(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    assert cli_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def _nothing_left(parent: Path, out: Path) -> None:
    assert not out.exists()
    assert [p.name for p in parent.iterdir() if p.name.startswith(f".{out.name}")] == []


def test_downloads_the_tree_at_the_pinned_commit_with_its_license(tmp_path, monkeypatch, capsys):
    files = upstream_files()
    monkeypatch.setattr(lmr_download, "LMR_TREE_DIGEST", digest_of(files))
    out = tmp_path / "lmr-bench"
    with codeload(tarball(files), monkeypatch) as server:
        assert cli_main(["download", "lmr-bench", "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert server.paths == [ARCHIVE_PATH]  # the commit's full hash
        # a second download finds it there and fetches nothing
        assert cli_main(["download", "lmr-bench", "--out", str(out)]) == 0
        assert server.paths == [ARCHIVE_PATH]
    assert f"{len(files)} files at commit {lmr_download.LMR_COMMIT}" in printed, printed
    for path, (content, executable) in files.items():
        assert (out / path).read_bytes() == content, path
        assert bool((out / path).stat().st_mode & 0o100) == executable, path
    license_text = (out / "LICENSE.md").read_text()
    assert "MIT License" in license_text and "shuoYan97/LMR-Bench" in license_text
    manifest = json.loads((out / "download.json").read_text())
    assert manifest["commit"] == lmr_download.LMR_COMMIT
    assert (manifest["files"], manifest["lfs_pointers"]) == (len(files), 1)
    assert manifest["tree_digest"] == digest_of(files)
    # the downloaded tree loads as LMR-Bench tasks
    tasks = load_tasks(out / "benchmark" / "01-NgramMetrics")
    assert [t.id for t in tasks] == ["01-NgramMetrics/1", "01-NgramMetrics/2"]


def test_a_tree_of_another_digest_is_refused_and_nothing_is_kept(tmp_path, monkeypatch, capsys):
    files = upstream_files()
    files["benchmark/01-NgramMetrics/info.json"] = (b'{"changed": true}', False)
    out = tmp_path / "lmr-bench"
    with codeload(tarball(files), monkeypatch):
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
    assert f"the tree's digest is {digest_of(files)}, not the pinned" in err, err
    assert lmr_download.LMR_TREE_DIGEST in err and "nothing was kept" in err, err
    _nothing_left(tmp_path, out)


def _member(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = ""):
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size, link
    return info


HOSTILE = {
    "symlink": ([_member(f"{TOP}/evil", tarfile.SYMTYPE, link="/etc")], "'/etc' is a link"),
    "hardlink": (
        [_member(f"{TOP}/hard", tarfile.LNKTYPE, link=f"{TOP}/README.md")],
        "is a link; refused",
    ),
    "dotdot": ([_member(f"{TOP}/../../evil.txt", size=3)], "points outside the tree"),
    "absolute": ([_member("/tmp/evil.txt", size=3)], "points outside the tree"),
    "second top": ([_member("other/evil.txt", size=3)], "is not under the archive's top folder"),
    "twice": ([_member(f"{TOP}/README.md", size=3)], "comes twice; refused"),
    "fifo": ([_member(f"{TOP}/pipe", tarfile.FIFOTYPE)], "is not a file or folder; refused"),
    "big file": ([_member(f"{TOP}/big.bin", size=4096)], "more than 2,048; refused"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_archive_is_refused_naming_the_member(case, tmp_path, monkeypatch, capsys):
    extra, expected = HOSTILE[case]
    files = upstream_files()
    monkeypatch.setattr(lmr_download, "LMR_TREE_DIGEST", digest_of(files))
    monkeypatch.setattr(lmr_download, "MAX_FILE_BYTES", 2048)
    out = tmp_path / "deep" / "lmr-bench"
    with codeload(tarball(files, extra), monkeypatch):
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
    assert expected in err, err
    _nothing_left(out.parent, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep"]  # nothing written outside


def test_too_many_members_a_too_big_tree_and_garbage_are_refused(tmp_path, monkeypatch, capsys):
    files = upstream_files()
    out = tmp_path / "lmr-bench"
    with codeload(tarball(files), monkeypatch) as server:
        monkeypatch.setattr(lmr_download, "MAX_MEMBERS", 5)
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
        assert "more than 5 members; refused" in err, err
        monkeypatch.setattr(lmr_download, "MAX_MEMBERS", 100)
        monkeypatch.setattr(lmr_download, "MAX_TREE_BYTES", 4000)
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
        assert "the tree is more than 4,000 bytes; refused" in err, err
        server.body = b"<html>a login page, not a tarball</html>"
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
        assert "not an archive this download can unpack" in err, err
    _nothing_left(tmp_path, out)


def test_an_archive_past_its_size_cap_is_cut(tmp_path, monkeypatch, capsys):
    out = tmp_path / "lmr-bench"
    monkeypatch.setattr(lmr_download, "MAX_ARCHIVE_BYTES", 1000)
    with codeload(tarball(upstream_files()), monkeypatch):
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
    assert "more than 1,000 bytes; not the archive" in err, err
    _nothing_left(tmp_path, out)


def test_a_server_down_a_404_and_a_bad_base_url_name_the_url_without_its_password(
    tmp_path, monkeypatch, capsys
):
    out = tmp_path / "lmr-bench"
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv(lmr_download.BASE_URL_ENV, f"http://user:{PASSWORD}@127.0.0.1:{port}")
    err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
    assert "cannot be fetched (ConnectError" in err and "LMR_BENCH_BASE_URL" in err, err
    assert PASSWORD not in err and f"127.0.0.1:{port}{ARCHIVE_PATH}" in err, err
    with codeload(b"", monkeypatch) as server:
        monkeypatch.setenv(lmr_download.BASE_URL_ENV, server.url.replace("//", "//u:x@") + "/m")
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
    assert f"/m{ARCHIVE_PATH}: HTTP 404; check LMR_BENCH_BASE_URL" in err, err
    monkeypatch.setenv(lmr_download.BASE_URL_ENV, "ftp://mirror")
    err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
    assert "LMR_BENCH_BASE_URL 'ftp://mirror': not an http(s) URL" in err, err
    _nothing_left(tmp_path, out)


@pytest.mark.timeout(60)
def test_a_trickling_server_is_cut_at_the_total_deadline(tmp_path, monkeypatch, capsys):
    server = TrickleServer(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n", b"x" * 10_000, interval=0.5
    )
    monkeypatch.setenv(lmr_download.BASE_URL_ENV, f"http://127.0.0.1:{server.port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setattr(lmr_download, "ARCHIVE_DEADLINE_S", 2.0)
    out = tmp_path / "lmr-bench"
    try:
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
    finally:
        server.stop()
    assert "no complete answer within the total deadline of 2 s" in err, err
    _nothing_left(tmp_path, out)


def test_an_existing_folder_is_never_overwritten(tmp_path, monkeypatch, capsys):
    out = tmp_path / "lmr-bench"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with codeload(tarball(upstream_files()), monkeypatch) as server:
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
        assert server.paths == []
    assert "exists and is not this download" in err, err
    assert (out / "mine.txt").read_text() == "keep me"


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    ).stdout


def test_the_digest_is_what_git_lists_for_the_commit_and_an_lfs_object_counts_as_its_pointer(
    tmp_path,
):
    """The pin is recomputed from `git ls-tree -r -z <commit>` (docs/lmr-bench.md): a real
    repository's `git archive`, unpacked as a download is, gives the digest of its listing; a
    mirror serving an LFS object where the commit holds its pointer gives the same."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    for path, (content, executable) in upstream_files().items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(content)
        (repo / path).chmod(0o755 if executable else 0o644)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "tree")
    listed = {}
    for entry in _git(repo, "ls-tree", "-r", "-z", "HEAD").split(b"\0"):
        if entry:
            meta, path = entry.decode().split("\t", 1)
            mode, _, blob = meta.split()
            listed[path] = f"{path} {'x' if mode == '100755' else '-'} {blob}\n"
    from_git = hashlib.sha256("".join(listed[p] for p in sorted(listed)).encode()).hexdigest()
    archive = tmp_path / "tree.tar.gz"
    archive.write_bytes(_git(repo, "archive", "--format=tar.gz", f"--prefix={TOP}/", "HEAD"))
    hashes = lmr_download.extract(archive, tmp_path / "out", shown="git archive")
    assert lmr_download.tree_digest(hashes) == from_git == digest_of(upstream_files())
    # the object itself where the commit holds the pointer
    served = upstream_files()
    served["benchmark/01-NgramMetrics/ngram-lm/unit_test/inputs.pt"] = (TENSOR, False)
    (tmp_path / "served.tar.gz").write_bytes(tarball(served))
    hashes = lmr_download.extract(tmp_path / "served.tar.gz", tmp_path / "out2", shown="mirror")
    assert lmr_download.tree_digest(hashes) == from_git


def test_a_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("not a folder")
    out = tmp_path / "a-file" / "lmr-bench"
    with codeload(tarball(upstream_files()), monkeypatch):
        err = _error(capsys, ["download", "lmr-bench", "--out", str(out)])
    assert f"{out}: the download could not be written" in err and "nothing was kept" in err, err
