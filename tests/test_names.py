"""The package's names: the actions a step records (`trajectory.Action`), the exit statuses
(`errors.ExitStatus`) and the status each error carries.

An action name is an `Action` member wherever the package records or compares one, and a member
is written as the bare string it names, so trajectories, notebooks and results stay the same
bytes and old trajectories read back compare equal. Every member is recognised by the code that
produces it (the agents' parsers, the steps recorded for malformed replies, limits, reflections
and published limit endings). Every error the package raises on purpose carries its exit status.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import pytest_super
from pytest_super.agents.history import ask_model, format_error_step
from pytest_super.agents.react import (
    HistoryEntry,
    ReActSuperAgent,
    parse_reply,
    render_history,
)
from pytest_super.agents.reflexion import ReflexionAgent
from pytest_super.agents.replay import REPLAYED
from pytest_super.agents.swe import INSTANCE_PROMPT
from pytest_super.agents.swe_commands import SPECIAL_COMMANDS, parse_command
from pytest_super.environment import AgentOptions
from pytest_super.errors import (
    BudgetExceeded,
    ComputeLimitReached,
    DiskLimitExceeded,
    EngineUnavailable,
    EnvironmentFault,
    EpisodeEnd,
    ExitStatus,
    FormatErrorsExceeded,
    HarnessError,
    ImageMissing,
    InfrastructureError,
    KernelBroken,
    KernelStartError,
    LLMError,
    LLMRefused,
    NetworkFault,
    ReportWriteError,
    StepLimitReached,
    SuperError,
    TaskFileError,
    TaskSetupError,
)
from pytest_super.live import live_printer
from pytest_super.published_runs import episode_record, read_episode
from pytest_super.runner import exit_status_of
from pytest_super.trajectory import NOT_ACTIONS, Action, Step, Trajectory, load_trajectory

PACKAGE = Path(pytest_super.__file__).parent


# -- actions --------------------------------------------------------------------------------------


def test_an_action_is_the_string_it_names():
    assert len({a.value for a in Action}) == len(Action.__members__)  # no aliases
    for action in Action:
        assert action == action.value and hash(action) == hash(action.value)
        assert str(action) == f"{action}" == format(action) == action.value
        assert json.dumps({"action": action}) == json.dumps({"action": action.value})
        assert json.dumps(action, indent=1) == json.dumps(action.value)
        assert action.value in {action} and action in {action.value}


def _react_reply(action: Action) -> Action:
    content = '{"answer": 1}' if action is Action.SUBMIT else "x"
    text = f"Thought: t\nAction: {action.value}\n<content>\n{content}\n</content>"
    return parse_reply(text, ReActSuperAgent().actions(running=True)).action


#: a command block per SWE-agent command that is not a notebook cell
SWE_COMMANDS = {
    Action.OPEN: "open f.py",
    Action.GOTO: "goto 3",
    Action.SCROLL_UP: "scroll_up",
    Action.SCROLL_DOWN: "scroll_down",
    Action.CREATE: "create f.py",
    Action.SEARCH_DIR: "search_dir needle",
    Action.SEARCH_FILE: "search_file needle",
    Action.FIND_FILE: "find_file f.py",
    Action.EDIT: "edit 1:2\nx = 1\nend_of_edit",
    Action.SUBMIT: 'submit {"answer": 1}',
    Action.WAIT: "continue_wait",
    Action.INTERRUPT: "interrupt",
}


class _LimitEnv:
    """Just enough of an Environment for `ask_model` to end on a limit and record its step."""

    def __init__(self, end: EpisodeEnd) -> None:
        self.end = end
        self.llm = object()
        self.trajectory = SimpleNamespace(agent="react")
        self.recorded: list[Step] = []

    def check_compute(self) -> None:
        if isinstance(self.end, ComputeLimitReached):
            raise self.end

    def check_budget(self, budget: int | None) -> None:
        if isinstance(self.end, BudgetExceeded):
            raise self.end

    def record(self, step: Step) -> None:
        self.recorded.append(step)


def _limit_step(end: EpisodeEnd) -> Action | str:
    env = _LimitEnv(end)
    with pytest.raises(type(end)):
        ask_model(env, [])  # an Environment in all but name
    (step,) = env.recorded
    return step.action


class _ReflectingEnv:
    """Just enough of an Environment for Reflexion to ask for a plan and record it."""

    task = SimpleNamespace(query="q", pre_executed=[])
    prefix_steps: list[Step] = []
    options = AgentOptions()

    def __init__(self) -> None:
        completion = SimpleNamespace(
            text="Plan: try again [END]",
            prompt_tokens=1,
            completion_tokens=1,
            cached_prompt_tokens=0,
            cost_usd=0.0,
        )
        self.llm = SimpleNamespace(complete=lambda messages, stop=None: completion)
        self.trajectory = SimpleNamespace(agent="reflexion")
        self.recorded: list[Step] = []

    def check_compute(self) -> None:
        pass

    def check_budget(self, budget: int | None) -> None:
        pass

    def count_tokens(self, *counts: object) -> None:
        pass

    def record(self, step: Step) -> None:
        self.recorded.append(step)


def _reflection_step() -> Action | str:
    env = _ReflectingEnv()
    ReflexionAgent().reflect(env, [], None)
    (step,) = env.recorded
    return step.action


def _published_limit_step(tmp_path: Path) -> Action | str:
    """The last step of a published ReAct-SUPER episode that ended on its token budget."""
    folder = tmp_path / "published" / "demo"
    folder.mkdir(parents=True)
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "### Query\nq"},
        {"cell_type": "markdown", "metadata": {}, "source": "### Step 1"},
        {"cell_type": "markdown", "metadata": {}, "source": "**Action (exception)**:"},
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": "Total context tokens exceeded.",
        },
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "history.ipynb").write_text(json.dumps(notebook))
    (folder / "metrics.json").write_text(json.dumps({"submitted": 0}))
    episode = read_episode(folder, model="m", agent="react-super", set_name="expert")
    assert episode_record(episode).properties["exit_status"] == ExitStatus.BUDGET_EXCEEDED
    assert episode.final_action is not None
    return episode.final_action.action


def test_every_action_is_recognised_where_it_is_made(tmp_path):
    made: dict[Action, Action | str] = {}
    # ReAct-SUPER's reply parser, while a cell runs (every action it knows is allowed)
    for action in ReActSuperAgent().actions(running=True):
        made[action] = _react_reply(action)
    # SWE-agent's command parser: its commands, and anything else as a notebook cell
    for action, text in SWE_COMMANDS.items():
        assert parse_command(text).name is action
        made[action] = parse_command(text).name
    made[Action.EXECUTE] = parse_command("!ls").name
    # the steps that are not actions
    made[Action.FORMAT_ERROR] = format_error_step("no format", "say it again").action
    made[Action.BUDGET] = _limit_step(BudgetExceeded("budget"))
    made[Action.COMPUTE] = _limit_step(ComputeLimitReached("compute"))
    made[Action.REFLECTION] = _reflection_step()
    made[Action.LIMIT] = _published_limit_step(tmp_path)
    assert set(made) == set(Action), f"no recogniser for {set(Action) - set(made)}"
    for action, got in made.items():
        assert got is action, f"{action.value}: got {got!r}"


def test_the_action_sets_are_made_of_members():
    assert set(SPECIAL_COMMANDS) == set(SWE_COMMANDS) - {Action.WAIT, Action.INTERRUPT}
    not_actions = {Action.FORMAT_ERROR, Action.BUDGET, Action.COMPUTE, Action.REFLECTION}
    assert not_actions | {Action.LIMIT} == NOT_ACTIONS
    assert all(isinstance(a, Action) for a in (*REPLAYED, *SPECIAL_COMMANDS, *NOT_ACTIONS))
    assert not NOT_ACTIONS & {*REPLAYED, *SPECIAL_COMMANDS}


def test_every_action_is_named_in_the_package():
    named: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "trajectory.py" and path.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        named |= {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "Action"
        }
    assert set(Action.__members__) <= named, set(Action.__members__) - named


def test_no_step_is_recorded_with_a_bare_action_name():
    """`Step(action="submit")` in the package would record a loose string: members are used."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Step")):
                continue
            values = [k.value for k in node.keywords if k.arg == "action"] + node.args[1:2]
            if any(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in values):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found


def test_trajectory_notebook_history_and_live_view_show_the_bare_names(tmp_path, capsys):
    trajectory = Trajectory(path=tmp_path / "t.json", task_id="t", query="q", agent="a")
    trajectory.save()
    for action in Action:
        trajectory.append(Step(thought="because", action=action, content="c", observation="o"))
    trajectory.save()
    notebook = trajectory.save_notebook().read_text()
    written = json.loads(trajectory.path.read_text())
    assert [s["action"] for s in written["steps"]] == [a.value for a in Action]
    read_back = load_trajectory(trajectory.path).steps
    assert [s.action for s in read_back] == list(Action)  # plain strings, equal to the members
    for action in Action:
        assert f"**{action.value}**" in notebook
    assert "Action." not in notebook

    history = render_history([HistoryEntry("t", a, "c", "o") for a in Action])
    for action in Action:
        assert f"Action: {action.value}\n" in history
    assert "Action." not in history

    config = SimpleNamespace(pluginmanager=SimpleNamespace(getplugin=lambda name: None))
    show = live_printer(config, "t")
    for action in Action:
        show(Step(thought="because", action=action, content="c"))
        printed = capsys.readouterr().err
        assert f"[t] {action.value}: because" in printed
        assert "Action." not in printed


def test_prompts_name_the_actions_as_before():
    by_name = INSTANCE_PROMPT.format(
        query="q", cell_timeout="300", interrupt="interrupt", wait="continue_wait"
    )
    by_member = INSTANCE_PROMPT.format(
        query="q", cell_timeout="300", interrupt=Action.INTERRUPT, wait=Action.WAIT
    )
    assert by_member == by_name
    names = " | ".join(ReActSuperAgent().actions(running=True))
    assert names == "execute | edit | submit | continue_wait | interrupt"


# -- exit statuses and errors ---------------------------------------------------------------------


def test_exit_statuses_are_unique_and_complete():
    values = [s.value for s in ExitStatus]
    assert len(values) == len(set(values)) == len(ExitStatus.__members__)
    assert {"timeout", "worker_crashed", "task_error", "harness_error"} <= set(values)
    assert ExitStatus.TIMEOUT == "timeout" and ExitStatus.WORKER_CRASHED == "worker_crashed"
    for status in ExitStatus:
        assert str(status) == f"{status}" == status.value
        assert json.dumps(status) == json.dumps(status.value)


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def _import_modules_defining_errors() -> None:
    """Import the package's modules that define a `SuperError` (not only errors.py)."""
    names = {"SuperError"} | {c.__name__ for c in _subclasses(SuperError)}
    sources = {
        path: ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))
    }
    imported: set[Path] = set()
    while True:
        more = False
        for path, tree in sources.items():
            if path in imported:
                continue
            classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
            bases = {ast.unparse(b).rsplit(".", 1)[-1] for c in classes for b in c.bases}
            if bases & names:
                module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
                importlib.import_module(module.removesuffix(".__init__"))
                imported.add(path)
                names |= {c.name for c in classes}
                more = True
        if not more:
            return


#: the status of every error of errors.py, as results.jsonl and JUnit report it
EXPECTED = {
    TaskFileError: ExitStatus.TASK_ERROR,
    TaskSetupError: ExitStatus.TASK_ERROR,
    InfrastructureError: ExitStatus.KERNEL_ERROR,
    EngineUnavailable: ExitStatus.KERNEL_ERROR,
    ImageMissing: ExitStatus.KERNEL_ERROR,
    KernelStartError: ExitStatus.KERNEL_ERROR,
    LLMError: ExitStatus.LLM_ERROR,
    LLMRefused: ExitStatus.LLM_ERROR,  # inherited: the most specific class's status wins
    HarnessError: ExitStatus.HARNESS_ERROR,
    ReportWriteError: ExitStatus.HARNESS_ERROR,
    BudgetExceeded: ExitStatus.BUDGET_EXCEEDED,
    StepLimitReached: ExitStatus.STEP_LIMIT,
    ComputeLimitReached: ExitStatus.COMPUTE_LIMIT,
    FormatErrorsExceeded: ExitStatus.FORMAT_ERRORS,
    DiskLimitExceeded: ExitStatus.DISK_LIMIT,
    KernelBroken: ExitStatus.KERNEL_ERROR,
    EnvironmentFault: ExitStatus.ENVIRONMENT_ERROR,
    NetworkFault: ExitStatus.NETWORK_ERROR,
}


def test_every_error_carries_its_exit_status():
    _import_modules_defining_errors()
    errors = _subclasses(SuperError) + _subclasses(EpisodeEnd)
    assert set(EXPECTED) <= set(errors)
    for cls in errors:
        error = cls.__new__(cls)  # without its constructor's arguments
        assert isinstance(
            cls.exit_status if issubclass(cls, SuperError) else cls.status, ExitStatus
        )
        assert exit_status_of(error) is error.exit_status, cls
        if cls in EXPECTED:
            assert exit_status_of(error) is EXPECTED[cls], cls
    # every error of errors.py that reaches the runner is in the table
    runner_errors = [InfrastructureError, *_subclasses(InfrastructureError), TaskSetupError]
    assert {c for c in runner_errors if c.__module__ == "pytest_super.errors"} <= set(EXPECTED)


def test_exit_status_of_other_exceptions_and_agents_own_endings():
    class OwnEnding(EpisodeEnd):  # an agent of another project ends an episode its own way
        status = ExitStatus.FORMAT_ERRORS

    class Both(LLMError, HarnessError):  # the first base's status comes first in the MRO
        pass

    assert exit_status_of(OwnEnding("x")) is ExitStatus.FORMAT_ERRORS
    assert exit_status_of(Both("x")) is ExitStatus.LLM_ERROR
    assert exit_status_of(ValueError("a bug")) is ExitStatus.HARNESS_ERROR
    assert exit_status_of(TaskFileError("t.yaml", "bad")) is ExitStatus.TASK_ERROR
    assert exit_status_of(ReportWriteError("t.json", OSError(28, "No space"))) is (
        ExitStatus.HARNESS_ERROR
    )
