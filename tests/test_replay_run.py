"""Closed-loop replay (issue 31 items 1 and 2): our agents against every shipped published episode,
through the replay model endpoint (a real HTTP server) and the replay kernel backend; the
comparison fails on a tampered episode; the backend's kernel behaviours; the reply rules the replay
found. No containers, no network."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from pytest_super import cli
from pytest_super.agents.react import parse_reply as react_parse
from pytest_super.agents.swe import parse_reply as swe_parse
from pytest_super.agents.swe_commands import FileViewer, parse_command
from pytest_super.errors import InfrastructureError, LLMError
from pytest_super.kernels import kernel_backend_class
from pytest_super.kernels.base import CellResult, Kernel, KernelBackend, KernelSettings, ToolResult
from pytest_super.llm import LLMClient, LLMSettings
from pytest_super.published_runs import read_run
from pytest_super.replay.deviations import DEVIATIONS, documented_table
from pytest_super.replay.endpoint import NO_MORE_REPLIES, ReplayEndpoint
from pytest_super.replay.kernel import RUN_VARIABLE, ReplayBackend, ReplayKernel
from pytest_super.replay.run import RunReplay, replay_run, report_lines
from pytest_super.replay.script import Reply, episode_script
from pytest_super.trajectory import Action
from tests.support.published_data import published_runs, sample_runs

ROOT = Path(__file__).resolve().parent.parent
RUNS = sorted(p for p in published_runs().iterdir() if p.is_dir())
SAMPLES = sorted(p for p in sample_runs().iterdir() if p.is_dir())
EXPERT = published_runs() / "gpt-4o-2024-08-06_react-super_expert"
SWE_MASKED = sample_runs() / "gpt-4o-2024-08-06_swe-agent_masked"

#: the shipped runs' tests share one replay of every run (a module fixture): on one xdist worker
SHIPPED = pytest.mark.xdist_group("replay-shipped")


@pytest.fixture(scope="module")
def shipped() -> dict[str, tuple[RunReplay, float, float]]:
    """Each shipped run's replay, with its wall-clock and CPU seconds."""
    replays = {}
    for run_dir in RUNS + SAMPLES:
        started, cpu = time.monotonic(), time.process_time()
        replay = replay_run(run_dir)
        replays[run_dir.name] = (replay, time.monotonic() - started, time.process_time() - cpu)
    return replays


@SHIPPED
@pytest.mark.parametrize("run_dir", RUNS + SAMPLES, ids=lambda p: p.name)
def test_every_shipped_episode_replays_identically_or_as_documented(run_dir: Path, shipped) -> None:
    replay = shipped[run_dir.name][0]
    print(f"{run_dir.name}: {replay.identical} of {len(replay.episodes)} identical")
    assert replay.undocumented == [], "\n".join(report_lines(replay))
    differing = {e.task_id for e in replay.episodes if not e.identical}
    documented = {
        t for d in DEVIATIONS if d.run == run_dir.name and not d.pinned for t in d.episodes
    }
    assert differing == documented  # no stale entry in the table either
    assert len(replay.episodes) == len(read_run(run_dir))
    assert all(not e.kernel_notes for e in replay.episodes if e.identical)


@SHIPPED
def test_all_shipped_runs_replay_every_episode(shipped) -> None:
    # how long it takes is benchmarks/bench_replay.py's figure (CPU against reading the runs, in
    # the same run): a bound near it here failed a fresh clone at 60.6 s against 60. This one
    # only catches a replay gone quadratic: ten times what it takes alone (about 50 s of CPU).
    wall = sum(w for _, w, _ in shipped.values())
    cpu = sum(c for _, _, c in shipped.values())
    episodes = sum(len(r.episodes) for r, _, _ in shipped.values())
    print(f"replay of {episodes} episodes: {wall:.1f} s wall clock, {cpu:.1f} s CPU")
    assert episodes == 238
    assert cpu < 600.0


def test_the_documented_deviations_are_the_ones_docs_fidelity_lists() -> None:
    text = (ROOT / "docs" / "fidelity.md").read_text()
    section = text[text.index("## Closed-loop replay") :]
    rows = re.findall(r"^\| `([\w-]+)` \| (\S+) \| ([^|]+) \|", section, re.M)
    assert [(n, r, e.strip()) for n, r, e in rows] == documented_table()
    assert all(d.cause for d in DEVIATIONS)


# -- the comparison can fail ----------------------------------------------------------------------


def _copy_episode(run: Path, task_id: str, tmp_path: Path) -> Path:
    target = tmp_path / run.name / task_id
    shutil.copytree(run / task_id, target)
    return target


def _notebook(folder: Path) -> dict:
    return json.loads((folder / "history.ipynb").read_text())


def _write(folder: Path, notebook: dict) -> None:
    (folder / "history.ipynb").write_text(json.dumps(notebook))


def _first_submitting(run: Path) -> str:
    return next(
        e.task_id for e in read_run(run) if e.final_action and e.final_action.action == "submit"
    )


def test_a_corrupted_action_is_named_with_its_episode_and_step(tmp_path, capsys) -> None:
    task = _first_submitting(EXPERT)
    folder = _copy_episode(EXPERT, task, tmp_path)
    notebook = _notebook(folder)
    cells = notebook["cells"]
    # the first execute action of the agent becomes a submit: the reference read any text it
    # could not parse as a JSON string, so our agent submits it and stops there, one step early
    index = next(
        i
        for i, c in enumerate(cells)
        if "".join(c["source"]).startswith("**Action (execute)**")
        and "pre-executed" not in "".join(cells[i - 1]["source"])
    )
    cells[index]["source"] = ["**Action (submit)**:"]
    step = sum(1 for c in cells[:index] if re.match(r"### Step \d+", "".join(c["source"])))
    _write(folder, notebook)
    code = cli.main(["replay-run", str(folder.parent), "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{task}: step {step + 1}: ours (no step), published execute" in out
    assert "0 of 1 episodes identical" in out
    episode = json.loads((tmp_path / "r.json").read_text())[0]["episodes"][0]
    assert episode["identical"] is False and episode["differences"][0]["step"] == step + 1
    kinds = {d["what"] for d in episode["differences"]}
    assert kinds == {"action", "steps", "submission", "kernel"}


def test_a_different_published_score_is_named(tmp_path, capsys) -> None:
    task = _first_submitting(EXPERT)
    folder = _copy_episode(EXPERT, task, tmp_path)
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["submitted"] = 0
    (folder / "metrics.json").write_text(json.dumps(metrics))
    assert cli.main(["replay-run", str(folder.parent)]) == 1
    assert f"{task}: submitted: ours True, published False" in capsys.readouterr().out


def test_an_untouched_copy_replays_identically(tmp_path, capsys) -> None:
    task = _first_submitting(EXPERT)
    _copy_episode(EXPERT, task, tmp_path)
    assert cli.main(["replay-run", str(tmp_path / EXPERT.name)]) == 0
    assert "1 of 1 episodes identical" in capsys.readouterr().out


def test_an_action_name_with_words_after_it_is_invalid_as_in_the_reference(tmp_path) -> None:
    # the reference takes the whole line as the name ("Invalid action type: Execute the cell");
    # our agent took the first word and ran the cell, so this episode differed at that step
    task = _first_submitting(EXPERT)
    folder = _copy_episode(EXPERT, task, tmp_path)
    notebook = _notebook(folder)
    cells = notebook["cells"]
    index = next(
        i for i, c in enumerate(cells) if "".join(c["source"]).startswith("**Action (execute)**")
    )
    cells[index]["source"] = ["**Action (Execute the cell)**:"]
    cells[index + 1]["outputs"][0]["data"]["text/plain"] = ["Invalid action type: Execute the cell"]
    _write(folder, notebook)
    replay = replay_run(folder.parent)
    assert replay.episodes[0].identical, report_lines(replay)


# -- the replay kernel backend --------------------------------------------------------------------


@pytest.fixture(scope="module")
def expert_script():
    episode = next(
        e for e in read_run(EXPERT) if any("still running" in s.observation for s in e.steps)
    )
    return episode_script(episode)


def test_the_backend_is_registered_and_provisions_from_registered_episodes(expert_script) -> None:
    cls = kernel_backend_class("replay")
    assert cls is ReplayBackend and issubclass(cls, KernelBackend)
    backend = ReplayBackend()
    settings = KernelSettings(backend="replay")
    with pytest.raises(InfrastructureError, match=RUN_VARIABLE):
        backend.provision(settings, task_id=expert_script.task.id)
    backend.register([expert_script])
    kernel = backend.provision(settings, task_id=expert_script.task.id)
    assert isinstance(kernel, Kernel) and kernel.is_alive()
    kernel.close()
    kernel.close()  # twice is safe
    assert not kernel.is_alive()
    assert backend.cleanup_run(settings, "any") == [] and backend.cleanup_dead_runs(settings) == []


def test_the_backend_reads_the_run_the_environment_names(expert_script, monkeypatch) -> None:
    monkeypatch.setenv(RUN_VARIABLE, str(EXPERT))
    kernel = ReplayBackend().provision(
        KernelSettings(backend="replay"), task_id=expert_script.task.id
    )
    assert isinstance(kernel, ReplayKernel) and kernel.script.task.id == expert_script.task.id
    with pytest.raises(InfrastructureError, match="no episode of task 'nosuch'"):
        ReplayBackend().provision(KernelSettings(backend="replay"), task_id="nosuch")


def test_cells_get_the_recorded_output_duration_and_timeout(expert_script) -> None:
    kernel = ReplayKernel(expert_script)
    total = 0.0
    result: CellResult | ToolResult | None
    for recorded in expert_script.kernel:
        if recorded.action == "execute":
            result = kernel.execute(recorded.content, 300, interrupt_on_timeout=False)
            assert result.duration_s == recorded.duration_s + 0.5  # simulated, not slept
            assert result.output == recorded.output
            assert (result.status == "timeout") == recorded.timed_out == result.still_running
        elif recorded.action == "continue_wait":
            result = kernel.wait(300)
        elif recorded.action == "interrupt":
            result = kernel.interrupt()
        else:
            result = kernel.run_tool(recorded.action, recorded.content)
        assert result is not None
        total += result.duration_s
    assert kernel.differences == [] and kernel.remaining == []
    assert total == pytest.approx(sum(r.duration_s + 0.5 for r in expert_script.kernel))


def test_what_the_episode_did_not_record_is_a_difference_never_a_crash(expert_script) -> None:
    kernel = ReplayKernel(expert_script)
    result = kernel.execute("print('not recorded')", 300)
    assert result.status == "error" and result.duration_s == 0.0
    assert "recorded no such execute" in result.output
    tool = kernel.run_tool("edit", "not an edit")
    assert tool is not None and tool.ok is False
    for _ in range(len(expert_script.kernel)):
        kernel.wait(300)
    assert kernel.execute("print(1)", 300).status == "error"  # past the end: still an answer
    assert "after the episode's last recorded kernel step" in kernel.differences[-1]
    assert kernel.interrupt().output == ""  # an interrupt nobody recorded: the reference's own
    with pytest.raises(OSError):
        kernel.read_file("x.py")


# -- the replay endpoint --------------------------------------------------------------------------


def test_the_endpoint_serves_replies_cut_at_stop_with_their_usage_then_refuses() -> None:
    with ReplayEndpoint() as endpoint:
        endpoint.play([Reply(1, "Thought: a\nAction: execute\n<content>\n!ls\n</content>", 70, 9)])
        client = LLMClient(
            LLMSettings(model="gpt-4o", base_url=endpoint.base_url, api_key="k", max_retries=0)
        )
        try:
            got = client.complete([{"role": "user", "content": "q"}], stop=["</content>"])
            assert got.text == "Thought: a\nAction: execute\n<content>\n!ls\n"
            assert (got.prompt_tokens, got.completion_tokens) == (70, 9)
            with pytest.raises(LLMError, match=NO_MORE_REPLIES):
                client.complete([{"role": "user", "content": "q"}])
        finally:
            client.close()
        assert endpoint.served == 1 and len(endpoint.requests) == 2


# -- the reply rules the replay found ---------------------------------------------------------------


def test_react_action_line_is_the_whole_line() -> None:
    with pytest.raises(ValueError, match="unknown action 'Execute the script'"):
        react_parse("Thought: t\nAction: Execute the script\n<content>\n!ls\n", [Action.EXECUTE])
    assert (
        react_parse("Thought: t\nAction: execute <content>\n!ls\n", [Action.EXECUTE]).content
        == "!ls"
    )
    assert (
        react_parse("Thought: t\nAction: **execute**\n<content>\n!ls\n", [Action.EXECUTE]).action
        == "execute"
    )


def test_swe_takes_the_last_block_and_runs_an_edit_without_its_end_as_a_cell() -> None:
    thought, command = swe_parse("DISCUSSION\nfirst\n```\n!ls\n```\nthen\n```\n!pwd\n```")
    assert (command.name, command.body) == ("execute", "!pwd")
    assert "first" in thought and "!ls" in thought and "then" in thought
    assert parse_command("edit a.sh\nx = 1").name == "execute"
    assert parse_command("edit 3:5\nx = 1\nend_of_edit").name == "edit"


def test_swe_viewer_command_written_as_a_call_is_that_command_with_a_usage_error() -> None:
    command = parse_command('search_file("load")')
    assert command.name == "search_file" and command.malformed
    assert parse_command("open('a.txt').read()").name == "execute"  # Python's built-in
    shown = FileViewer(kernel=None).run(command)  # type: ignore[arg-type]
    assert shown.startswith("Error: `search_file` is a command") and "Usage: search_file" in shown


def test_replay_of_the_swe_masked_samples_keeps_a_submission_that_is_not_json() -> None:
    replay = replay_run(SWE_MASKED)
    robust = next(e for e in replay.episodes if e.task_id == "robust_prompt_classifier_cpu")
    assert robust.identical and robust.ours["submitted"] is True


# -- imported runs and the prompt check -----------------------------------------------------------


def test_a_run_import_trajectories_wrote_replays_too(tmp_path, capsys) -> None:
    assert cli.main(["import-trajectories", str(SWE_MASKED), "--out", str(tmp_path)]) == 0
    imported = tmp_path / SWE_MASKED.name
    assert (imported / "trajectories").is_dir()
    capsys.readouterr()
    assert cli.main(["replay-run", str(imported), "--json", str(tmp_path / "r.json")]) == 0
    assert "4 of 4 episodes identical" in capsys.readouterr().out
    replayed = json.loads((tmp_path / "r.json").read_text())[0]
    assert replayed["run"] == SWE_MASKED.name and len(replayed["episodes"]) == 4


def test_check_prompts_calls_the_prompt_check_with_the_prompt_file(tmp_path, capsys) -> None:
    from tests.support.reference_prompts import rebuild_prompt_yaml

    task = _first_submitting(EXPERT)
    folder = _copy_episode(EXPERT, task, tmp_path)
    assert cli.main(["replay-run", str(folder.parent), "--check-prompts"]) == 2
    assert "--check-prompts needs --prompts FILE" in capsys.readouterr().err
    prompts = rebuild_prompt_yaml(folder / "history.ipynb", tmp_path / "prompt.yaml")
    args = ["replay-run", str(folder.parent), "--check-prompts", "--prompts", str(prompts)]
    assert cli.main(args) == 0
    assert "prompt:" not in capsys.readouterr().out
    # a prompt file that is not the one the episode used: the check names the difference
    text = prompts.read_text()
    assert "Jupyter" in text
    prompts.write_text(text.replace("Jupyter", "Jupiter", 1))
    assert cli.main(args) == 1
    out = capsys.readouterr().out
    assert "1 of 1 episodes identical" in out and "  prompt: " in out and task in out


def test_a_documented_deviation_is_accepted_and_named(tmp_path, capsys, monkeypatch) -> None:
    from pytest_super.replay import deviations

    task = _first_submitting(EXPERT)
    folder = _copy_episode(EXPERT, task, tmp_path)
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["submitted"] = 0
    (folder / "metrics.json").write_text(json.dumps(metrics))
    entry = deviations.Deviation("example", "a test's own", EXPERT.name, (task,))
    monkeypatch.setattr(deviations, "DEVIATIONS", (entry,))
    assert cli.main(["replay-run", str(folder.parent)]) == 0
    out = capsys.readouterr().out
    assert f"{task}: submitted: ours True, published False [documented: example]" in out
    assert "0 of 1 episodes identical" in out


# -- the backend in a pytest run, like any other --------------------------------------------------


def test_a_pytest_run_with_the_replay_backend_passes_the_episode_it_replays(tmp_path) -> None:
    import yaml

    from tests.support.projects import make_project, only_run_dir, outcomes, run_pytest

    episode = next(
        e
        for e in read_run(EXPERT)
        if e.final_action and e.final_action.action == "submit" and len(e.steps) < 15
    )
    answer = json.loads(episode.final_action.content)  # type: ignore[union-attr]
    task = {"id": episode.task_id, "query": episode.query, "answer": answer}
    project = make_project(tmp_path / "p", {f"expert/{episode.task_id}": yaml.safe_dump(task)})
    with ReplayEndpoint() as endpoint:
        endpoint.play(episode_script(episode).replies)
        code, output = run_pytest(
            project,
            "tasks",
            "--super-backend=replay",
            "--super-agent=react-super",
            "--super-model=gpt-4o-2024-08-06",
            f"--super-base-url={endpoint.base_url}",
            "-p",
            "no:cacheprovider",
            env={RUN_VARIABLE: str(EXPERT), "SUPER_API_KEY": "replay-takes-any-key"},
        )
        served = endpoint.served
    assert code == 0, output[-3000:]
    assert outcomes(only_run_dir(project)) == {episode.task_id: "passed"}
    assert served == len(episode_script(episode).replies)


def test_a_run_of_another_agent_or_no_run_is_a_clear_error(tmp_path, capsys) -> None:
    task = _first_submitting(EXPERT)
    other = tmp_path / "gpt-4o-2024-08-06_reflexion_expert"
    shutil.copytree(EXPERT / task, other / task)
    assert cli.main(["replay-run", str(other)]) == 2
    assert "the run names the agent 'reflexion', not react-super" in capsys.readouterr().err
    assert cli.main(["replay-run", str(tmp_path / "nothing")]) == 2
    assert "nothing: no such folder" in capsys.readouterr().err
