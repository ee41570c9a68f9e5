#!/usr/bin/env python3
"""The requests the paper's SWE-agent sends in each published SWE-agent episode, as test data.

    .venv/bin/python scripts/reference-requests-swe.py SWE_AGENT_CHECKOUT SUPER_CHECKOUT [--out DIR]

SWE_AGENT_CHECKOUT: a checkout of SWE-agent (github.com/SWE-agent/SWE-agent, formerly
princeton-nlp/SWE-agent) at `SWE_AGENT_COMMIT`, release v0.6.1 (19 June 2024): the last release
before the paper's runs (gpt-4o-2024-08-06, released 6 August 2024; the paper, 11 September
2024). SUPER_CHECKOUT: a checkout of allenai/super-benchmark with `trajectories/<run>/<task>/
history.ipynb` (the commit of scripts/reference-requests.py); its `trajectories-sample/` runs (the
four SWE-agent Masked samples) are written as `<run>-samples.jsonl.xz`.

SUPER's adaptation of SWE-agent was not released. What its notebooks show is kept, and where they
are silent SWE-agent's own code and configuration at the pin decide:

- the system message: the notebooks' `### System Prompt`, verbatim (the same in all 45). It is
  SWE-agent's `system_template` with the command docs filled in by SWE-agent's own mechanism: the
  unfilled `{WINDOW}` in the scroll docstrings and scroll_up's "down" are defaults.sh's at the pin,
  and "shows you 100 lines" is `{WINDOW}` of the system template filled with `WINDOW: 100`;
- no demonstration: the notebooks show none (the pin's config adds a bash demonstration of a
  SWE-bench issue, which contradicts the notebook interface the system prompt describes);
- the instance message, each observation's message, the no-output message: the pin's
  `config/default.yaml` `instance_template`, `next_step_template` and
  `next_step_no_output_template`, read from the checkout (never copied), `{issue}` the task's
  query, with the state prompt the notebooks' system prompt describes (`In [ ]` where the shell
  config has `bash-$`);
- the history: the pin's `Agent` itself, imported from the checkout, builds it: `setup` (system
  message), `forward` / `forward_model` (the template chosen by the previous observation, the
  reply appended as it came), `local_history` (the configured history processor of
  default.yaml, `Last5Observations`), and `OpenAIModel.history_to_messages`;
- the state prompt's values: SWE-agent's `state` command prints `CURRENT_FILE` (set by `open` and
  `create`; the viewer's `[File: <path> (N lines total)]` header names it) and the working
  directory (a `%cd` cell prints the one it moves to); `n/a` and `/content` at the start;
- the pre-executed steps of a Masked episode (SUPER's own adaptation, unpublished, so derived
  from the notebooks): each is a turn of the pin's history made by the pin's `forward` like a
  model step, sending no request: the reply is the notebook's thought (stripped) and code cell
  verbatim in SWE-agent's reply layout (`DISCUSSION`, the thought, the cell in a ``` block; an
  edit as the notebooks write it, `EDITING ...` with the thought `EXECUTED BY USER`, the
  runner's wait as `continue_wait` with `[continued after timeout]`), its observation the
  notebook's through `next_step_template` with the state prompt; the task's message has the
  state at the start;
- the call's parameters: SWE-agent's model call sends no stop strings. The pin's model layer
  cannot call gpt-4o-2024-08-06 (not in its model table), so the paper's calls went through
  SUPER's harness: temperature 0.2, top_p 0.5, max_tokens 1500, as its ReAct calls.

The pin's `Agent` constructor is not run (it builds a model client and parses the command files
for the shell): the object gets the configuration above, and every method that builds a request
is the pin's own. Each reply is the one the replay endpoint serves (`pytest_super.replay.script.swe_reply`), and
each observation the notebook's. An episode ended by the token budget (`exit_context`) or the
compute limit (`exit_max_compute_time`) sends no request for that step. Writes `DIR/<run>.jsonl.xz` (default tests/data/super-reference/requests)
in the format of scripts/reference-requests.py (deterministic).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import lzma
import re
import sys
import types
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_super.agents.swe import directory_after, open_file_after  # noqa: E402
from pytest_super.published_runs import read_run  # noqa: E402
from pytest_super.replay.script import swe_reply  # noqa: E402
from pytest_super.trajectory import Action, Step  # noqa: E402

SWE_AGENT_REPO = "SWE-agent/SWE-agent"
SWE_AGENT_COMMIT = "5f42dc840617b4ba1ce5b679d4a55d5dac2f2a75"  # tag v0.6.1
#: the published SWE-agent runs: the Expert run whole, the Masked run's samples
RUN_FOLDERS = {"trajectories": "*_swe-agent_*", "trajectories-sample": "*_swe-agent_*"}
#: the file name of a folder of samples' requests: `<run>-samples.jsonl.xz`
SAMPLES_SUFFIX = "-samples"
#: the state at an episode's start: no open file, the notebook's directory
START_STATE = {"open_file": "n/a", "working_dir": "/content"}
#: SUPER's harness's sampling, the paper's for every agent (see the module docstring)
SAMPLING = {"stop": None, "temperature": 0.2, "top_p": 0.5, "max_tokens": 1500}
SHELL_PROMPT, NOTEBOOK_PROMPT = "bash-$", "In [ ]"
THOUGHT = "**Thought**: "


def _react_script() -> types.ModuleType:
    """scripts/reference-requests.py (its notebook reader and its encoding)."""
    spec = importlib.util.spec_from_file_location(
        "reference_requests", ROOT / "scripts" / "reference-requests.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _stub(name: str, **attributes: Any) -> None:
    module = types.ModuleType(name)
    for key, value in attributes.items():
        setattr(module, key, value)
    sys.modules[name] = module


class _Flattened:
    """simple_parsing's bases of the pin's argument classes: nothing of them is used here."""


class _Serializable:
    pass


class _FrozenSerializable:
    pass


def _field(*args: Any, cmd: bool = True, **kwargs: Any) -> Any:
    """simple_parsing's `field`: a dataclass field (`cmd` is about its command line)."""
    return dataclasses.field(*args, **kwargs)


def load_sweagent(checkout: Path) -> types.SimpleNamespace:
    """The pin's `Agent`, `AgentConfig`, history processors, parser and `OpenAIModel`, imported
    from `checkout`; the SDKs and the Docker environment they import are stubbed (unused here)."""
    _stub("simple_parsing")
    _stub("simple_parsing.helpers")
    _stub("simple_parsing.helpers.fields", field=_field)
    _stub("simple_parsing.helpers.flatten", FlattenedAccess=_Flattened)
    _stub("simple_parsing.helpers.serialization")
    _stub(
        "simple_parsing.helpers.serialization.serializable",
        FrozenSerializable=_FrozenSerializable,
        Serializable=_Serializable,
    )
    tenacity = {n: (lambda *a, **k: lambda f: f) for n in ("retry",)}
    tenacity.update(
        {
            n: (lambda *a, **k: None)
            for n in (
                "retry_if_not_exception_type",
                "stop_after_attempt",
                "wait_random_exponential",
            )
        }
    )
    _stub("tenacity", RetryError=RuntimeError, **tenacity)
    _stub("together")
    _stub("anthropic", AI_PROMPT="", HUMAN_PROMPT="", Anthropic=object, AnthropicBedrock=object)
    _stub("openai", AzureOpenAI=object, BadRequestError=RuntimeError, OpenAI=object)
    _stub("sweagent.utils.config", keys_config={}, convert_paths_to_abspath=lambda p: p)
    _stub("sweagent.utils.log", get_logger=logging.getLogger, default_logfile_level=None)
    _stub("sweagent.environment.swe_env", SWEEnv=object)
    sys.path.insert(0, str(checkout))
    from sweagent.agent import agents, history_processors, models, parsing  # type: ignore

    return types.SimpleNamespace(
        Agent=agents.Agent,
        AgentConfig=agents.AgentConfig,
        HistoryProcessor=history_processors.HistoryProcessor,
        ParseFunction=parsing.ParseFunction,
        OpenAIModel=models.OpenAIModel,
    )


class Recorder:
    """The model the pin's agent queries: answers from the recording, keeps each request."""

    def __init__(self, to_messages: Any) -> None:
        self.args = types.SimpleNamespace(model_name="gpt-4o-2024-08-06")
        self.replies: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.pre_executed = False
        self._to_messages = to_messages

    def reset_stats(self, *_: Any) -> None:
        pass

    def history_to_messages(
        self, history: list[dict[str, Any]], is_demonstration: bool = False
    ) -> Any:
        return self._to_messages(self, history, is_demonstration)

    def query(self, history: list[dict[str, Any]]) -> str:
        if not self.pre_executed:  # a pre-executed step's "reply" is the runner's, not a call
            self.requests.append({"messages": self.history_to_messages(history), **SAMPLING})
        return self.replies.pop(0)


def make_agent(
    sweagent: types.SimpleNamespace, checkout: Path, system: str, recorder: Recorder
) -> Any:
    """The pin's `Agent`, configured as the module docstring says (its templates from the
    checkout's config/default.yaml, the system message the notebooks show)."""
    config_file = yaml.safe_load((checkout / "config" / "default.yaml").read_text(encoding="utf-8"))
    defaults = {f.name: f.default for f in dataclasses.fields(sweagent.AgentConfig)}
    parse_function = sweagent.ParseFunction.get(config_file["parse_function"])

    def notebook(template: str) -> str:
        assert template.endswith(SHELL_PROMPT), "the pin's templates end in the shell prompt"
        return template[: -len(SHELL_PROMPT)] + NOTEBOOK_PROMPT

    config = types.SimpleNamespace(
        system_template=system.replace("{", "{{").replace("}", "}}"),
        instance_template=notebook(config_file["instance_template"]),
        next_step_template=notebook(config_file["next_step_template"]),
        next_step_no_output_template=notebook(config_file["next_step_no_output_template"]),
        strategy_template=None,
        demonstrations=[],
        demonstration_template=None,
        put_demos_in_history=False,
        history_processor=sweagent.HistoryProcessor.get(config_file["history_processor"]),
        parse_function=parse_function,
        format_error_template=parse_function.format_error_template,
        blocklist=defaults["blocklist"],
        blocklist_standalone=defaults["blocklist_standalone"],
        blocklist_error_template=defaults["blocklist_error_template"],
        _commands=[],
        subroutine_types=[],
    )
    agent = sweagent.Agent.__new__(sweagent.Agent)
    agent.name, agent.config, agent.model, agent.hooks = "primary", config, recorder, []
    agent.system_args = dict(config_file["env_variables"])
    agent.logger = logging.getLogger("sweagent")
    agent.history = []
    return agent


def pre_executed_replies(notebook: Path, count: int) -> list[str]:
    """The first `count` steps of a notebook (the pre-executed ones), as the turns of SWE-agent's
    history they stand for: the notebook's thought (stripped) and code cell, verbatim, in SWE-agent's reply
    layout (the discussion, then the command in a ``` block), as a model step's reply is rebuilt
    (`swe_reply`). SUPER's adaptation that put them in the history was not released: this is
    derived from the notebooks (docs/fidelity.md)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    replies: list[str] = []
    thought: str | None = None
    for cell in cells:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown" and source.startswith(THOUGHT):
            # stripped, as the importer strips a model step's: two of the four samples end their
            # last pre-executed thought with a blank line, a third does not (notebook layout)
            thought = source[len(THOUGHT) :].strip()
        elif cell["cell_type"] == "code" and len(replies) < count:
            assert thought is not None, f"{notebook}: a code cell before its thought"
            replies.append(swe_reply(Step(thought=thought, action=Action.EXECUTE, content=source)))
            thought = None
    assert len(replies) == count, f"{notebook}: fewer steps than the pre-executed ones"
    return replies


def drive_episode(agent: Any, recorder: Recorder, episode: Any) -> list[dict[str, Any]]:
    """The requests the pin's agent sends in one published episode; the pre-executed steps (a
    Masked episode's) are turns of its history that send no request."""
    recorder.requests = []
    agent.setup({"issue": episode.query})
    state = dict(START_STATE)
    observation: str | None = None
    prefix = sum(s.pre_executed for s in episode.steps)
    rebuilt = pre_executed_replies(episode.folder / "history.ipynb", prefix)
    for number, step in enumerate(episode.steps):
        if step.action == Action.LIMIT:
            break  # the budget or the compute limit refused the call: no request
        recorder.replies = [rebuilt[number] if step.pre_executed else swe_reply(step)]
        recorder.pre_executed = step.pre_executed
        agent.forward(observation, [], json.dumps(state))
        assert not recorder.replies, f"{episode.folder}: the agent did not take the reply"
        if step.action == Action.SUBMIT:
            break
        observation = step.observation
        state = {
            "open_file": open_file_after(step, state["open_file"]),
            "working_dir": directory_after(step, state["working_dir"]),
        }
    return recorder.requests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "swe_agent", type=Path, help=f"a checkout of {SWE_AGENT_REPO} at {SWE_AGENT_COMMIT}"
    )
    parser.add_argument("super", type=Path, help="a checkout of allenai/super-benchmark")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "tests" / "data" / "super-reference" / "requests"
    )
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the pin's agent logs every message
    react = _react_script()
    sweagent = load_sweagent(args.swe_agent.resolve())
    for run_dir in _runs(args.super):
        episodes = read_run(run_dir)
        notebooks = sorted(run_dir.glob("*/history.ipynb"))
        systems = {_system_prompt(n) for n in notebooks}
        assert len(systems) == 1, f"{run_dir}: the episodes show different system prompts"
        recorder = Recorder(sweagent.OpenAIModel.history_to_messages)
        agent = make_agent(sweagent, args.swe_agent, systems.pop(), recorder)
        header = {
            "run": run_dir.name,
            "upstream": SWE_AGENT_REPO,
            "commit": SWE_AGENT_COMMIT,
            "notebooks": f"{react.UPSTREAM_REPO}@{react.UPSTREAM_COMMIT}",
            "regenerate": "python3 scripts/reference-requests-swe.py SWE_AGENT_CHECKOUT SUPER_CHECKOUT",
        }
        lines = [json.dumps(header)]
        previous: list[str] = []
        for episode in sorted(episodes, key=lambda e: e.task_id):
            requests = drive_episode(agent, recorder, episode)
            record = {"task_id": episode.task_id, "requests": react.encode(requests, previous)}
            lines.append(json.dumps(record, ensure_ascii=False))
        args.out.mkdir(parents=True, exist_ok=True)
        suffix = SAMPLES_SUFFIX if run_dir.parent.name == "trajectories-sample" else ""
        path = args.out / f"{run_dir.name}{suffix}.jsonl.xz"
        data = ("\n".join(lines) + "\n").encode("utf-8")
        path.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
        print(f"{path}: {path.stat().st_size:,} bytes, {len(episodes)} episodes")
    return 0


def _runs(super_checkout: Path) -> list[Path]:
    """The SWE-agent runs of `super_checkout` (a folder of samples counts as a run)."""
    return sorted(
        r for f, pattern in RUN_FOLDERS.items() for r in (super_checkout / f).glob(pattern)
    )


_SYSTEM = re.compile(r"\A### System Prompt\n<details>\n(.*)\n</details>\n?\Z", re.DOTALL)


def _system_prompt(notebook: Path) -> str:
    """The system message a SWE-agent notebook's first cell shows."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    source = cells[0]["source"]
    text = "".join(source) if isinstance(source, list) else source
    found = _SYSTEM.match(text)
    assert found is not None, f"{notebook}: the first cell is not the system prompt"
    return found[1]


if __name__ == "__main__":
    sys.exit(main())
