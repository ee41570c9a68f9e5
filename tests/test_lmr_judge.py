"""LMR-Bench's LLM-as-judge (issue 46, item 3, `--super-judge-model`): upstream's rubric fetched
at the pinned commit and checked against its sha256 (a copy with another is refused), filled
with the golden function and the agent's, asked once of the run's endpoint after the unit test;
its category goes to results.jsonl, JUnit and the failure text, and a judge that fails is the
task's judge error, never its outcome.

Upstream's judge script is served by a stand-in for raw.githubusercontent.com on 127.0.0.1 (the
test copy in tests/data/lmr-bench/evaluation/, under the licence note there); the judge's reply
by tests/support/openai_server.py. No network."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_super.kernels.docker.image import build_image
from pytest_super.lmr import LMR_COMMIT, LMR_REPO
from pytest_super.lmr.golden import function_text
from pytest_super.lmr.judge import (
    FIELDS,
    JUDGE_FILE,
    JUDGE_SHA256,
    JudgeError,
    judge_prompt,
    parse_reply,
    rubric,
    rubric_path,
)
from pytest_super.reference_files import BASE_URL_ENV, DownloadError
from tests.support.lmr_runs import run_lmr
from tests.test_prompts_reference import RawStandIn

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = (ROOT / "tests/data/lmr-bench" / JUDGE_FILE).read_bytes()
DEMO = ROOT / "tasks" / "lmr"
SMOOTHING = "lmr/02-LabelSmoothing"


def _serve(files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch, cache: Path) -> RawStandIn:
    server = RawStandIn(files, root=f"/{LMR_REPO}/{LMR_COMMIT}/")
    monkeypatch.setenv(BASE_URL_ENV, server.url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    return server


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RawStandIn]:
    server = _serve({JUDGE_FILE: UPSTREAM}, monkeypatch, tmp_path / "cache")
    yield server
    server.stop()


def test_the_rubric_is_upstreams_prompt_fetched_once_at_the_pinned_commit(upstream, tmp_path):
    path = rubric_path()
    assert path == tmp_path / "cache/pytest-super/lmr-bench" / LMR_COMMIT / Path(JUDGE_FILE).name
    assert path.read_bytes() == UPSTREAM
    assert rubric_path() == path and len(upstream.requests) == 1  # the cached copy is used
    template = rubric(path.read_text())
    prompt = judge_prompt(template, {name: f"<{name}>" for name in FIELDS})
    assert prompt.startswith(
        "Instruction: <instruction>\n\nYou are an expert NLP software engineer"
    )
    assert "- Golden Reference (<golden_file>):\n```python\n<golden_content>\n```\n" in prompt
    assert "3. Completely Correct: The implementation is fully faithful" in prompt
    assert prompt.endswith('"First key point…",\n    "Second key point…"\n  ]\n}\n')


def test_a_rubric_with_another_hash_is_refused_and_nothing_is_saved(tmp_path, monkeypatch):
    changed = UPSTREAM.replace(b"3. Completely Correct", b"3. Mostly Correct")
    server = _serve({JUDGE_FILE: changed}, monkeypatch, tmp_path / "cache")
    try:
        with pytest.raises(DownloadError) as caught:
            rubric_path()
    finally:
        server.stop()
    message = str(caught.value)
    assert JUDGE_FILE in message and LMR_COMMIT in message
    assert f"not the pinned {JUDGE_SHA256}" in message and BASE_URL_ENV in message
    assert not (tmp_path / "cache").exists()


def test_a_run_whose_rubric_has_another_hash_stops_before_any_task(pytester, tmp_path, monkeypatch):
    changed = UPSTREAM.replace(b"temperature=0.0", b"temperature=0.7")
    server = _serve({JUDGE_FILE: changed}, monkeypatch, tmp_path / "cache")
    shutil.copytree(DEMO, pytester.path / "lmr")
    try:
        result = pytester.runpytest_subprocess(
            SMOOTHING,
            "--super-agent=gold",
            "--super-judge-model=gpt-4.1",
            "--super-base-url=http://127.0.0.1:9/v1",
            "-p",
            "no:cacheprovider",
        )
    finally:
        server.stop()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*--super-judge-model: LMR-Bench's judge rubric: http://127.0.0.1:*/{LMR_REPO}/"
            f"{LMR_COMMIT}/{JUDGE_FILE}: sha256 *, not the pinned {JUDGE_SHA256} *; nothing was "
            f"saved. Check {BASE_URL_ENV}*(checked before any task ran)"
        ]
    )
    assert "INTERNALERROR" not in result.stderr.str() + result.stdout.str()
    assert not (pytester.path / "reports").exists() or not any(
        (pytester.path / "reports").iterdir()
    )


@pytest.mark.parametrize(
    "reply, why",
    [
        ("The implementation is correct.", "not JSON"),
        ('{"rationale": ["fine"]}', "no `category`"),
        ('{"category": "4"}', "unexpected category '4'"),
        ('["3"]', "no `category`"),
    ],
)
def test_a_reply_that_is_not_upstreams_json_is_a_judge_error(reply, why):
    with pytest.raises(JudgeError, match=why):
        parse_reply(reply)


def test_upstreams_reading_of_a_reply():
    assert parse_reply(' {"category": 2, "rationale": ["off by one"]}\n') == (2, ["off by one"])
    assert parse_reply('{"category": " 3 "}') == (3, [])


# -- on the real engine ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture
def project(pytester: pytest.Pytester, image: str, upstream, monkeypatch) -> pytest.Pytester:
    shutil.copytree(DEMO, pytester.path / "lmr")
    (pytester.path / "lmr_agents.py").write_text(LEAVE)
    pytester.makeini("[pytest]\npythonpath = .\n")
    monkeypatch.setenv("SUPER_API_KEY", "sk-test-lmr-judge")
    return pytester


LEAVE = """
from pytest_super.environment import AgentResult
from pytest_super.errors import ExitStatus


class Leave:
    \"\"\"Submits at once: the function stays masked.\"\"\"

    name = "leave"
    needs_llm = False

    def run(self, env):
        return AgentResult(ExitStatus.SUBMITTED)
"""


def _judged(project, server, agent="gold"):
    return run_lmr(
        project,
        SMOOTHING,
        f"--super-agent={agent}",
        "--super-judge-model=gpt-4.1-2025-04-14",
        f"--super-base-url={server.base_url}",
        "--junitxml=junit.xml",
    )


@pytest.mark.docker
def test_a_gold_run_with_the_judge_records_its_category(project, openai_server):
    openai_server.script(['{"category": "3", "rationale": ["same as the golden function"]}'])
    result, records = _judged(project, openai_server)
    result.assert_outcomes(passed=1)
    (record,) = records.values()
    assert (record["judge_score"], record["judge_model"]) == (3, "gpt-4.1-2025-04-14")
    assert "judge_error" not in record
    (request,) = openai_server.requests
    assert request.body["model"] == "gpt-4.1-2025-04-14" and request.body["temperature"] == 0.0
    prompt = request.prompt_text
    golden = (DEMO / "02-LabelSmoothing/golden_files/losses_golden.py").read_text()
    assert prompt.startswith("Instruction: Implement the `forward` method")
    method = function_text(golden, "forward", "LabelSmoothingLoss", "losses_golden.py")
    assert "label-smoothed cross-entropy" in method  # the class's method, not CrossEntropyLoss's
    # the golden method, and the agent's: the golden one, put in place by gold
    assert (
        f"- Golden Reference (golden_files/losses_golden.py):\n```python\n{method}\n```" in prompt
    )
    assert f"- Agent Implementation (losses.py):\n```python\n{method}\n```" in prompt
    out = ET.parse(project.path / "junit.xml").getroot().find(".//testcase/system-out")
    assert out is not None and "judge_score=3" in (out.text or "")


@pytest.mark.docker
def test_a_judge_reply_that_is_not_json_is_a_judge_error_and_the_task_still_passes(
    project, openai_server
):
    openai_server.script(["Looks right to me: category three."])
    result, records = _judged(project, openai_server)
    result.assert_outcomes(passed=1)
    (record,) = records.values()
    assert record["outcome"] == "passed" and record["unit_tests"] == 1.0
    assert record["judge_score"] is None and record["judge_model"] == "gpt-4.1-2025-04-14"
    assert record["judge_error"].startswith("JudgeError: the reply is not JSON")


@pytest.mark.docker
def test_a_failed_task_shows_the_judges_category_in_its_failure(project, openai_server):
    openai_server.script(['{"category": 1, "rationale": ["the body is missing"]}'])
    result, records = _judged(project, openai_server, agent="lmr_agents:Leave")
    result.assert_outcomes(failed=1)  # the unit test decides: the function stayed masked
    (record,) = records.values()
    assert (record["outcome"], record["unit_tests"], record["judge_score"]) == ("failed", 0.0, 1)
    result.stdout.fnmatch_lines(["*judge (gpt-4.1-2025-04-14): category 1, incorrect logic"])
    masked = (DEMO / "02-LabelSmoothing/smooth-ce/losses.py").read_text()
    method = function_text(masked, "forward", "LabelSmoothingLoss", "losses.py")
    (request,) = openai_server.requests
    assert f"- Agent Implementation (losses.py):\n```python\n{method}\n```" in request.prompt_text
