"""Round three of attacks from the model endpoint (issue 24, items 9-11): a 100 MB answer, a gzip
bomb, lone surrogates, and an endpoint that echoes the API key back. The harness's side runs in a
process of its own, whose peak memory is measured."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys

import pytest

from pytest_super.llm import LLMClient, LLMSettings
from tests.support.attack_runs import PEAK_KB
from tests.support.openai_server import Raw

KEY = "sk-test-0123456789abcdef-echoed"
PEAK_LIMIT_MB = 400

ASK = (
    """
import json, sys
from pytest_super.llm import LLMClient, LLMSettings
from pytest_super.errors import LLMError
settings = LLMSettings(model="m", base_url=sys.argv[1], max_retries=1)
try:
    with LLMClient(settings, sleep=lambda s: None) as client:
        outcome = "reply " + str(len(client.complete([{"role": "user", "content": "hi"}]).text))
except LLMError as exc:
    outcome = "LLMError " + str(exc)
peak_kb = """
    + PEAK_KB
    + """
print(json.dumps({"outcome": outcome, "peak_kb": peak_kb}))
"""
)


def _ask_in_a_process(base_url: str) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", ASK, base_url], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["outcome"], result["peak_kb"] // 1024


def _reply(text: str) -> bytes:
    return json.dumps(
        {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {}}
    ).encode()


def test_a_100_mb_answer_is_an_endpoint_error_and_the_harness_stays_small(openai_server) -> None:
    """Red on 636b730: the harness read all of it (831 MB in the issue's run) and went on."""
    huge = Raw(_reply("x" * 100_000_000))
    openai_server.script([huge, huge])
    outcome, peak_mb = _ask_in_a_process(openai_server.base_url)
    assert outcome.startswith("LLMError") and "larger than" in outcome, outcome
    from pytest_super.llm import max_reply_bytes

    assert f"{max_reply_bytes(LLMSettings(model='m')):,} bytes" in outcome
    print(f"harness peak RSS {peak_mb} MB")
    assert peak_mb < PEAK_LIMIT_MB, f"peak RSS {peak_mb} MB"


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """About 1 MB of gzip that inflates to 1 GiB of zeros."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as f:
        block = bytes(1 << 24)
        for _ in range(64):
            f.write(block)
    return out.getvalue()


def test_a_gzip_bomb_is_cut_while_it_inflates(openai_server, gzip_bomb) -> None:
    """Red on 636b730: the harness inflated all of it (2.1 GB in the issue's run)."""
    assert len(gzip_bomb) < 2_000_000
    bomb = Raw(gzip_bomb, {"Content-Encoding": "gzip"})
    openai_server.script([bomb, bomb])
    outcome, peak_mb = _ask_in_a_process(openai_server.base_url)
    assert outcome.startswith("LLMError") and "larger than" in outcome, outcome
    print(f"harness peak RSS {peak_mb} MB")
    assert peak_mb < PEAK_LIMIT_MB, f"peak RSS {peak_mb} MB"


def test_lone_surrogates_are_repaired_and_an_echoed_key_is_redacted(openai_server) -> None:
    """Red on 636b730: the surrogate reached the trajectory writer (a harness error), and the
    key came back verbatim."""
    raw = b'{"choices": [{"message": {"content": "a\\ud800b ' + KEY.encode() + b'"}}]}'
    openai_server.script([Raw(raw)])
    with LLMClient(LLMSettings(model="m", base_url=openai_server.base_url, api_key=KEY)) as c:
        text = c.complete([{"role": "user", "content": "hi"}]).text
    assert text == "a\ufffdb <API key>"
    text.encode("utf-8")  # encodable: no lone surrogate left


ECHO_TASK = """\
id: echo
query: 'Report x as a json structured as follows: {"x": 0}.'
answer: {x: 1}
solution:
  - execute: |
      print('{"x": 1}')
"""


#: the harness writes its own peak resident memory (VmHWM) as it ends
PEAK_CONFTEST = (
    """
import pathlib

def pytest_unconfigure(config):
    peak_kb = """
    + PEAK_KB
    + """
    pathlib.Path(str(config.rootpath), "peak_kb").write_text(str(peak_kb))
"""
)


def _echo(text: str) -> str:
    return f"Thought: {text}\nAction: execute\n<content>\nprint('{text}')\n</content>\n"


def test_an_echoed_key_reaches_no_file_no_report_and_no_terminal(
    pytester: pytest.Pytester, openai_server, monkeypatch
) -> None:
    """Red on 636b730: the key an endpoint sent back landed in JUnit, the task page, both
    trajectory files and the terminal. Here it comes back in a thought, in code the agent runs
    (so in the kernel's output too), with a lone surrogate beside it, and in the submission."""
    monkeypatch.setenv("SUPER_API_KEY", KEY)
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    (pytester.path / "tasks" / "expert").mkdir(parents=True)
    (pytester.path / "tasks" / "expert" / "echo.yaml").write_text(ECHO_TASK)
    pytester.makeconftest(PEAK_CONFTEST)
    surrogate = _reply("Thought: a\ud800 " + KEY + "\nAction: execute\n<content>\nprint(1)\n")
    openai_server.script(
        [
            _echo(KEY),
            Raw(surrogate),  # JSON's `\\ud800` escape: a lone surrogate once parsed
            f'Thought: done {KEY}\nAction: submit\n<content>\n{{"x": "{KEY}"}}\n',
        ]
    )
    result = pytester.runpytest_subprocess(
        "tasks",
        "--super-agent=react",
        "--super-model=gpt-4o",
        "--super-backend=local",
        "--super-live",
        f"--super-base-url={openai_server.base_url}",
        f"--junitxml={pytester.path / 'junit.xml'}",
        "-p",
        "no:cacheprovider",
        "-rA",
    )
    result.assert_outcomes(failed=1)  # the agent's doing: a wrong answer, not a harness error
    assert len(openai_server.requests) == 3 and openai_server.remaining == 0
    printed = result.stdout.str() + result.stderr.str()
    assert "<API key>" in printed and KEY not in printed
    written = [p for p in pytester.path.rglob("*") if p.is_file() and "tasks" not in p.parts[-3:-1]]
    reports = [p for p in written if "reports" in p.parts or p.name == "junit.xml"]
    assert len(reports) >= 6  # junit, results.jsonl, summary, index, task page, trajectories
    leaked = [p for p in reports if KEY in p.read_text(errors="replace")]
    assert leaked == []
    (run_dir,) = (pytester.path / "reports").iterdir()
    trajectory = (run_dir / "trajectories" / "echo.json").read_text()
    assert "\ufffd" in json.loads(trajectory)["steps"][1]["thought"]
    assert "<API key>" in trajectory
    # the harness (the pytest process that ran the episode) stayed small, by its own VmHWM
    peak_mb = int((pytester.path / "peak_kb").read_text()) // 1024
    print(f"harness peak RSS {peak_mb} MB")
    assert peak_mb < PEAK_LIMIT_MB, f"peak RSS {peak_mb} MB"
