#!/usr/bin/env python3
"""The requests SUPER's own ReAct agent sends in each published ReAct-SUPER episode, as test data.

    .venv/bin/python scripts/reference-requests.py UPSTREAM_CHECKOUT [--out FOLDER]

UPSTREAM_CHECKOUT: a checkout of allenai/super-benchmark (the commit in `UPSTREAM_COMMIT`), with
its `super/` package and its `trajectories/<run>/<task>/history.ipynb`. For every ReAct-SUPER run
there, each episode is driven through upstream's own `super.agent.agent.Agent`, imported from the
checkout (never copied): its constructor (limits, sampling parameters), `_build_prompt` (system
prompt, `Query:`, the history as one assistant message, truncation), `next_action` (the limit
checks before each call, then `call_model`: stop strings, temperature, top_p, max tokens) and
`step_completed` (pre-executed cells, execution times). Its model call is answered from the
recording: upstream's `generate_response` is replaced by one that records the request and returns
the reply the notebook shows (`Thought: ...`, `Action: ...`, content), with the usage the replay
plans (`pytest_super.replay.script.usage_plan`), so the token budget ends an episode where it
ended. Each step's history entry is then set to what the notebook recorded (its thought, action
and content, as `format_history_as_nb` wrote them from the agent's history), and its observation
is the notebook's (already cleaned by the agent that ran: cleaning is off here, not done twice).

The published runs were made by a later revision of `agent.py` than the pinned one in one
respect: a reply it could not parse became a step with an empty thought and action whose
observation is the correction message (the notebooks show it), where the pinned code retries in
a side conversation. Such a step is rebuilt as the notebook shows it, after the one call that
produced it. The system prompt is the one the notebooks record (the runs' prompt.yaml, rebuilt by
tests/support/reference_prompts.py), which differs from upstream's file at the pinned commit.

Writes `FOLDER/<run>.jsonl.xz` (default tests/data/super-reference/requests): a header line, then
one line per episode (`task_id`, `requests`). Each request's messages are delta-coded against the
message of the same index in the run's previous request (`[role, keep, add]`: the first `keep`
characters of that message, then `add`), which `pytest_super.replay.expected` decodes. The output
is deterministic: the same checkout gives the same bytes.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import json
import logging
import lzma
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_super.replay.compute_plan import TRUNCATED_SECOND  # noqa: E402
from pytest_super.replay.script import (  # noqa: E402
    DEFAULT_BUDGET,
    REFERENCE_BUDGETS,
    REFERENCE_COMPUTE_S,
    usage_plan,
)
from tests.support.reference_prompts import prompt_yaml_text, reference_fields  # noqa: E402

UPSTREAM_REPO = "allenai/super-benchmark"
UPSTREAM_COMMIT = "50cefd4c213fd8f88d28728ed87e4a20b43c91a3"
DEFAULT_OUT = ROOT / "tests" / "data" / "super-reference" / "requests"
#: the thoughts the notebooks give the steps the runner took before the model's first call
PRE_EXECUTED = "[pre-executed by user]"
CONTINUED = "[continued after timeout]"
#: the request fields kept per request (besides the messages)
PARAMETERS = ("stop", "temperature", "top_p", "max_tokens")


@dataclass
class NotebookStep:
    thought: str
    action: str
    content: str
    observation: str
    duration_s: float


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def read_notebook(path: Path) -> tuple[str, str, list[NotebookStep]]:
    """The query, the recorded system message and the steps of a published notebook, as upstream's
    `format_history_as_nb` wrote them (plus the later revision's execution-time cells)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    query = system = ""
    steps: list[NotebookStep] = []
    duration = 0.0
    thought = action = None
    for cell in cells:
        source = _text(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            if source.startswith("### Query\n"):
                query = source[len("### Query\n") :]
            elif source.startswith("### Prompt\n"):
                body = source[len("### Prompt\n<details>\n") : -len("\n</details>\n")]
                system = ast.literal_eval(body.strip())[0]["content"]
            elif source.startswith("Execution Start time:"):
                duration = float(source.rsplit("(duration: ", 1)[1].split(" ", 1)[0])
            elif source.startswith("**Thought**: "):
                thought = source[len("**Thought**: ") :]
            elif source.startswith("**Action (") and source.endswith(")**:"):
                action = source[len("**Action (") : -len(")**:")]
            continue
        outputs = cell.get("outputs") or [{}]
        observation = _text(outputs[0].get("data", {}).get("text/plain", ""))
        assert thought is not None and action is not None, f"{path}: a code cell before its step"
        steps.append(NotebookStep(thought, action, source, observation, duration))
        thought = action = None
        duration = 0.0
    return query, system, steps


def reply_text(step: NotebookStep) -> str:
    """The reply the notebook's step stands for (upstream's parser gives back its thought, action
    and content; the step's entry is set from the notebook anyway). A submission is shown in the
    notebook as the Python text of the object upstream parsed: the reply held it as JSON."""
    content = step.content
    if step.action == "submit":
        with contextlib.suppress(ValueError, SyntaxError):
            content = json.dumps(ast.literal_eval(content))
    return f"Thought: {step.thought}\nAction: {step.action}\n<content>\n{content}\n</content>"


def parses(upstream_parse: Any, text: str) -> bool:
    try:
        upstream_parse(text.strip())
    except ValueError:
        return False
    return True


class Recorder:
    """Upstream's `generate_response`, answered from the recording."""

    def __init__(self) -> None:
        self.replies: list[tuple[str, int]] = []
        self.requests: list[dict[str, Any]] = []

    def __call__(
        self,
        model_engine: str,
        prompt: list[dict[str, str]],
        stop_tokens: Any = None,
        max_output_tokens: int = 600,
        temperature: float = 0.2,
        top_p: float = 0.5,
    ) -> Any:
        self.requests.append(
            {
                "model": model_engine,
                "messages": [dict(m) for m in prompt],
                "stop": stop_tokens,
                "temperature": temperature,
                "top_p": top_p,
                "max_tokens": max_output_tokens,
            }
        )
        text, prompt_tokens = self.replies.pop(0)
        return types.SimpleNamespace(
            text=text.strip(), prompt_tokens=prompt_tokens, completion_tokens=1, cost=0.0
        )


def load_upstream(checkout: Path, recorder: Recorder) -> tuple[Any, Any, Any, Any]:
    """Upstream's `Agent`, `AgentStep`, `EnvironmentStep` and `parse_response`, imported from the checkout, with the model call
    replaced by `recorder` (upstream's llm_utils imports provider SDKs the replay does not need)."""
    sys.path.insert(0, str(checkout))
    llm_utils = types.ModuleType("super.agent.llm_utils")
    llm_utils.generate_response = recorder  # type: ignore[attr-defined]
    sys.modules["super.agent.llm_utils"] = llm_utils
    try:
        import nbformat  # noqa: F401
    except ImportError:  # used only by upstream's notebook writer, not called here
        sys.modules["nbformat"] = types.ModuleType("nbformat")
    from super.agent import agent as upstream_agent  # type: ignore[import-not-found]
    from super.env.environment import EnvironmentStep  # type: ignore[import-not-found]

    upstream_agent.generate_response = recorder
    return (
        upstream_agent.Agent,
        upstream_agent.AgentStep,
        EnvironmentStep,
        upstream_agent.parse_response,
    )


def is_harness_step(step: NotebookStep) -> bool:
    """A step the runner took, not the model: a pre-executed cell, or the wait after one."""
    return step.thought in (PRE_EXECUTED, CONTINUED)


def is_format_error(step: NotebookStep) -> bool:
    return step.thought == "" and step.action == ""


def drive_episode(
    upstream: tuple[Any, Any, Any, Any],
    recorder: Recorder,
    notebook: Path,
    *,
    set_name: str,
    prompt_yaml: Path,
    edit: bool = True,
) -> list[dict[str, Any]]:
    """The requests upstream's agent sends in one episode (see the module docstring)."""
    agent_class, agent_step, step_class, upstream_parse = upstream
    query, _, steps = read_notebook(notebook)
    budget = REFERENCE_BUDGETS.get(set_name, DEFAULT_BUDGET)
    agent = agent_class(
        query,
        "gpt-4o-2024-08-06",
        max_iterations=100,
        max_compute_time=int(REFERENCE_COMPUTE_S),
        max_context_tokens=budget,
        should_clean_observation=False,
        prompt_config_path=str(prompt_yaml),
        verbose=False,
        allow_edit=edit,  # False: ReAct without the edit tool (its action and demonstration)
        add_edit_prompt=edit,
    )
    chosen = [s for s in steps if not is_harness_step(s) and s.action != "exception"]
    ends_by_budget = any(s.action == "exception" and "context tokens" in s.content for s in steps)
    plan = usage_plan(len(chosen), budget, ends_by_budget=ends_by_budget)
    recorder.replies = [(reply_text(s), tokens) for s, tokens in zip(chosen, plan, strict=True)]
    recorder.requests = []
    start = datetime.datetime(2024, 1, 1)
    for step in steps:
        if step.action == "exception":
            action = agent.next_action()  # upstream's own limit check ends the episode here
            assert action["type"] == "exception", f"{notebook}: upstream's agent did not stop"
            break
        if step.thought == PRE_EXECUTED:
            pass  # step_completed adds it to the history itself, as upstream's runner does
        elif step.thought == CONTINUED:
            # the runs' revision waited once more for a pre-executed cell that ran out of time
            # (the pinned runner does not): the notebook's step, no model call
            agent.history.append(
                agent_step(step.thought, {"type": step.action, "content": step.content})
            )
        elif is_format_error(step) or not parses(upstream_parse, reply_text(step)):
            # the pinned revision would retry a reply it cannot parse in a side conversation;
            # the runs' revision made it one step (the notebook's): its one call, then that step
            agent.call_model(agent._build_prompt())
            agent.history.append(
                agent_step(step.thought, {"type": step.action, "content": step.content})
            )
        else:
            agent.next_action()
            agent.history[-1].thought = step.thought
            agent.history[-1].action = {"type": step.action, "content": step.content}
        # the notebooks cut each duration to whole seconds: the middle of the second that was
        # cut, as the replay kernel reports it (replay/compute_plan.py, TRUNCATED_SECOND)
        end = start + datetime.timedelta(seconds=step.duration_s + TRUNCATED_SECOND)
        action = {"type": step.action, "content": step.content}
        agent.step_completed(step_class(action, step.observation, False, start, end))
        start = end
    assert not recorder.replies, f"{notebook}: {len(recorder.replies)} recorded replies unasked"
    return recorder.requests


def encode(requests: list[dict[str, Any]], previous: list[str]) -> list[dict[str, Any]]:
    """Delta-code each request's messages against the run's previous request (`previous`: its
    message contents, updated in place)."""
    coded = []
    for request in requests:
        messages = []
        for i, message in enumerate(request["messages"]):
            before = previous[i] if i < len(previous) else ""
            keep = 0
            limit = min(len(before), len(message["content"]))
            while keep < limit and before[keep] == message["content"][keep]:
                keep += 1
            messages.append([message["role"], keep, message["content"][keep:]])
        previous[:] = [m["content"] for m in request["messages"]]
        coded.append({"messages": messages, **{k: request[k] for k in PARAMETERS}})
    return coded


def uses_edit(notebook: Path) -> bool:
    """Whether the model's actions in `notebook` include an edit (pre-executed steps aside)."""
    return any(s.action == "edit" and s.thought != PRE_EXECUTED for s in read_notebook(notebook)[2])


def write_run(
    run_dir: Path,
    out: Path,
    upstream: tuple[Any, Any, Any, Any],
    recorder: Recorder,
    *,
    edit: bool = True,
) -> Path:
    """The requests of every episode of `run_dir`; with `edit=False`, those upstream's `Agent`
    without the edit tool sends in the episodes whose model never edited, as the run
    `<model>_react_<set>` (ReAct: the same replies, another system prompt)."""
    set_name = run_dir.name.rsplit("_", 1)[1]
    notebooks = sorted(run_dir.glob("*/history.ipynb"))
    system = read_notebook(notebooks[0])[1]
    name = run_dir.name if edit else run_dir.name.replace("_react-super_", "_react_")
    if not edit:
        notebooks = [n for n in notebooks if not uses_edit(n)]
    lines = [
        json.dumps(
            {
                "run": name,
                "upstream": UPSTREAM_REPO,
                "commit": UPSTREAM_COMMIT,
                "regenerate": "python3 scripts/reference-requests.py UPSTREAM_CHECKOUT"
                + ("" if edit else " --no-edit"),
            }
        )
    ]
    previous: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        prompt_yaml = Path(scratch) / "prompt.yaml"
        prompt_yaml.write_text(prompt_yaml_text(reference_fields(system)), encoding="utf-8")
        for notebook in notebooks:
            requests = drive_episode(
                upstream, recorder, notebook, set_name=set_name, prompt_yaml=prompt_yaml, edit=edit
            )
            record = {"task_id": notebook.parent.name, "requests": encode(requests, previous)}
            lines.append(json.dumps(record, ensure_ascii=False))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.jsonl.xz"
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("upstream", type=Path, help="a checkout of " + UPSTREAM_REPO)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--no-edit",
        action="store_true",
        help="ReAct without the edit tool: the Expert episodes whose model never edited",
    )
    args = parser.parse_args()
    recorder = Recorder()
    logging.disable(logging.INFO)  # upstream logs every reply
    upstream = load_upstream(args.upstream.resolve(), recorder)
    runs = sorted((args.upstream / "trajectories").glob("*_react-super_*"))
    if args.no_edit:  # the Expert run: no pre-executed edits, so the model's own choice
        runs = [r for r in runs if r.name.endswith("_expert")]
    for run_dir in runs:
        path = write_run(run_dir, args.out, upstream, recorder, edit=not args.no_edit)
        print(f"{path}: {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
