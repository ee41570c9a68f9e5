"""The mutation suite (issue 43 item 5): single changes to our agents, each applied to our real
code or prompt by monkeypatching, must each make `pytest-super replay-run` exit 1 and name the
episode and the turn (a request) or step where it shows. A mutation that goes unnoticed fails.

Each replays only the few episodes that exercise it, with the reference's prompts and expected
requests (tests/support/reference_requests.py), in process (`cli.main`). No containers, no network.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_super import cli, defaults, runner
from pytest_super.agents import history, react, swe
from pytest_super.agents.base import AgentResult, ExitStatus
from pytest_super.agents.history import RunningCell
from pytest_super.agents.react import ReActAgent
from pytest_super.environment import Environment
from pytest_super.errors import BudgetExceeded
from pytest_super.prompts import PromptSet
from tests.support.published_data import published_runs
from tests.support.reference_requests import (
    EXPECTED,
    REACT_RUNS,
    SWE_RUN,
    reference_prompt_dir,
    swe_reference_prompt_dir,
)

EXPERT, MASKED = REACT_RUNS
SWE_EXPERT = SWE_RUN
#: the episodes each mutation replays: short ones with what the mutation touches
SHORT = (MASKED, "amrbart_goal")  # 3 calls: a prefix, a format error, a submission
TEN = (EXPERT, "mera")  # 10 calls
WAIT = (MASKED, "colbert_dependencies")  # a continue_wait without content
WORDS = (MASKED, "data_label_alignment_configuration")  # `Action: Execute the script ...`
COMPUTE = (MASKED, "g-transformer_configuration,cpu")  # ended by the compute limit
BUDGET = (MASKED, "acqsurvey_dependencies")  # ended by the token budget
TWO_BLOCKS = (SWE_EXPERT, "colbert")
SWE_SHORT = (SWE_EXPERT, "mera")  # 11 calls: cells, viewer commands, a `%cd`, a submission
SWE_QUIET = (SWE_EXPERT, "quantifying-stereotypes-in-language")  # a cell that printed nothing
TIMED_OUT = (
    MASKED,
    "logme-nlp_configuration",
)  # a cell that timed out, then another cell  # a SWE-agent reply whose discussion holds a code block


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return reference_prompt_dir(tmp_path_factory.mktemp("reference-prompts"))


@pytest.fixture(scope="module")
def swe_prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return swe_reference_prompt_dir(tmp_path_factory.mktemp("swe-reference-prompts"))


def replay(
    episode: tuple[str, str],
    prompt_file: Path,
    capsys: Any,
    *extra: str,
    swe_prompts: Path | None = None,
) -> tuple[int, str]:
    """replay-run of one episode with the reference's prompts of its agent (the SWE-agent's
    folder for the SWE-agent run) and its expected requests, plus `extra` arguments."""
    run, task = episode
    args = ["replay-run", str(published_runs() / run), "--task", task, *extra]
    if run in EXPECTED:
        prompts = swe_prompts if run == SWE_EXPERT and swe_prompts is not None else prompt_file
        args += ["--prompts", str(prompts), "--expected-requests", str(EXPECTED[run])]
    code = cli.main(args)
    return code, capsys.readouterr().out


# -- the mutations -------------------------------------------------------------------------------
def _wrap(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, change: Callable[..., Any]):
    original = getattr(owner, name)
    monkeypatch.setattr(owner, name, lambda *a, **k: change(original(*a, **k)))


def prompt_word(mp: pytest.MonkeyPatch, prompt_file: Path) -> None:
    text = prompt_file.read_text()
    assert " notebook" in text
    mp.setattr(
        PromptSet, "react_system", _changed(PromptSet.react_system, " notebook", " workbook")
    )


def _changed(method: Callable[..., str], old: str, new: str) -> Callable[..., str]:
    return lambda *a, **k: method(*a, **k).replace(old, new, 1)


def query_task(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(PromptSet, "react_query", _changed(PromptSet.react_query, "Query:", "Task:"))


def query_text(mp: pytest.MonkeyPatch, _: Path) -> None:
    original = PromptSet.react_query
    mp.setattr(PromptSet, "react_query", lambda self, q: original(self, q.replace(" ", "  ", 1)))


def helpful_assistant(mp: pytest.MonkeyPatch, _: Path) -> None:
    original = ReActAgent.prompt_messages

    def messages(*a: Any, **k: Any) -> list[dict[str, str]]:
        found = original(*a, **k)
        return [{"role": "system", "content": "You are a helpful assistant."}, *found[1:]]

    mp.setattr(ReActAgent, "prompt_messages", messages)


def no_truncation(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(react, "truncate_history", list)


def earlier_20(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(history, "EARLIER_CHARS", 20)


def latest_100(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(history, "LATEST_CHARS", 100)


def oldest_dropped(mp: pytest.MonkeyPatch, _: Path) -> None:
    _wrap(mp, react, "history_entries", lambda entries: entries[1:])


def reversed_observations(mp: pytest.MonkeyPatch, _: Path) -> None:
    _wrap(mp, react, "truncate_history", lambda observations: observations[::-1])


def no_stop(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(react, "STOP", [])


def extra_stop(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(react, "STOP", [*react.STOP, "\nThought:"])


def empty_thoughts(mp: pytest.MonkeyPatch, _: Path) -> None:
    _wrap(mp, react, "parse_reply", lambda r: react.Reply("", r.action, r.content))


def content_required(mp: pytest.MonkeyPatch, _: Path) -> None:
    # a stricter `Action:` line: the name must be followed by the `<content>` tag
    pattern = r"^Action:[ \t]*([a-z_]+)()\n(?=<content>)"
    mp.setattr(react, "_ACTION_LINE", re.compile(pattern, re.M))


def first_word(mp: pytest.MonkeyPatch, _: Path) -> None:
    # the action is the line's first word (`Action: Execute the script` executes)
    mp.setattr(react, "_ACTION_LINE", re.compile(r"^Action:[ \t]*([A-Za-z_]+)()[^\n]*$", re.M))


def budget_at_or_above(mp: pytest.MonkeyPatch, _: Path) -> None:
    def check_budget(self: Environment, budget: int | None = None) -> None:
        budget = self.limits.token_budget if budget is None else budget
        if self.prompt_tokens >= budget:
            raise BudgetExceeded(f"token budget exceeded: {self.prompt_tokens} of {budget}")

    mp.setattr(Environment, "check_budget", check_budget)


def budget_larger(mp: pytest.MonkeyPatch, _: Path) -> None:
    original = Environment.check_budget
    mp.setattr(
        Environment,
        "check_budget",
        lambda self, budget=None: original(self, int((budget or self.limits.token_budget) * 1.02)),
    )


def compute_larger(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(defaults, "COMPUTE_LIMIT_S", defaults.COMPUTE_LIMIT_S * 1.1)


def steps_5(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(defaults, "STEPS", 5)


def _steps_moved(mp: pytest.MonkeyPatch, by: int) -> None:
    # the step-limit check moved: the agents check `taken >= limit + by`
    original = runner.episode_limits

    def limits(*a: Any, **k: Any) -> Any:
        found = original(*a, **k)
        return dataclasses.replace(found, steps=found.steps + by)

    mp.setattr(runner, "episode_limits", limits)


def steps_check_later(mp: pytest.MonkeyPatch, _: Path) -> None:
    _steps_moved(mp, 5)


def steps_check_earlier(mp: pytest.MonkeyPatch, _: Path) -> None:
    _steps_moved(mp, -5)


def submit_text(mp: pytest.MonkeyPatch, _: Path) -> None:
    def changed(r: react.Reply) -> react.Reply:
        if r.action != react.Action.SUBMIT:
            return r
        return react.Reply(r.thought, r.action, json.dumps({"extra": 1, **json.loads(r.content)}))

    _wrap(mp, react, "parse_reply", changed)


def scored_strings(mp: pytest.MonkeyPatch, _: Path) -> None:
    # the submission scored becomes strings; the submit step's text stays as it was
    def changed(result: AgentResult) -> AgentResult:
        if result.exit_status is not ExitStatus.SUBMITTED or result.submission is None:
            return result
        value = json.loads(result.submission)
        strings = {k: str(v) for k, v in value.items()} if isinstance(value, dict) else str(value)
        return AgentResult(result.exit_status, json.dumps(strings))

    _wrap(mp, ReActAgent, "run_attempt", changed)


def cd_prepended(mp: pytest.MonkeyPatch, _: Path) -> None:
    original = RunningCell.run
    mp.setattr(
        RunningCell, "run", lambda self, env, code: original(self, env, "%cd /content\n" + code)
    )


def interrupt_always(mp: pytest.MonkeyPatch, _: Path) -> None:
    original = RunningCell.interrupt_before

    def interrupt_before(self: RunningCell, env: Environment, action: Any) -> Any:
        if not self.running and action not in (react.Action.WAIT, react.Action.INTERRUPT):
            env.interrupt()
        return original(self, env, action)

    mp.setattr(RunningCell, "interrupt_before", interrupt_before)


def no_auto_interrupt(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(RunningCell, "interrupt_before", lambda self, env, action: None)


def swe_first_block(mp: pytest.MonkeyPatch, _: Path) -> None:
    original = swe.parse_reply

    def first(text: str, *a: Any, **k: Any) -> Any:
        blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.DOTALL)
        if len(blocks) > 1:  # keep only the first block
            text = text[: text.index("```", text.index("```") + 3) + 3]
        return original(text, *a, **k)

    mp.setattr(swe, "parse_reply", first)


def swe_no_history(mp: pytest.MonkeyPatch, _: Path) -> None:
    # the system message and the task's message only, every turn
    _wrap(mp, swe.SWEAgent, "_messages", lambda messages: messages[:2])


def swe_stop_added(mp: pytest.MonkeyPatch, _: Path) -> None:
    # the reference's SWE-agent sends none (emptying ours changes nothing: it is empty)
    mp.setattr(swe, "STOP_STRINGS", ["\n(Open file:"])


def swe_system_word(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(PromptSet, "swe_system", _changed(PromptSet.swe_system, " notebook", " workbook"))


def swe_state_line(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(swe, "_state_prompt", lambda open_file, cwd: f"(Open file: {open_file or 'n/a'})")


def swe_all_observations(mp: pytest.MonkeyPatch, _: Path) -> None:
    # SWE-agent's history processor removed: every observation shown whole
    mp.setattr(swe, "last_observations", list)


def swe_four_observations(mp: pytest.MonkeyPatch, _: Path) -> None:
    mp.setattr(swe, "SHOWN_OBSERVATIONS", 4)


def swe_no_output_silent(mp: pytest.MonkeyPatch, _: Path) -> None:
    # an empty observation shown empty instead of SWE-agent's no-output message
    mp.setattr(swe, "NO_OUTPUT", "")


#: (mutation, the episode it is replayed on, what the first difference names)
MUTATIONS: list[tuple[Callable[[pytest.MonkeyPatch, Path], None], tuple[str, str], str]] = [
    (prompt_word, SHORT, "request 1: message 0 (system)"),
    (query_task, SHORT, "request 1: message 1 (user), character 0"),
    (query_text, SHORT, "request 1: message 1 (user)"),
    (helpful_assistant, SHORT, "request 1: message 0 (system), character 0"),
    (no_truncation, SHORT, "request 1: message 2 (assistant)"),
    (earlier_20, SHORT, "request 1: message 2 (assistant)"),
    (latest_100, SHORT, "request 2: message 2 (assistant)"),
    (oldest_dropped, SHORT, "request 1: message 2 (assistant)"),
    (reversed_observations, SHORT, "request 1: message 2 (assistant)"),
    (no_stop, SHORT, "request 1: stop"),
    (extra_stop, SHORT, "request 1: stop"),
    (empty_thoughts, SHORT, "step "),
    (content_required, WAIT, "request "),
    (first_word, WORDS, "request 23: message 2 (assistant)"),
    (budget_at_or_above, SHORT, "request 3"),
    (budget_larger, BUDGET, "request "),
    (compute_larger, COMPUTE, "request "),
    (steps_5, TEN, "request 6"),
    (steps_check_later, TEN, "request 8: an extra request"),
    (steps_check_earlier, TEN, "request 3: ours (none)"),
    (submit_text, SHORT, "step "),
    (scored_strings, SHORT, "scored submission"),
    (cd_prepended, SHORT, "request 2: message 2 (assistant)"),
    (interrupt_always, SHORT, "kernel: ours before step "),
    (no_auto_interrupt, TIMED_OUT, "kernel: ours before step "),
    (swe_first_block, TWO_BLOCKS, "request 34: message 67 (user)"),
    (swe_no_history, SWE_SHORT, "request 2: message 2 (assistant), character 0"),
    (swe_stop_added, SWE_SHORT, "request 1: stop"),
    (swe_system_word, SWE_SHORT, "request 1: message 0 (system)"),
    (swe_state_line, SWE_SHORT, "request 1: message 1 (user)"),
    (swe_all_observations, SWE_SHORT, "request 7: message 3 (user)"),
    (swe_four_observations, SWE_SHORT, "request 6: message 3 (user)"),
    (swe_no_output_silent, SWE_QUIET, "request 27: message 53 (user), character 0"),
]


#: the run settings a mutation is replayed under (replay-run's options): the step-limit check is
#: tested with a limit below the episode's 10 model calls, which no published episode reaches
SETTINGS = {"steps_check_later": ("--steps", "7"), "steps_check_earlier": ("--steps", "7")}


@pytest.mark.parametrize(
    ("mutate", "episode", "named"), MUTATIONS, ids=[m[0].__name__ for m in MUTATIONS]
)
def test_each_mutation_fails_the_replay_naming_episode_and_turn(
    mutate, episode, named, prompt_file, swe_prompts, monkeypatch, capsys
) -> None:
    extra = SETTINGS.get(mutate.__name__, ())
    code, printed = replay(episode, prompt_file, capsys, *extra, swe_prompts=swe_prompts)
    assert code == 0, f"the unchanged agent must replay {episode[1]} identically:\n{printed}"
    mutate(monkeypatch, prompt_file)
    code, printed = replay(episode, prompt_file, capsys, *extra, swe_prompts=swe_prompts)
    first = printed.splitlines()[1] if len(printed.splitlines()) > 1 else printed
    assert code == 1, f"{mutate.__name__} went unnoticed:\n{printed}"
    assert first.startswith(f"  {episode[1]}: "), printed
    assert named in first, printed


def test_a_run_step_limit_ends_a_longer_episode_at_it(prompt_file, capsys, tmp_path) -> None:
    """Under `--steps 7` the 10-call episode ends by the step limit after its 7th step, as the
    reference's loop of 7 iterations ends it: our agent and the cut episode agree on each of the 7
    requests, the steps and the exit status; an episode that fits is replayed as recorded."""
    out = tmp_path / "replay.json"
    code, printed = replay(TEN, prompt_file, capsys, "--steps", "7", "--json", str(out))
    assert code == 0, printed
    assert "7 of 7 requests identical to the reference agent's" in printed
    (episode,) = json.loads(out.read_text())[0]["episodes"]
    assert episode["ours"]["exit_status"] == episode["published"]["exit_status"] == "step_limit"
    assert episode["ours"]["steps"] == episode["published"]["steps"] == 7
    assert episode["ours"]["submitted"] is False
    code, printed = replay(SHORT, prompt_file, capsys, "--steps", "7")
    assert code == 0 and "3 of 3 requests identical" in printed, printed
    with pytest.raises(SystemExit) as info:
        cli.main(["replay-run", str(published_runs() / TEN[0]), "--steps", "0"])
    assert info.value.code == 2
    assert "--steps: '0' is not a whole number of 1 or more" in capsys.readouterr().err
