"""Round five of attacks (issue 41), causes 5, 6 and 8: outbound HTTP without a total deadline,
size cap or redirect limit; passwords of a mirror's URL in errors; text shown raw or that cannot
be encoded (the terminal, JUnit XML, the HTML report).

Each against real parts: a real server on 127.0.0.1 (a trickling one, a redirect loop, a stand-in
for raw.githubusercontent.com and for the Hub), `pytest-super` and pytest in processes of their
own, as a user runs them. Deadlines are cut to seconds by setting the module's constant in the
process before the CLI runs (`_cli`); everything else is as shipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_super import html
from pytest_super.download import REPO_ID
from pytest_super.http_policy import MAX_REDIRECTS
from pytest_super.prompts import PARTS, ours
from pytest_super.reference_files import PROMPT_FILE, PROMPTS_COMMIT, PROMPTS_REPO
from tests.support.openai_server import TrickleServer

USER, PASSWORD = "mirror-user", "m1rr0r-Passw0rd-7731"
#: what must not be printed: the password, and the user with it
SECRETS = (PASSWORD, f"{USER}:{PASSWORD}")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "SUPER_PROMPTS"))}
    env.update(NO_PROXY="127.0.0.1", no_proxy="127.0.0.1", HF_HUB_DISABLE_TELEMETRY="1", **extra)
    return env


def _cli(
    args: list[str], env: dict[str, str], patch: dict[str, float] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`pytest-super ARGS` in a process of its own, with `patch` set first on the module that
    holds each name, pytest_super.download or (the prompts' download) reference_files (a deadline
    cut to seconds, a cap cut to a MiB)."""
    code = (
        "import sys\nimport pytest_super.download as d\nimport pytest_super.reference_files as r\n"
    )
    code += "".join(
        f"setattr(r if hasattr(r, {name!r}) else d, {name!r}, {value!r})\n"
        for name, value in (patch or {}).items()
    )
    code += "from pytest_super.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


class Server:
    """A threaded HTTP server on 127.0.0.1 whose GET and HEAD answers `answer(handler)` gives;
    `requests` records each (method, path)."""

    def __init__(self, answer) -> None:  # type: ignore[no-untyped-def]
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append(("GET", self.path))
                with contextlib.suppress(OSError):
                    answer(self)

            do_HEAD = do_GET

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@contextlib.contextmanager
def serving(answer) -> Iterator[Server]:  # type: ignore[no-untyped-def]
    server = Server(answer)
    try:
        yield server
    finally:
        server.stop()


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes = b"", **headers: str) -> None:
    handler.send_response(status)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


# == cause 5: one HTTP policy: a total deadline, a size cap, a redirect limit =====================
#: a status line, then a header one byte every 20 s (the issue's mirror); then a body that does
HEADERS_TRICKLE = (b"HTTP/1.1 200 OK\r\n", b"X-Slow: " + b"a" * 10_000)
BODY_TRICKLE = (b"HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n", b"x" * 10_000)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("trickle", [HEADERS_TRICKLE, BODY_TRICKLE], ids=["headers", "body"])
def test_download_prompts_ends_by_its_total_deadline(trickle, tmp_path) -> None:
    """Red before: httpx's 60 s bounded each read; a byte every 20 s never timed out (the process
    was still running when the 45 s the test gives it were over)."""
    server = TrickleServer(*trickle, interval=20)
    try:
        done = _cli(
            ["download", "prompts", "--out", str(tmp_path / "p")],
            _env(SUPER_PROMPTS_BASE_URL=f"http://127.0.0.1:{server.port}"),
            {"PROMPT_FILE_DEADLINE_S": 2.0},
            timeout=45,
        )
    finally:
        server.stop()
    line = _one_line_error(done)
    assert "no complete answer within the total deadline of 2 s" in line, line
    assert not (tmp_path / "p").exists()


def _hub_file(data: bytes, trickle: str = ""):  # type: ignore[no-untyped-def]
    """A stand-in for the Hub serving `data` as any file of REPO_ID: its headers (HEAD and GET)
    trickle a byte a second with `trickle="headers"`, its body with `trickle="body"`."""
    etag = f'"{hashlib.sha1(data).hexdigest()}"'

    def answer(handler: BaseHTTPRequestHandler) -> None:
        if not handler.path.startswith(f"/datasets/{REPO_ID}/resolve/"):
            _send(handler, 404, X_Error_Code="EntryNotFound")
            return
        if trickle == "headers":
            handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for byte in b"X-Slow: " + b"a" * 10_000:
                time.sleep(1)
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
        handler.send_response(200)
        handler.send_header("X-Repo-Commit", "0" * 40)
        handler.send_header("ETag", etag)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command == "HEAD":
            return
        if trickle == "body":
            for i in range(len(data)):
                time.sleep(1)
                handler.wfile.write(data[i : i + 1])
                handler.wfile.flush()
        else:
            handler.wfile.write(data)

    return answer


def _download_tasks(server: Server, tmp_path: Path, patch: dict[str, float], **env: str):  # type: ignore[no-untyped-def]
    return _cli(
        ["download", "--set", "expert", "--out", str(tmp_path / "tasks")],
        _env(HF_ENDPOINT=server.url, HF_HOME=str(tmp_path / "hf"), **env),
        patch,
        timeout=45,
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("trickle", ["headers", "body"])
def test_download_of_tasks_ends_by_its_total_deadline(trickle, tmp_path) -> None:
    """Red before: the Hub's client bounds each read by 10 s; a byte a second never timed out
    (still running after 45 s)."""
    with serving(_hub_file(b'{"task_id": "t"}\n' * 1000, trickle)) as server:
        done = _download_tasks(server, tmp_path, {"TASK_FILE_DEADLINE_S": 3.0})
    line = _one_line_error(done)
    assert "datasets/allenai/super (tasks/expert.jsonl" in line, line
    if trickle == "body":  # the Hub's client says the metadata request's timeout its own way
        assert "total deadline of 3 s" in line, line
    assert not (tmp_path / "tasks" / "expert.jsonl").exists()


@pytest.mark.timeout(120)
def test_download_of_tasks_is_cut_at_its_size_cap(tmp_path) -> None:
    """Red before: no cap; a 4 MiB answer (as well a 4 GiB one) was written whole, exit 0."""
    with serving(_hub_file(b"x" * (4 * 2**20))) as server:
        done = _download_tasks(server, tmp_path, {"TASK_FILE_MAX_BYTES": 2**20})
    line = _one_line_error(done)
    assert "more than 1,048,576 bytes arrived" in line, line
    assert not (tmp_path / "tasks" / "expert.jsonl").exists()


@pytest.mark.timeout(120)
def test_download_of_tasks_does_not_wait_past_its_deadline_when_asked_to(tmp_path) -> None:
    """Red before: the Hub's client slept as long as a 503's `Retry-After` said (a day here;
    still sleeping after 45 s)."""

    def busy(handler: BaseHTTPRequestHandler) -> None:
        _send(handler, 503, Retry_After="86400")

    with serving(busy) as server:
        done = _download_tasks(server, tmp_path, {"TASK_FILE_DEADLINE_S": 3.0})
    line = _one_line_error(done)
    assert "HTTP 503 asks to wait 86400 s, past the total deadline of 3 s" in line, line
    assert len(server.requests) == 1, server.requests


@pytest.mark.timeout(120)
def test_download_of_tasks_follows_few_redirects(tmp_path) -> None:
    """Red before: a redirect loop was followed 20 times (the Hub client's own bound)."""

    def loop(handler: BaseHTTPRequestHandler) -> None:
        _send(handler, 302, Location=f"/datasets/{REPO_ID}/resolve/main/hop{len(server.requests)}")

    with serving(loop) as server:
        done = _download_tasks(server, tmp_path, {"TASK_FILE_DEADLINE_S": 20.0})
    _one_line_error(done)
    assert len(server.requests) <= MAX_REDIRECTS + 1, server.requests


@pytest.mark.timeout(120)
def test_download_prompts_follows_few_redirects(tmp_path) -> None:
    """Red before: httpx's default, 20 redirects of a loop were followed (21 requests)."""

    def loop(handler: BaseHTTPRequestHandler) -> None:
        _send(handler, 302, Location=f"/hop{len(server.requests)}")

    with serving(loop) as server:
        done = _cli(
            ["download", "prompts", "--out", str(tmp_path / "p")],
            _env(SUPER_PROMPTS_BASE_URL=server.url),
        )
    line = _one_line_error(done)
    assert "TooManyRedirects" in line, line
    assert len(server.requests) == MAX_REDIRECTS + 1, server.requests


# == cause 6: passwords in a mirror's URL are never printed ========================================
def _raw(mode: str):  # type: ignore[no-untyped-def]
    """A stand-in for raw.githubusercontent.com answering 404, 500, or a file that is not the
    reference's (its sha256 differs)."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        if mode == "wrong file" and handler.path.startswith(f"/{PROMPTS_REPO}/{PROMPTS_COMMIT}/"):
            _send(handler, 200, b"system_prompt: not the reference's\n")
        else:
            _send(handler, int(mode.split()[0]) if mode[0].isdigit() else 404)

    return answer


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@")


def _printed(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["404", "500", "wrong file", "refused", "timeout"])
def test_a_password_in_the_prompts_mirror_url_is_never_printed(mode, tmp_path) -> None:
    """Red before (404, 500, wrong file): each error named the URL with `user:password@`."""
    patch = {"PROMPT_FILE_DEADLINE_S": 2.0}
    if mode == "timeout":
        trickle = TrickleServer(*HEADERS_TRICKLE, interval=1)
        base, stop = f"http://127.0.0.1:{trickle.port}", trickle.stop
    else:
        server = Server(_raw(mode))
        base, stop = server.url, server.stop
    if mode == "refused":
        stop()
    try:
        done = _cli(
            ["download", "prompts", "--out", str(tmp_path / "p")],
            _env(SUPER_PROMPTS_BASE_URL=_with_password(base)),
            patch,
        )
    finally:
        if mode != "refused":
            stop()
    line = _one_line_error(done)
    assert f"http://***@127.0.0.1:{base.rpartition(':')[2]}/{PROMPTS_REPO}" in line, line
    assert not any(secret in _printed(done) for secret in SECRETS), _printed(done)
    if mode == "wrong file":
        assert "not the pinned" in line and PROMPT_FILE in line, line
    if mode == "404":
        assert f"{PROMPT_FILE}: HTTP 404" in line, line


@pytest.mark.timeout(120)
@pytest.mark.parametrize("status", [404, 500])
def test_a_password_in_hf_endpoint_is_never_printed(status, tmp_path) -> None:
    """Red before: the Hub's URL was shown as HF_ENDPOINT holds it, password and all (and a 500
    quoted it once more in the Hub client's own message)."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        _send(handler, status, b"broken", X_Error_Code="EntryNotFound" if status == 404 else "")

    with serving(answer) as server:
        done = _cli(
            ["download", "--set", "expert", "--out", str(tmp_path / "tasks")],
            _env(HF_ENDPOINT=_with_password(server.url), HF_HOME=str(tmp_path / "hf")),
        )
    line = _one_line_error(done)
    assert "http://***@127.0.0.1" in line, line
    assert not any(secret in _printed(done) for secret in SECRETS), _printed(done)


@pytest.mark.timeout(300)
def test_a_password_in_the_docker_host_is_never_printed_nor_written(tmp_path) -> None:
    """Red before: the report header and the engine's error (twice: ours and docker's own
    "Invalid bind address format") showed `tcp://user:password@...`."""
    (tmp_path / "tasks" / "expert").mkdir(parents=True)
    (tmp_path / "pytest.ini").write_text("[pytest]\nsuper_tasks = tasks\n")
    (tmp_path / "tasks" / "expert" / "adder.yaml").write_text(TASK.format(id="adder"))
    done = _pytest(
        tmp_path,
        "tasks",
        "--super-agent=gold",
        f"--super-docker-host=tcp://{USER}:{PASSWORD}@127.0.0.1:9",
        f"--junitxml={tmp_path / 'junit.xml'}",
    )
    out = (done.stdout + done.stderr).decode("utf-8", "replace")
    assert "no Docker engine answers at tcp://***@127.0.0.1:9" in out, out
    assert "backend docker at tcp://***@127.0.0.1:9" in out, out
    assert not any(secret in out for secret in SECRETS), out
    written = [
        p for p in tmp_path.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()
    ]
    assert written == [], written  # results.jsonl, JUnit, the reports


# == cause 8: every sink gets text it can show ==================================================
TASK = """\
id: {id}
set: expert
repository:
  url: https://github.com/super-demo/adder
  commit: c886a976fe5948d0abf401f28ffad8ab3b2eb194
query: |-
  Add 2 and 3. Report it as a json structured as follows: {{"sum": 0}}.
answer:
  sum: 5
"""
#: a terminal's OSC (set the window title) and CSI (clear the screen) sequences, a forged line
OSC, CSI = "\x1b]0;pwned\x07", "\x1b[2J"


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=root,
        env=env,
        capture_output=True,
        timeout=300,
    )


def _prompts_folder(parent: Path, name: str) -> Path:
    folder = parent / name
    folder.mkdir()
    for part in PARTS.values():
        (folder / part.file).write_text(ours().templates[part.file.removesuffix(".txt")])
    return folder


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "option",
    ["prompts folder", "model", "image", "report folder"],
)
def test_user_named_things_reach_the_report_header_escaped(option, tmp_path) -> None:
    """Red before: the header printed the name raw; the OSC and CSI sequences reached the
    terminal and acted there."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\nsuper_tasks = tasks\n")
    hostile = f"x{OSC}{CSI}\nforged: line"
    args = ["tasks", "--collect-only", "--super-agent=gold", "--super-backend=local"]
    if option == "prompts folder":
        args.append(f"--super-prompts={_prompts_folder(tmp_path, hostile)}")
    elif option == "model":
        args.append(f"--super-model={hostile}")
    elif option == "report folder":
        args.append(f"--super-report-dir={tmp_path / hostile}")
    else:
        args.append(f"--super-image={hostile}")
    done = _pytest(tmp_path, *args)
    out = done.stdout.decode("utf-8", "replace")
    header = [line for line in out.splitlines() if line.startswith("pytest-super:")]
    assert header, out + done.stderr.decode()
    assert "\x1b" not in out and "\x07" not in out, out
    assert not any(line.startswith("forged") for line in out.splitlines()), out
    assert any("x\\x1b]0;pwned\\x07\\x1b[2J\\x0aforged: line" in line for line in header), header


@pytest.mark.timeout(300)
def test_junit_stays_well_formed_whatever_the_task_files_are_named(tmp_path) -> None:
    """Red before: a task file named with a control character made junit.xml not well-formed
    (`not well-formed (invalid token)` from the parser): a dashboard loses the whole run."""
    expert = tmp_path / "tasks" / "expert"
    expert.mkdir(parents=True)
    (tmp_path / "pytest.ini").write_text("[pytest]\nsuper_tasks = tasks\n")
    (expert / "ok.yaml").write_text(TASK.format(id="ok"))
    (expert / "bell\x07name.yaml").write_text(TASK.format(id="bell"))
    (expert / "esc\x1b[2Jname.yaml").write_text(TASK.format(id="esc"))
    (expert / "broken\x01.yaml").write_text("id: [unclosed\n")  # a collection error
    junit = tmp_path / "junit.xml"
    done = _pytest(tmp_path, "tasks", f"--junitxml={junit}", "--continue-on-collection-errors")
    out = done.stdout.decode("utf-8", "replace")
    tree = ET.parse(junit)  # raises ParseError when not well-formed
    cases = tree.getroot().iter("testcase")
    shown = {c.get("classname", "") + "::" + c.get("name", "") for c in cases}
    assert any("bell#x07name" in s for s in shown), (shown, out)
    assert any("esc#x1B[2Jname" in s for s in shown), shown
    assert any("broken#x01" in s for s in shown), shown
    assert any(s.endswith("::ok") for s in shown), shown


def _run_with_a_lone_surrogate(root: Path) -> Path:
    """A run folder whose model reply (a step's thought and the submitted answer) holds a lone
    surrogate, as JSON carries it (`\\ud800`)."""
    run = root / "reports" / "run-surrogate"
    (run / "trajectories").mkdir(parents=True)
    (run / "trajectories" / "t.json").write_text(
        '{"task_id": "t", "query": "Add.", "agent": "react", "info": {"submission": '
        '{"sum": "\\ud800"}}, "steps": [{"thought": "lone \\ud800 here", "action": "execute", '
        '"content": "print(1)", "observation": "1 \\udfff"}]}'
    )
    (run / "results.jsonl").write_text(
        json.dumps(
            {
                "task_id": "t\ud800",
                "outcome": "failed",
                "set": "expert",
                "accuracy": 0.0,
                "trajectory": "trajectories/t.ipynb",
            }
        )
        + "\n"
    )
    return run


@pytest.mark.timeout(120)
def test_a_lone_surrogate_in_a_model_reply_still_gives_the_html_report(tmp_path) -> None:
    """Red before: `pytest-super html` failed with UnicodeEncodeError ('surrogates not allowed')
    and index.html was never written."""
    run = _run_with_a_lone_surrogate(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_super.cli", "html", str(run)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    index = (run / "index.html").read_text(encoding="utf-8")
    assert "\ufffd" in index
    page = (run / html.page_name("t\ud800")).read_text(encoding="utf-8")
    assert "lone \ufffd here" in page, page[:2000]
    compared = html.write_comparison([run, run], tmp_path / "cmp")
    assert "\ufffd" in compared.read_text(encoding="utf-8")
