"""What the model is shown, request by request (issue 43 item 1): every request our ReAct-SUPER
sends in the closed-loop replay of a shipped run equals the request SUPER's own agent sent at
that turn of that episode (tests/data/super-reference/requests/, written by
scripts/reference-requests.py from an upstream checkout); a request that differs ends the
episode's replay at once, named by episode, turn, message and character offset.

The agents run with the reference's prompts (prompt.yaml and protocol.yaml rebuilt from the
shipped notebooks, tests/support/reference_requests.py). No containers, no network.
"""

from __future__ import annotations

import json
import lzma
import re
import shutil
from pathlib import Path

import pytest

from pytest_super import cli
from pytest_super.replay.endpoint import ReplayEndpoint
from pytest_super.replay.expected import read_expected, request_difference
from tests.support.published_data import published_runs
from tests.support.reference_requests import (
    EXPECTED,
    REACT_RUNS,
    SWE_RUN,
    SWE_SAMPLES,
    reference_prompt_dir,
    swe_reference_prompt_dir,
)

EXPERT, MASKED = REACT_RUNS
#: requests per shipped run: the number of model calls SUPER's agent made in its episodes
REQUESTS = {EXPERT: (45, 2196), MASKED: (144, 3033)}
#: the SWE-agent run's: the model calls SWE-agent v0.6.1's agent made in its 45 episodes
SWE_REQUESTS = (45, 2352)
#: a SWE-agent episode with a cell that ran out of time, `%cd`s, files opened and edited, cells
#: that printed nothing and observations SWE-agent's history processor omits
SWE_EPISODE = ("amos", 58)


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return reference_prompt_dir(tmp_path_factory.mktemp("reference-prompts"))


def replay_run_cli(run: str, prompt_file: Path, *args: str) -> list[str]:
    return [
        "replay-run",
        str(published_runs() / run),
        "--prompts",
        str(prompt_file),
        "--expected-requests",
        str(EXPECTED[run]),
        *args,
    ]


def test_the_expected_requests_hold_every_model_call_of_the_shipped_runs() -> None:
    for run, (episodes, requests) in REQUESTS.items():
        expected = read_expected(EXPECTED[run])
        assert (expected.run, len(expected.episodes), expected.total()) == (
            run,
            episodes,
            requests,
        )
        first = expected.episodes[sorted(expected.episodes)[0]][0]
        roles = ["system", "user"] + (["assistant"] if run == MASKED else [])  # the prefix
        assert [m["role"] for m in first["messages"]] == roles
        assert first["messages"][1]["content"].startswith("Query: ")
        assert {k: first[k] for k in ("stop", "temperature", "top_p", "max_tokens")} == {
            "stop": ["</content>", "Observation:"],
            "temperature": 0.2,
            "top_p": 0.5,
            "max_tokens": 1500,
        }


@pytest.mark.parametrize(
    "run", [EXPERT, pytest.param(MASKED, marks=pytest.mark.long)], ids=["expert", "masked"]
)
def test_every_request_of_a_shipped_run_equals_the_reference_agents(
    run, prompt_file, tmp_path, capsys
) -> None:
    episodes, requests = REQUESTS[run]
    out = tmp_path / "replay.json"
    code = cli.main(replay_run_cli(run, prompt_file, "--json", str(out)))
    printed = capsys.readouterr().out
    assert f"{episodes} of {episodes} episodes identical" in printed, printed
    assert f"{requests} of {requests} requests identical to the reference agent's" in printed
    assert code == 0, printed
    # --json holds every request our agent sent, whole
    data = json.loads(out.read_text())
    sent = [r for e in data[0]["episodes"] for r in e["requests"]]
    assert len(sent) == requests
    assert set(sent[0]) == {"messages", "stop", "temperature", "top_p", "max_tokens"}
    assert sent[-1]["messages"][-1]["role"] == "assistant"


@pytest.fixture(scope="module")
def swe_prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return swe_reference_prompt_dir(tmp_path_factory.mktemp("swe-reference-prompts"))


def swe_replay_cli(swe_prompts: Path, *args: str) -> list[str]:
    run = str(published_runs() / SWE_RUN)
    expected = str(EXPECTED[SWE_RUN])
    return [
        "replay-run",
        run,
        "--prompts",
        str(swe_prompts),
        "--expected-requests",
        expected,
        *args,
    ]


def test_the_swe_agents_expected_requests_are_swe_agents_layout() -> None:
    expected = read_expected(EXPECTED[SWE_RUN])
    assert (expected.run, len(expected.episodes), expected.total()) == (SWE_RUN, *SWE_REQUESTS)
    requests = expected.episodes[SWE_EPISODE[0]]
    first, later = requests[0], requests[-1]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]  # no demonstration
    assert first["messages"][0]["content"].startswith("SETTING: You are an autonomous programmer")
    assert first["messages"][1]["content"].endswith(
        "\n(Open file: n/a)\n(Current directory: /content)\nIn [ ]"
    )
    assert {k: first[k] for k in ("stop", "temperature", "top_p", "max_tokens")} == {
        "stop": None,
        "temperature": 0.2,
        "top_p": 0.5,
        "max_tokens": 1500,
    }
    users = [m["content"] for m in later["messages"] if m["role"] == "user"]
    assert all(re.fullmatch(r"Old output omitted \(\d+ lines\)", u) for u in users[1:-5])
    assert not any(u.startswith("Old output omitted") for u in users[-5:])
    shown = [m["content"] for r in requests for m in r["messages"][-1:]]
    assert any(
        s.startswith("Your command ran successfully and did not produce any output.\n")
        for s in shown
    )
    assert any("(Current directory: /content/amos/fairseq)" in s for s in shown)


def test_every_swe_agent_request_of_one_episode_equals_the_references(
    swe_prompts, tmp_path, capsys
) -> None:
    task, requests = SWE_EPISODE
    out = tmp_path / "replay.json"
    code = cli.main(swe_replay_cli(swe_prompts, "--task", task, "--json", str(out)))
    printed = capsys.readouterr().out
    assert "1 of 1 episodes identical" in printed, printed
    assert f"{requests} of {requests} requests identical to the reference agent's" in printed
    assert code == 0, printed
    sent = json.loads(out.read_text())[0]["episodes"][0]["requests"]
    assert len(sent) == requests and "stop" in sent[0] and sent[0]["stop"] is None


@pytest.mark.long
def test_every_swe_agent_request_of_the_shipped_run_equals_the_references(
    swe_prompts, capsys
) -> None:
    episodes, requests = SWE_REQUESTS
    code = cli.main(swe_replay_cli(swe_prompts))
    printed = capsys.readouterr().out
    assert f"{episodes} of {episodes} episodes identical" in printed, printed
    assert f"{requests} of {requests} requests identical to the reference agent's" in printed
    assert code == 0, printed


#: the SWE-agent Masked samples' model calls: by episode (pre-executed steps send none)
SWE_SAMPLE_REQUESTS = {
    "acqsurvey_issue": 42,
    "amrbart_configuration": 32,
    "dpt_goal": 30,
    "robust_prompt_classifier_cpu": 24,
}


def test_the_swe_samples_expected_requests_hold_the_pre_executed_turns() -> None:
    expected = read_expected(EXPECTED[SWE_SAMPLES])
    assert expected.run == SWE_SAMPLES
    assert {t: len(r) for t, r in expected.episodes.items()} == SWE_SAMPLE_REQUESTS
    first = expected.episodes["dpt_goal"][0]["messages"]
    start = "\n(Open file: n/a)\n(Current directory: /content)\nIn [ ]"
    assert first[1]["content"].endswith(start)  # the task's message: the state at the start
    # six pre-executed steps, each a turn: the notebook's thought and cell in a reply's layout
    assert [m["role"] for m in first] == ["system", "user"] + ["assistant", "user"] * 6
    assert first[2]["content"] == (
        "DISCUSSION\n[pre-executed by user]\n\n```\n!git clone https://github.com/xyaoooo/dpt"
        "\n%cd dpt\n```"
    )
    edit = first[4]["content"]
    assert edit.startswith(
        "DISCUSSION\nEXECUTED BY USER\n\n```\nEDITING `/content/dpt/data_utils.py."
    )
    assert " CHANGING:\n\n\n\n    def load_dataset" in edit  # the task's blank line kept
    assert first[5]["content"].startswith("Edit was successful.")
    # the runner's wait for a pre-executed cell left running: `continue_wait`, its own thought
    acq = expected.episodes["acqsurvey_issue"][0]["messages"]
    assert "DISCUSSION\n[continued after timeout]\n\n```\ncontinue_wait\n```" in [
        m["content"] for m in acq
    ]


def test_every_request_of_the_swe_samples_equals_the_references(
    swe_prompts, tmp_path, capsys
) -> None:
    from tests.support.published_data import sample_runs

    out = tmp_path / "replay.json"
    code = cli.main(
        [
            "replay-run",
            str(sample_runs() / SWE_SAMPLES),
            "--prompts",
            str(swe_prompts),
            "--expected-requests",
            str(EXPECTED[SWE_SAMPLES]),
            "--json",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    total = sum(SWE_SAMPLE_REQUESTS.values())
    assert "4 of 4 episodes identical" in printed, printed
    assert f"{total} of {total} requests identical to the reference agent's" in printed
    assert code == 0, printed
    episodes = json.loads(out.read_text())[0]["episodes"]
    assert sum(len(e["requests"]) for e in episodes) == total


def test_a_differing_request_ends_the_episode_there_and_is_named(
    prompt_file, tmp_path, capsys
) -> None:
    # the reference's format-error correction in other words: inbedder's first reply is malformed
    protocol = prompt_file.parent / "protocol.yaml"
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "prompt.yaml").write_text(prompt_file.read_text())
    text = protocol.read_text()
    (changed / "protocol.yaml").write_text(text.replace("correct format", "right format", 1))
    out = tmp_path / "replay.json"
    args = replay_run_cli(EXPERT, changed / "prompt.yaml", "--task", "inbedder", "--json", str(out))
    assert cli.main(args) == 1
    printed = capsys.readouterr().out
    line = printed.splitlines()[1]
    assert re.fullmatch(
        r'  inbedder: request 2: message 2 \(assistant\), character \d+: ours "\.\.\..*right '
        r'format.*", reference "\.\.\..*correct format.*"',
        line,
    ), line
    assert "0 of 1 episodes identical" in printed
    total = len(read_expected(EXPECTED[EXPERT]).episodes["inbedder"])
    assert f"1 of {total} requests identical to the reference agent's" in printed
    episode = json.loads(out.read_text())[0]["episodes"][0]
    # it stopped at the divergence: two requests sent, no recorded reply served after them
    assert len(episode["requests"]) == 2 < total
    assert episode["ours"]["exit_status"] == "error"
    assert "differs from the reference agent's" in episode["ours"]["error"]


def test_request_difference_names_message_offset_and_both_sides() -> None:
    base = {"stop": ["x"], "temperature": 0.2, "top_p": 0.5, "max_tokens": 10}
    ours = {
        **base,
        "messages": [{"role": "system", "content": "abc"}, {"role": "user", "content": "Task: q"}],
    }
    theirs = {
        **base,
        "messages": [{"role": "system", "content": "abc"}, {"role": "user", "content": "Query: q"}],
    }
    found = request_difference(4, ours, theirs)
    assert found is not None
    assert (
        found.line()
        == 'request 4: message 1 (user), character 0: ours "Task: q", reference "Query: q"'
    )
    assert request_difference(4, theirs, theirs) is None
    found = request_difference(2, {**theirs, "stop": []}, theirs)
    assert found is not None and found.line() == 'request 2: stop: ours [], reference ["x"]'
    missing = request_difference(1, {**base, "messages": theirs["messages"][:1]}, theirs)
    assert missing is not None and missing.line().startswith("request 1: message 1 (user)")


def test_a_request_beyond_the_references_is_refused_without_a_reply() -> None:
    from pytest_super.replay.script import Reply

    expected = [
        {
            "messages": [{"role": "user", "content": "hi"}],
            "stop": None,
            "temperature": None,
            "top_p": None,
            "max_tokens": None,
        }
    ]
    with ReplayEndpoint() as endpoint:
        endpoint.play([Reply(1, "a", 1, 1), Reply(2, "b", 1, 1)], expected)
        assert endpoint.answer({"messages": [{"role": "user", "content": "hi"}]})[0] == 200
        code, payload = endpoint.answer({"messages": [{"role": "user", "content": "hi"}]})
        assert code == 400 and "request 2: an extra request" in payload["error"]["message"]
        assert endpoint.served == 1


def test_a_damaged_file_of_expected_requests_is_a_clear_error(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.jsonl.xz"
    bad.write_bytes(lzma.compress(b'{"run": "x"}\n{"task_id": 1}\n'))
    code = cli.main(["replay-run", str(published_runs() / EXPERT), "--expected-requests", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert str(bad) in err and "scripts/reference-requests.py" in err


def test_replay_runs_with_our_defaults_and_they_are_the_references() -> None:
    from pytest_super import defaults
    from pytest_super.replay import script
    from pytest_super.runner import EpisodeSettings

    ours = (defaults.STEPS, defaults.COMPUTE_LIMIT_S, defaults.CELL_TIMEOUT_S)
    reference = (
        script.REFERENCE_STEPS,
        script.REFERENCE_COMPUTE_S,
        script.REFERENCE_CELL_TIMEOUT_S,
    )
    assert ours == reference == (100, 1800.0, 300.0)
    assert EpisodeSettings().token_budget is None  # the runner's 400k on Masked, 600k otherwise
    assert (script.REFERENCE_BUDGETS, script.DEFAULT_BUDGET) == ({"masked": 400_000}, 600_000)


def test_a_folder_without_a_notebook_is_named_and_counted(tmp_path, capsys) -> None:
    from tests.support.published_data import sample_runs

    run = tmp_path / "gpt-4o-2024-08-06_swe-agent_masked"
    shutil.copytree(sample_runs() / run.name, run)
    (run / "lost_task").mkdir()
    (run / "lost_task" / "metrics.json").write_text('{"submitted": 0}')
    assert cli.main(["replay-run", str(run)]) == 0
    printed = capsys.readouterr().out
    assert "1 of 5 folders has no notebook: not replayed (lost_task)" in printed
    assert "4 of 4 episodes identical" in printed


def test_a_bad_protocol_file_names_the_file_and_the_field(prompt_file, tmp_path) -> None:
    from pytest_super.prompts import PromptFileError, load_prompts

    shutil.copy(prompt_file, tmp_path / "prompt.yaml")
    assert load_prompts(tmp_path / "prompt.yaml").protocol is None  # none beside it: our words
    protocol = (prompt_file.parent / "protocol.yaml").read_text()
    loaded = load_prompts(prompt_file).protocol
    assert loaded is not None and loaded["interrupted"] == "Kernel interrupted."
    (tmp_path / "protocol.yaml").write_text(protocol.replace("format_error:", "format_eror:"))
    with pytest.raises(PromptFileError, match=r"protocol\.yaml: field 'format_error' is missing"):
        load_prompts(tmp_path / "prompt.yaml")
    (tmp_path / "protocol.yaml").write_text("- a list\n")
    with pytest.raises(PromptFileError, match=r"protocol\.yaml: not a YAML mapping"):
        load_prompts(tmp_path / "prompt.yaml")


def test_a_folder_of_templates_takes_a_protocol_file_and_a_prompt_listing_its_commands(
    swe_prompts, tmp_path
) -> None:
    from pytest_super.prompts import PromptFileError, load_prompts

    loaded = load_prompts(swe_prompts)
    assert (
        loaded.protocol is not None
        and '"action": {"type": "interrupt"}' in (loaded.protocol["timeout"])
    )
    system = loaded.swe_system(window=100, command_docs="UNUSED")
    assert "{WINDOW}" in system and "UNUSED" not in system  # the published prompt, as it was
    folder = tmp_path / "prompts"
    shutil.copytree(swe_prompts, folder)
    (folder / "protocol.yaml").write_text("timeout: only this\n")
    with pytest.raises(PromptFileError, match=r"protocol\.yaml: field 'format_error' is missing"):
        load_prompts(folder)


def test_an_episode_that_parted_from_the_recording_gets_no_more_replies(
    monkeypatch, tmp_path
) -> None:
    # without expected requests: a cell the episode did not record stops the replies there
    from pytest_super.agents.history import RunningCell
    from pytest_super.published_runs import read_run
    from pytest_super.replay.kernel import ReplayBackend
    from pytest_super.replay.run import replay_episode
    from pytest_super.replay.script import episode_script

    episode = next(e for e in read_run(published_runs() / EXPERT) if e.task_id == "mera")
    script = episode_script(episode)
    original = RunningCell.run
    monkeypatch.setattr(
        RunningCell, "run", lambda self, env, code: original(self, env, "1\n" + code)
    )
    with ReplayEndpoint() as endpoint:
        comparison, requests = replay_episode(script, endpoint, ReplayBackend(), tmp_path)
        served = endpoint.served
    first = comparison.differences[0]
    assert first.what == "kernel" and first.ours.startswith("step 1: the agent sent execute `1 ")
    assert "parted from the recording" in comparison.ours["error"]
    assert served == 1 < len(script.replies)  # the first reply's cell parted: nothing after it
    assert len(requests) == 2


def _react_run(tmp_path: Path) -> Path:
    """The Expert episodes whose model never edited, as the run of plain ReAct (the folder's name
    says which of our agents replays it: `react`)."""
    from tests.support.reference_requests import REACT_NO_EDIT

    lines = lzma.decompress(EXPECTED[REACT_NO_EDIT].read_bytes()).decode().splitlines()
    run = tmp_path / REACT_NO_EDIT
    for line in lines[1:]:
        task = json.loads(line)["task_id"]
        shutil.copytree(published_runs() / EXPERT / task, run / task)
    return run


def test_react_without_the_edit_tool_sends_the_reference_agents_requests(
    prompt_file, tmp_path, capsys
) -> None:
    """Issue 43: ReAct without the edit tool against SUPER's own `Agent(allow_edit=False,
    add_edit_prompt=False)`, request by request, on the two Expert episodes whose model never
    edited (conv_graph, mera: 37 requests). At the pinned commit upstream's prompt does not change
    with those flags (`_get_system_prompt` always fills the edit demonstration), and ours under
    its prompt.yaml does not either; with our own prompts instead, the first request differs."""
    from tests.support.reference_requests import REACT_NO_EDIT

    run = _react_run(tmp_path)
    expected = ["--expected-requests", str(EXPECTED[REACT_NO_EDIT])]
    code = cli.main(["replay-run", str(run), "--prompts", str(prompt_file), *expected])
    printed = capsys.readouterr().out
    assert "2 of 2 episodes identical" in printed, printed
    assert "37 of 37 requests identical to the reference agent's" in printed, printed
    assert code == 0, printed
    assert cli.main(["replay-run", str(run), *expected]) == 1  # our own prompts: compared, differ
    assert "request 1" in capsys.readouterr().out
