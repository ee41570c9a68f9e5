"""The paper's agent in one word (issue 43 item 2): `--super-prompts reference` downloads the
reference's prompt.yaml and the two files of its agent at the pinned commit once, caches them,
and takes every string the model is shown from them; replay-run certifies that set on the
shipped runs, and `--check-prompts` checks every request sent.

The reference's files are served by a stand-in for raw.githubusercontent.com on 127.0.0.1:
`agent.py` and `jupyter_env.py` from tests/data/super-reference/upstream/ (test copies of
upstream's files at the pinned commit, under its licence there), the prompt.yaml rebuilt from a
shipped notebook to the pinned file (tests/support/reference_prompts.py). No network.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_super import cli
from pytest_super.prompts import REFERENCE, PromptFileError, load_prompts
from pytest_super.reference_files import (
    AGENT_FILES,
    BASE_URL_ENV,
    LICENSE_FILE,
    PROMPT_FILE,
    PROMPT_SHA256,
    PROMPTS_COMMIT,
)
from pytest_super.replay.reference_set import reference_system
from tests.support.published_data import DATA, published_runs
from tests.support.reference_prompts import protocol_fields, upstream_prompt_yaml
from tests.support.reference_requests import EXPECTED, REACT_RUNS
from tests.test_prompts_reference import (  # noqa: F401 - `project`: a fixture
    REACT_SUBMIT,
    RawStandIn,
    first_notebook,
    project,
    run_local,
)

UPSTREAM = DATA / "upstream"
EXPERT, MASKED = REACT_RUNS


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RawStandIn]:
    """The stand-in serving the reference's files; the cache in a fresh folder."""
    prompt = upstream_prompt_yaml(first_notebook(EXPERT), tmp_path / "prompt.yaml").read_bytes()
    files = {PROMPT_FILE: prompt, LICENSE_FILE: (DATA / "LICENSE.md").read_bytes()}
    files |= {path: (UPSTREAM / path).read_bytes() for path in AGENT_FILES}
    server = RawStandIn(files)
    monkeypatch.setenv(BASE_URL_ENV, server.url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    yield server
    server.stop()


def test_the_reference_in_one_word_is_its_files_at_the_pinned_commit(upstream, tmp_path) -> None:
    prompts = load_prompts(REFERENCE)
    assert prompts.pinned == PROMPTS_COMMIT and prompts.sha256 == PROMPT_SHA256
    folder = tmp_path / "cache" / "pytest-super" / "prompts" / PROMPTS_COMMIT
    assert prompts.source == str(folder / "prompt.yaml")
    for path, digest in AGENT_FILES.items():
        assert hashlib.sha256((folder / Path(path).name).read_bytes()).hexdigest() == digest
    # the strings the pinned code holds: the notes are the ones the published runs show ...
    runs = [published_runs() / run for run in REACT_RUNS]
    published = protocol_fields(*runs)
    assert prompts.protocol is not None
    for name in ("timeout", "interrupted", "invalid_action"):
        assert prompts.protocol[name] == published[name], name
    # ... the format-error correction is the pinned agent's, which the runs' later agent changed
    agent = (UPSTREAM / "super/agent/agent.py").read_text()
    assert json.dumps(prompts.protocol["format_error"])[1:-1] in agent  # as the source writes it
    assert prompts.protocol["format_error"] != published["format_error"]
    assert "invalid_submission_action" not in prompts.protocol  # the pinned agent has no such step
    # the system prompt is the pinned file's, as the reference's agent assembles it
    assert prompts.react_system(with_edit=True, cell_timeout_s=300) == reference_system(
        prompts.reference or {}
    )
    # downloaded once: a second load asks nothing
    asked = len(upstream.requests)
    assert asked == 2 + len(AGENT_FILES)
    assert load_prompts(REFERENCE).protocol == prompts.protocol
    assert len(upstream.requests) == asked


def test_a_reference_file_with_another_hash_is_refused_and_nothing_saved(upstream, tmp_path):
    path = next(iter(AGENT_FILES))
    upstream.files[path] = upstream.files[path] + b"\n# changed\n"
    with pytest.raises(PromptFileError) as info:
        load_prompts(REFERENCE)
    text = str(info.value)
    assert f"{path}: sha256 " in text and f"not the pinned {AGENT_FILES[path]}" in text
    assert "nothing was saved" in text and "pytest-super download prompts" in text
    folder = tmp_path / "cache" / "pytest-super" / "prompts" / PROMPTS_COMMIT
    assert not (folder / Path(path).name).exists()


def test_a_run_with_the_reference_in_one_word_sends_its_words(
    upstream,
    project,  # noqa: F811 - the fixture imported above
    openai_server,
):
    """A pytest run with `--super-prompts=reference`: the pinned file's system prompt, and a reply
    the agent cannot read answered with the pinned agent's correction, in the runs' layout."""
    openai_server.script(["I have no format.", REACT_SUBMIT])
    result = run_local(project, openai_server, "react-super", f"--super-prompts={REFERENCE}")
    result.assert_outcomes(passed=1)
    prompts = load_prompts(REFERENCE)
    assert prompts.reference is not None and prompts.protocol is not None
    first, second = openai_server.requests
    assert first.messages[0] == {"role": "system", "content": reference_system(prompts.reference)}
    assert first.messages[1]["content"].startswith("Query: Add 2 and 3.")
    assert second.messages[2]["content"] == (
        "Thought: \nAction: \n<content>\n\n</content>\nObservation: ```\n"
        f"{prompts.protocol['format_error']}\n```\n"
    )
    result.stdout.fnmatch_lines(
        [f"pytest-super: prompts {prompts.source} (sha256 {PROMPT_SHA256})"]
    )


def replay(run: str, *extra: str) -> list[str]:
    return [
        "replay-run",
        str(published_runs() / run),
        "--prompts",
        REFERENCE,
        "--expected-requests",
        str(EXPECTED[run]),
        *extra,
    ]


def test_replay_run_certifies_the_reference_in_one_word_on_the_expert_run(upstream, capsys):
    code = cli.main(replay(EXPERT, "--check-prompts"))
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "45 of 45 episodes identical" in printed
    assert "2196 of 2196 requests identical to the reference agent's" in printed
    assert "prompt:" not in printed


def test_check_prompts_checks_every_request_sent(upstream, capsys, monkeypatch) -> None:
    """The system message changed in the requests sent after the first: the check of a first
    request rebuilt from the prompt file (before: `check_run_prompts`) saw nothing; every request
    sent is checked now."""
    from pytest_super.agents import react

    original = react.ask_model
    calls = {"n": 0}

    def later_changed(env, messages, **kwargs):
        calls["n"] += 1
        if calls["n"] > 1:
            messages = [{"role": "system", "content": messages[0]["content"] + " "}, *messages[1:]]
        return original(env, messages, **kwargs)

    monkeypatch.setattr(react, "ask_model", later_changed)
    args = ["replay-run", str(published_runs() / EXPERT), "--task", "mera"]
    code = cli.main([*args, "--prompts", REFERENCE, "--check-prompts"])
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert "  prompt: mera: request 2: message 1 (system): differs at character " in printed
    assert "(9 of 10 requests differ)" in printed


@pytest.mark.long
def test_replay_run_certifies_the_reference_in_one_word_on_the_masked_run(upstream, capsys):
    code = cli.main(replay(MASKED))
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "143 of 144 episodes identical" in printed
    assert "[documented: pinned-invalid-submission]" in printed
