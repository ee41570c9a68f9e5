"""`pytest-super download` against a local stand-in for the Hugging Face Hub.

The Hub cannot be reached here, so a real HTTP server on 127.0.0.1 serves the two requests
`huggingface_hub.hf_hub_download` makes for a file: `HEAD` and `GET` on
`/datasets/<repo>/resolve/<revision>/<path>`, with the headers the Hub sends (`X-Repo-Commit`,
`ETag`, `Content-Length`; `X-Error-Code` on a 404). The CLI runs in a subprocess with `HF_ENDPOINT`
and `HF_HOME` pointing at the server and a private cache, as a user would run it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_super.download import DEFAULT_REVISION, REPO_ID, SET_FILES

COMMIT = "0123456789abcdef0123456789abcdef01234567"
EXPERT = {
    "task_id": "colbert",
    "github_repo": "https://github.com/stanford-futuredata/ColBERT",
    "git_commit": "852271661b22567e3720f2dd56b6d503613a3228",
    "query": 'Train ColBERT. Report the loss as a json structured as follows: {"loss": 0.0}.',
    "answer": '{"loss": 0.5}',
    "landmarks": ["loss: \\d+"],
    "entrypoint": "",
}
MASKED = {
    **EXPERT,
    "task_id": "colbert_data",
    "pre_execute_cells": ['{"type": "execute", "content": "print(1)"}'],
}
AUTO = {**EXPERT, "task_id": "colbert_auto", "answer": "", "entrypoint": "train.py"}
FILES = {
    SET_FILES["expert"]: json.dumps(EXPERT) + "\n",
    SET_FILES["masked"]: json.dumps(MASKED) + "\n",
    SET_FILES["auto"]: json.dumps(AUTO) + "\n",
}


class FakeHub:
    """Serves FILES of dataset REPO_ID at any revision as commit COMMIT; records each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                hub.requests.append((self.command, self.path))
                prefix = f"/datasets/{REPO_ID}/resolve/"
                revision, _, path = self.path.removeprefix(prefix).partition("/")
                if not self.path.startswith(prefix) or path not in FILES:
                    self._not_found("EntryNotFound")
                    return
                if revision not in (COMMIT, DEFAULT_REVISION):
                    self._not_found("RevisionNotFound")
                    return
                data = FILES[path].encode()
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def _not_found(self, code: str) -> None:
                self.send_response(404)
                self.send_header("X-Error-Code", code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def hub():
    server = FakeHub()
    yield server
    server.stop()


def download(
    endpoint: str, home: Path, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1")
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1"
    return subprocess.run(
        [sys.executable, "-m", "pytest_super.cli", "download", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_downloads_the_three_sets_at_the_pinned_revision(hub, tmp_path):
    out = tmp_path / "tasks"
    done = download(hub.url, tmp_path / "hf", "--out", str(out), "--revision", COMMIT)
    assert done.returncode == 0, done.stderr
    for name, text in FILES.items():
        assert (out / Path(name).name).read_text() == text
    manifest = json.loads((out / "download.json").read_text())
    assert manifest["revision"] == COMMIT
    assert {f["commit"] for f in manifest["files"].values()} == {COMMIT}
    assert f"expert: {out / 'expert.jsonl'} (1 tasks, dataset commit {COMMIT})" in done.stdout
    resolved = sorted({path for _, path in hub.requests})
    assert resolved == sorted(f"/datasets/{REPO_ID}/resolve/{COMMIT}/{n}" for n in FILES)
    # into the Hub's own cache under HF_HOME
    assert list((tmp_path / "hf").rglob("expert.jsonl"))


def test_the_download_names_files_relative_to_the_working_folder(hub, tmp_path):
    """Red before issue 30 item 6: an --out given in full inside the working folder was printed
    in full (`expert: /tmp/.../tasks/expert.jsonl`)."""
    out = tmp_path / "tasks"
    done = download(hub.url, tmp_path / "hf", "--out", str(out), "--revision", COMMIT, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"expert: {Path('tasks') / 'expert.jsonl'} (1 tasks" in done.stdout, done.stdout
    assert "run them: pytest tasks --super-agent" in done.stdout, done.stdout
    assert str(tmp_path) not in done.stdout, done.stdout


def test_a_second_download_at_a_commit_comes_from_the_cache_offline(hub, tmp_path):
    home = tmp_path / "hf"
    assert (
        download(hub.url, home, "--out", str(tmp_path / "a"), "--revision", COMMIT).returncode == 0
    )
    hub.stop()
    done = download(hub.url, home, "--out", str(tmp_path / "b"), "--revision", COMMIT)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "b/masked.jsonl").read_text() == FILES[SET_FILES["masked"]]


def test_downloaded_files_collect_as_tasks(hub, tmp_path):
    out = tmp_path / "tasks"
    assert download(hub.url, tmp_path / "hf", "--out", str(out)).returncode == 0
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(out), "--collect-only", "-q", "-p", "no:randomly"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "expert.jsonl::colbert" in done.stdout, done.stdout + done.stderr
    assert "masked.jsonl::colbert_data" in done.stdout
    assert "auto_gen.jsonl::colbert_auto" in done.stdout


def test_one_set_only(hub, tmp_path):
    out = tmp_path / "tasks"
    assert download(hub.url, tmp_path / "hf", "--out", str(out), "--set", "auto").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["auto_gen.jsonl", "download.json"]


def test_unknown_revision_and_unreachable_hub_are_clear_errors(hub, tmp_path):
    done = download(hub.url, tmp_path / "hf", "--out", str(tmp_path / "t"), "--revision", "f" * 40)
    assert done.returncode == 2
    assert "no such revision; pass --revision with a commit id" in done.stderr
    assert "Traceback" not in done.stderr
    hub.stop()
    done = download(hub.url, tmp_path / "hf2", "--out", str(tmp_path / "t"), "--revision", COMMIT)
    assert done.returncode == 2
    assert "the Hub cannot be reached and the file is not in the Hub's cache" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_huggingface_hub_the_command_names_the_extra(tmp_path):
    hide = (
        "import sys; sys.modules['huggingface_hub'] = None; "  # as if it were not installed
        "from pytest_super.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    out = tmp_path / "tasks"
    done = subprocess.run(
        [sys.executable, "-c", hide, "download", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert 'pip install "pytest-super[download]"' in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()
