"""Pins the ReAct-family agents end to end: a real local kernel, a real HTTP model endpoint.

react, react-super, reflexion and replay run against `openai_server` (scripted replies) and a
kernel from `start_local_kernel`; the Environment is built here as the runner would build it.
Also: history truncation and cleaning, the agent registry.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from pytest_super.agents import AGENT_NAMES, load_agent, needs_llm
from pytest_super.agents.base import (
    BudgetExceeded,
    ComputeLimitReached,
    Environment,
    EpisodeLimits,
    ExitStatus,
    FormatErrorsExceeded,
    StepLimitReached,
)
from pytest_super.agents.history import clean_observation, truncate_history
from pytest_super.agents.react import (
    STOP,
    ReActAgent,
    ReActSuperAgent,
    parse_reply,
)
from pytest_super.agents.reflexion import ReflexionAgent, parse_plan
from pytest_super.agents.replay import ReplayAgent
from pytest_super.environment import AgentOptions
from pytest_super.errors import LLMError
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.local import start_local_kernel
from pytest_super.llm import LLMClient, LLMSettings, api_key_from_env
from pytest_super.runner import replay_prefix_cells
from pytest_super.tasks import Cell, Task
from pytest_super.trajectory import Trajectory, load_trajectory
from tests.support.openai_server import Status

QUERY = 'Compute six times seven. Report it as a json structured as follows: {"answer": 0}'
KEY = "sk-test-key-that-must-not-leak-7f3a9c"


def reply(action: str, content: str = "", thought: str = "I act.") -> str:
    """A reply as a model writes it (the server cuts it at the `</content>` stop string)."""
    return f"Thought: {thought}\nAction: {action}\n<content>\n{content}\n</content>\nObservation:"


SUBMIT_42 = reply("submit", '{"answer": 42}', "The answer is 42.")


@pytest.fixture
def make_env(tmp_path, openai_server):
    """Build Environments as the runner does: local kernel, trajectory in tmp_path, small limits."""
    kernels = []
    clients = []

    def new_kernel():
        kernel = start_local_kernel(KernelSettings(backend="local"), task_id="demo")
        kernels.append(kernel)
        return kernel

    def make(
        agent: str = "react",
        *,
        steps: int = 10,
        token_budget: int = 1_000_000,
        cell_timeout_s: float = 30.0,
        format_errors: int | None = None,
        options: dict | None = None,
        cache_dir: str | None = None,
        api_key: str | None = KEY,
        pre_executed: tuple[Cell, ...] = (),
        run: str = "run",
        with_llm: bool = True,
    ) -> Environment:
        task = Task(id="demo", set="expert", query=QUERY, pre_executed=pre_executed)
        trajectory = Trajectory(
            path=tmp_path / run / "demo.json",
            task_id="demo",
            query=QUERY,
            agent=agent,
            model="gpt-4o",
        )
        llm = None
        if with_llm:
            settings = LLMSettings(
                model="gpt-4o",
                base_url=openai_server.base_url,
                api_key=api_key,
                cache_dir=cache_dir,
            )
            llm = LLMClient(settings, sleep=lambda seconds: None)
            clients.append(llm)
        limits = EpisodeLimits(
            steps=steps,
            token_budget=token_budget,
            compute_s=300,
            cell_timeout_s=cell_timeout_s,
            format_errors=format_errors,
        )
        env = Environment(
            task, new_kernel(), trajectory, limits, llm=llm, new_kernel=new_kernel, options=options
        )
        replay_prefix_cells(env)
        return env

    make.kernels = kernels
    yield make
    for kernel in kernels:
        kernel.close()
    for llm in clients:
        llm.close()


def agent_steps(env: Environment):
    return [s for s in env.trajectory.steps if not s.pre_executed]


# -- the happy path --------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", [ReActAgent(), ReActSuperAgent()], ids=lambda a: a.name)
def test_executes_then_submits(make_env, openai_server, agent):
    env = make_env(agent.name)
    openai_server.script([reply("execute", "x = 6 * 7\nprint(x)", "I compute it."), SUBMIT_42])
    result = agent.run(env)
    assert result.exit_status is ExitStatus.SUBMITTED
    assert json.loads(result.submission) == {"answer": 42}

    first, second = openai_server.requests
    assert first.body["stop"] == STOP
    roles = [m["role"] for m in first.messages]
    assert roles == ["system", "user"]
    assert first.messages[1]["content"] == f"Query: {QUERY}"
    assert ("edit" in first.messages[0]["content"]) is (agent.name == "react-super")
    history = second.messages[-1]
    assert history["role"] == "assistant"
    assert history["content"] == (
        "Thought: I compute it.\nAction: execute\n<content>\nx = 6 * 7\nprint(x)\n</content>\n"
        "Observation: ```\n42\n\n```\n"
    )

    execute, submit = agent_steps(env)
    assert (execute.action, execute.code, execute.cell_status) == (
        "execute",
        "x = 6 * 7\nprint(x)",
        "ok",
    )
    assert execute.output == "42\n" and execute.observation == "42\n"  # as printed
    assert execute.prompt_tokens > 0 and execute.completion_tokens > 0 and execute.cost_usd > 0
    assert (submit.action, submit.content) == ("submit", '{"answer": 42}')
    assert env.prompt_tokens == execute.prompt_tokens + submit.prompt_tokens
    saved = load_trajectory(env.trajectory.path)
    assert [s.action for s in saved.steps] == ["execute", "submit"]


def test_pre_executed_steps_lead_the_history(make_env, openai_server):
    env = make_env(pre_executed=(Cell(kind="execute", code="print('set up')"),))
    openai_server.script([SUBMIT_42])
    assert ReActAgent().run(env).exit_status is ExitStatus.SUBMITTED
    history = openai_server.requests[0].messages[-1]["content"]
    # the reference's words and layout: the output as printed, trailing line break included
    assert history == (
        "Thought: [pre-executed by user]\nAction: execute\n<content>\nprint('set up')\n"
        "</content>\nObservation: ```\nset up\n\n```\n"
    )


# -- replies not in the format -----------------------------------------------------------------------


def test_format_errors_stay_in_the_history_and_end_nothing_by_default(make_env, openai_server):
    env = make_env()
    bad = [
        "I will just print it: print(42)",  # no Thought/Action
        reply("submit", "{answer: 42}"),  # not JSON
        reply("dance", "print(2)"),  # unknown action
        "Thought: hmm\nAction: execute\n",  # no <content>
    ]
    openai_server.script([*bad, reply("execute", "print(1)"), SUBMIT_42])
    assert ReActAgent().run(env).exit_status is ExitStatus.SUBMITTED  # 4 in a row: no end
    requests = openai_server.requests
    assert len(requests) == 6
    actions = [s.action for s in agent_steps(env)]
    assert actions == ["format_error"] * 4 + ["execute", "submit"]
    # the trajectory keeps the replies (as the endpoint sent them: cut at the stop string)
    assert [s.content for s in agent_steps(env)[:4]] == [b.split("</content>")[0] for b in bad]
    # the model sees each as a step with an empty thought and action, and what to fix
    history = requests[5].messages[-1]["content"]
    assert history.count("Thought: \nAction: \n<content>\n\n</content>\nObservation: ```\n") == 4
    assert (
        "no `Action:` line" in history
        and "`Action: <execute | submit | continue_wait | interrupt>`" in history
    )
    assert "not valid JSON" in history and "unknown action 'dance'" in history
    assert "I will just print it" not in history  # the bad reply itself is not shown
    assert len(requests[1].messages) == 3  # system, query, history: no extra correction turn


def test_format_error_cap_is_an_option(make_env, openai_server):
    env = make_env(format_errors=3)
    openai_server.script(["no format", reply("execute", "print(1)"), "x", "y", "z", SUBMIT_42])
    with pytest.raises(FormatErrorsExceeded):
        ReActAgent().run(env)
    assert len(openai_server.requests) == 5  # the good reply in between reset the count


def test_format_errors_count_against_the_step_limit(make_env, openai_server):
    env = make_env(steps=3)
    openai_server.script(["no format"] * 3 + [SUBMIT_42])
    with pytest.raises(StepLimitReached):
        ReActAgent().run(env)
    assert len(openai_server.requests) == 3


def test_react_has_no_edit_action(make_env, openai_server):
    env = make_env()
    openai_server.script(
        [reply("edit", "f.py\n<<<BEFORE_EDIT>>>\na\n<<<AFTER_EDIT>>>\nb"), SUBMIT_42]
    )
    assert ReActAgent().run(env).exit_status is ExitStatus.SUBMITTED
    assert "unknown action 'edit'" in openai_server.requests[1].messages[-1]["content"]


def test_parse_reply_tolerates_missing_closing_tag_and_extras():
    actions = ["execute", "submit"]
    got = parse_reply("Thought: go\nAction: execute\n<content>\n!ls -la\n", actions)
    assert (got.thought, got.action, got.content) == ("go", "execute", "!ls -la")
    got = parse_reply(
        '**Thought:** two\nlines\n**Action:** submit\n<content>\n{"a": 1}\n</content>\nObservation: x',
        actions,
    )
    assert (got.thought, got.action, got.content) == ("two\nlines", "submit", '{"a": 1}')
    with pytest.raises(ValueError, match="continue_wait"):
        parse_reply("Thought: wait\nAction: continue_wait\n", actions)
    got = parse_reply("Thought: wait\nAction: continue_wait\n", [*actions, "continue_wait"])
    assert (got.action, got.content) == ("continue_wait", "")


# -- limits ----------------------------------------------------------------------------------------


def test_token_budget_is_checked_before_each_call_and_the_crossing_reply_acted_on(
    make_env, openai_server
):
    env = make_env()
    first_prompt = sum(len(m["content"]) for m in ReActAgent().messages(env, [])) // 4
    env = make_env(token_budget=first_prompt + 10, run="run2")
    openai_server.script(
        [reply("execute", "print(1)"), reply("execute", "print('crossed')"), SUBMIT_42]
    )
    with pytest.raises(BudgetExceeded):
        ReActAgent().run(env)
    assert len(openai_server.requests) == 2  # the second call crossed the budget: no third
    steps = agent_steps(env)
    # the reply of the call that crossed it was acted on, then the episode ended
    assert [s.action for s in steps] == ["execute", "execute", "budget_exceeded"]
    assert steps[1].output == "crossed\n"
    assert "token budget exceeded" in steps[2].observation
    assert sum(s.prompt_tokens for s in steps) == env.prompt_tokens > first_prompt + 10


def test_token_budget_reached_exactly_is_not_exceeded(make_env, openai_server):
    env = make_env()
    first_prompt = sum(len(m["content"]) for m in ReActAgent().messages(env, [])) // 4
    env = make_env(token_budget=first_prompt, run="run2")
    openai_server.script([reply("execute", "print(1)"), SUBMIT_42])
    assert ReActAgent().run(env).exit_status is ExitStatus.SUBMITTED  # only above the budget ends
    assert agent_steps(env)[0].prompt_tokens == first_prompt  # the budget was reached exactly
    assert len(openai_server.requests) == 2


def test_compute_limit_lets_the_cell_finish_then_ends_before_the_next_call(make_env, openai_server):
    env = make_env(cell_timeout_s=30.0)
    env.limits = dataclasses.replace(env.limits, compute_s=0.5)
    openai_server.script(
        [reply("execute", "import time; time.sleep(1.5); print('finished')"), SUBMIT_42]
    )
    with pytest.raises(ComputeLimitReached):
        ReActAgent().run(env)
    steps = agent_steps(env)
    assert [s.action for s in steps] == ["execute", "compute_limit"]
    assert steps[0].cell_status == "ok" and steps[0].output == "finished\n"  # not cut at 0.5 s
    assert len(openai_server.requests) == 1  # no call after the limit: no submission


def test_step_limit(make_env, openai_server):
    env = make_env(steps=2)
    openai_server.script([reply("execute", "print(1)"), reply("execute", "print(2)"), SUBMIT_42])
    with pytest.raises(StepLimitReached):
        ReActAgent().run(env)
    assert len(openai_server.requests) == 2
    assert [s.action for s in agent_steps(env)] == ["execute", "execute"]


# -- the endpoint --------------------------------------------------------------------------------


def test_rate_limit_is_retried(make_env, openai_server):
    env = make_env()
    openai_server.script([Status(429, {"Retry-After": "0"}), SUBMIT_42])
    assert ReActAgent().run(env).exit_status is ExitStatus.SUBMITTED
    assert len(openai_server.requests) == 2
    assert openai_server.requests[0].body == openai_server.requests[1].body


def test_unauthorized_raises_at_once(make_env, openai_server):
    env = make_env()
    openai_server.script([Status(401), SUBMIT_42])
    with pytest.raises(LLMError, match="401"):
        ReActAgent().run(env)
    assert len(openai_server.requests) == 1


def test_api_key_leaks_nowhere(make_env, openai_server, monkeypatch, tmp_path):
    monkeypatch.setenv("SUPER_API_KEY", KEY)
    env = make_env(api_key=api_key_from_env(), cache_dir=str(tmp_path / "llm-cache"))
    openai_server.script(
        [
            reply(
                "execute", "import os\nprint(sorted(v for v in os.environ.values() if 'sk-' in v))"
            ),
            SUBMIT_42,
        ]
    )
    ReActSuperAgent().run(env)
    env.trajectory.save_notebook()
    assert agent_steps(env)[0].output == "[]\n"  # the kernel does not see it either
    for request in openai_server.requests:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in request.raw
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".ipynb" for p in files) and any("llm-cache" in str(p) for p in files)
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path


# -- the edit tool -----------------------------------------------------------------------------------


def test_edit_feedback_reaches_the_model(make_env, openai_server):
    env = make_env("react-super")
    write = "with open('calc.py', 'w') as f:\n    f.write('def f():\\n    return 1\\n')"
    openai_server.script(
        [
            reply("execute", write),
            reply("edit", "calc.py\n<<<BEFORE_EDIT>>>\nreturn 1\n<<<AFTER_EDIT>>>\nreturn 42"),
            reply(
                "edit", "calc.py\n<<<BEFORE_EDIT>>>\n    return 1\n<<<AFTER_EDIT>>>\n    return 42"
            ),
            reply("execute", "import calc\nprint(calc.f())"),
            SUBMIT_42,
        ]
    )
    assert ReActSuperAgent().run(env).exit_status is ExitStatus.SUBMITTED
    after_bad_edit = openai_server.requests[2].messages[-1]["content"]
    assert "whitespace differs" in after_bad_edit
    assert "'    return 1'" in after_bad_edit  # the file's line, whitespace shown
    after_good_edit = openai_server.requests[3].messages[-1]["content"]
    assert "Edit was successful" in after_good_edit
    steps = agent_steps(env)
    assert [s.cell_status for s in steps[1:3]] == ["error", "ok"]
    assert steps[3].output == "42\n"


def test_malformed_edit_shows_the_format(make_env, openai_server):
    env = make_env("react-super")
    openai_server.script([reply("edit", "calc.py\nreturn 1\nreturn 2"), SUBMIT_42])
    ReActSuperAgent().run(env)
    seen = openai_server.requests[1].messages[-1]["content"]
    assert "Malformed edit" in seen and "<<<BEFORE_EDIT>>>" in seen


# -- cells that time out ---------------------------------------------------------------------------------


SLOW = "import time\nprint('started', flush=True)\ntime.sleep(30)"


def test_timeout_then_interrupt(make_env, openai_server):
    env = make_env(cell_timeout_s=1)
    openai_server.script(
        [
            reply("execute", SLOW),
            reply("interrupt"),
            reply("execute", "print('alive')"),
            SUBMIT_42,
        ]
    )
    assert ReActAgent().run(env).exit_status is ExitStatus.SUBMITTED
    told = openai_server.requests[1].messages[-1]["content"]
    assert "started" in told and "still running" in told
    assert "`continue_wait`" in told and "`interrupt`" in told
    execute, interrupt, alive, _ = agent_steps(env)
    assert (execute.cell_status, interrupt.action) == ("timeout", "interrupt")
    assert "KeyboardInterrupt" in interrupt.output
    assert alive.output == "alive\n"
    assert env.compute_used_s < 25  # interrupted after its 1 s, not the sleep's own 30 s


def test_timeout_then_continue_wait(make_env, openai_server):
    env = make_env(cell_timeout_s=2)
    openai_server.script(
        [
            reply("execute", "import time\ntime.sleep(3)\nprint('finished')"),
            reply("continue_wait"),
            SUBMIT_42,
        ]
    )
    assert ReActAgent().run(env).exit_status is ExitStatus.SUBMITTED
    execute, wait, _ = agent_steps(env)
    assert execute.cell_status == "timeout" and wait.action == "continue_wait"
    assert wait.cell_status == "ok" and "finished" in wait.output
    assert "finished" in openai_server.requests[2].messages[-1]["content"]


def test_other_action_interrupts_a_running_cell_first(make_env, openai_server):
    env = make_env(cell_timeout_s=1)
    openai_server.script([reply("execute", SLOW), reply("execute", "print('next')"), SUBMIT_42])
    assert ReActAgent().run(env).exit_status is ExitStatus.SUBMITTED
    actions = [(s.action, s.cell_status) for s in agent_steps(env)]
    assert [a for a, _ in actions] == ["execute", "interrupt", "execute", "submit"]
    assert actions[0][1] == "timeout" and actions[2][1] == "ok"
    told = openai_server.requests[2].messages[-1]["content"]
    assert "The cell was interrupted" in told and "KeyboardInterrupt" in told
    assert agent_steps(env)[2].output == "next\n"


def test_wait_and_interrupt_when_nothing_runs_are_answered_as_the_reference_takes_them(
    make_env, openai_server
):
    # the reference takes `continue_wait` and `interrupt` at any time (a published episode waits
    # on a cell whose output had come back): an idle kernel answers at once, with nothing
    env = make_env()
    openai_server.script([reply("continue_wait"), reply("interrupt"), SUBMIT_42])
    assert ReActAgent().run(env).exit_status is ExitStatus.SUBMITTED
    steps = agent_steps(env)
    assert [s.action for s in steps] == ["continue_wait", "interrupt", "submit"]
    assert steps[0].observation == "No cell is running, so there is nothing to continue_wait."
    assert "nothing to interrupt" in openai_server.requests[2].messages[-1]["content"]


# -- history ---------------------------------------------------------------------------------------------


def test_truncate_history_rules():
    long = "".join(str(i % 10) for i in range(2000))
    huge = "y" * 60_000
    out = truncate_history([long, "short", long, huge])
    assert out[0] == "(truncated) ... " + long[-500:] and out[2] == out[0]
    assert out[1] == "short"
    assert out[3] == "... (truncated) ..." + huge[-50_000:]  # the reference's two markers
    assert truncate_history([long]) == [long]  # the latest keeps up to 50,000
    assert truncate_history([]) == []
    assert truncate_history(["x" * 500, "z"]) == ["x" * 500, "z"]  # exactly 500: untouched


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        # git's counters with a one- or two-digit percent go, 100% stays
        (
            "Cloning into 'x'...\nResolving deltas:  42% (6865/6929)\nResolving deltas: 100% (1/1)\n",
            "Cloning into 'x'...\nResolving deltas: 100% (1/1)\n",
        ),
        ("Downloading model.bin 12.3 MB/s\nok\n", "\nok\n"),  # speed lines are emptied
        ("\x1b[31mred\x1b[0m \x1b[K\n", "red \x1b[K\n"),  # colour codes only
        ("text\n  1% [====   ]   1064960 / 104223768\nnext\n", "textnext\n"),  # wget bars
        ("x86_64-linux-gnu-gcc -c foo.c\nbuilt\n", "built\n"),  # compiler chatter
        (
            "  (dense): Linear(in_features=768, out_features=768)\n  (LayerNorm): LayerNorm()\n"
            "  (dropout): Dropout(p=0.1)\nend",
            "end",
        ),
        ("Downloading https://x.org/a.bin 45%\nkeep\n", "keep\n"),
        ("a\rb\r\nc\n", "a\nb\nc\n"),  # carriage returns become line breaks
        ("gcc on the last line, no line break", "gcc on the last line, no line break"),
        ("", ""),
    ],
)
def test_clean_observation_drops_the_references_noise(raw, clean):
    assert clean_observation(raw) == clean


def test_clean_observation_is_linear_on_long_lines():
    started = time.perf_counter()
    clean_observation(("x" * 2_000_000 + ": 5% (1/2)" + "\n") * 3)
    # the regexes as whole-text patterns take minutes here: a bound far from the linear figure
    assert time.perf_counter() - started < 60


def test_empty_output_is_shown_empty(make_env, openai_server):
    env = make_env()
    openai_server.script([reply("execute", "x = 1"), SUBMIT_42])
    ReActAgent().run(env)
    assert (
        "<content>\nx = 1\n</content>\nObservation: ```\n\n```\n"
        in (openai_server.requests[1].messages[-1]["content"])
    )


def test_model_sees_truncated_history(make_env, openai_server):
    env = make_env()
    openai_server.script(
        [
            reply("execute", "print(''.join(str(i % 10) for i in range(2000)))"),
            reply("execute", "print('b' * 600)"),
            SUBMIT_42,
        ]
    )
    ReActAgent().run(env)
    history = openai_server.requests[2].messages[-1]["content"]
    digits = "".join(str(i % 10) for i in range(2000))
    assert f"Observation: ```\n(truncated) ... {digits[-499:]}\n\n```" in history
    assert f"Observation: ```\n{'b' * 600}\n\n```" in history
    assert digits[:600] not in history


# -- reflexion -------------------------------------------------------------------------------------


def test_reflexion_reflects_and_starts_a_new_attempt(make_env, openai_server):
    env = make_env("reflexion", options=AgentOptions(attempts=2), steps=2)
    openai_server.script(
        [
            reply("execute", "marker = 'attempt one'\nprint(marker)"),
            "garbage",  # attempt 1 ends: the step limit
            "Let me think. Plan: compute 6*7 directly, then submit it. [END]",
            reply("execute", "print('marker' in dir())"),
            SUBMIT_42,
        ]
    )
    result = ReflexionAgent().run(env)
    assert result.exit_status is ExitStatus.SUBMITTED
    assert env.attempt == 2 and len(make_env.kernels) == 2
    reflection_request = openai_server.requests[2]
    assert "garbage" not in reflection_request.messages[1]["content"]
    assert "attempt one" in reflection_request.messages[1]["content"]
    second_attempt = openai_server.requests[3]
    assert "compute 6*7 directly, then submit it." in second_attempt.messages[1]["content"]
    assert len(second_attempt.messages) == 2  # a fresh history
    steps = env.trajectory.steps
    reflection = next(s for s in steps if s.action == "reflection")
    assert reflection.content == "compute 6*7 directly, then submit it."
    assert reflection.prompt_tokens > 0
    fresh = [s for s in steps if s.attempt == 2 and s.action == "execute"]
    assert fresh[0].output == "False\n"  # a new kernel: the first attempt's variable is gone


def test_reflexion_gives_each_attempt_a_share_of_the_budget(make_env, openai_server):
    probe = make_env()
    first_prompt = sum(len(m["content"]) for m in ReActSuperAgent().messages(probe, [])) // 4
    share = 4 * first_prompt  # room for about four calls per attempt
    env = make_env(
        "reflexion", options=AgentOptions(attempts=2), token_budget=2 * share, run="run2"
    )
    # every reply works both as an action and as a reflection
    openai_server.script([reply("execute", "print(1)", "Plan: keep going")] * 40)
    with pytest.raises(BudgetExceeded):
        ReflexionAgent().run(env)
    steps = env.trajectory.steps
    assert env.attempt == 2  # attempt 1 stopped at its share, leaving room for attempt 2
    assert [s.attempt for s in steps if s.action == "reflection"] == [1]
    assert sum(s.prompt_tokens for s in steps) == env.prompt_tokens
    first_attempt = [s for s in steps if s.attempt == 1 and s.action != "reflection"]
    assert first_attempt[-1].action == "budget_exceeded"
    used = sum(s.prompt_tokens for s in first_attempt)
    assert share <= used < 2 * share  # ended by its share, not by the whole budget


def test_parse_plan():
    assert parse_plan("thinking... Plan: do A, then B.") == "do A, then B."
    assert parse_plan("**Plan**:\n1. x\n2. y\n[END] trailing") == "1. x\n2. y"
    assert parse_plan("just text") == "just text"


# -- replay and cache ------------------------------------------------------------------------------------


def test_replay_reruns_a_saved_trajectory(make_env, openai_server, tmp_path):
    env = make_env("react-super", cell_timeout_s=2)
    openai_server.script(
        [
            reply("execute", "with open('n.txt', 'w') as f:\n    f.write('6')"),
            reply("edit", "n.txt\n<<<BEFORE_EDIT>>>\n6\n<<<AFTER_EDIT>>>\n7"),
            reply("execute", "import time\ntime.sleep(3)\nprint(6 * int(open('n.txt').read()))"),
            reply("continue_wait"),
            "not in the format",
            SUBMIT_42,
        ]
    )
    original = ReActSuperAgent().run(env)
    requests = len(openai_server.requests)

    replay_env = make_env(
        "replay",
        options=AgentOptions(replay_path=str(tmp_path / "run")),
        run="replayed",
        with_llm=False,
        cell_timeout_s=2,
    )
    result = ReplayAgent().run(replay_env)
    assert result == original
    assert len(openai_server.requests) == requests
    old = [s for s in agent_steps(env) if s.action != "format_error"]
    new = agent_steps(replay_env)
    assert [s.action for s in new] == [s.action for s in old]
    assert "".join(s.output for s in new) == "".join(s.output for s in old)
    assert "42" in new[3].output
    assert all(s.prompt_tokens == 0 for s in new)


def test_replay_names_a_missing_file(make_env, tmp_path):
    env = make_env("replay", options=AgentOptions(replay_path=str(tmp_path)), with_llm=False)
    with pytest.raises(FileNotFoundError, match="demo.json"):
        ReplayAgent().run(env)


def test_cache_replays_a_second_run_without_requests(make_env, openai_server, tmp_path):
    cache = str(tmp_path / "cache")
    script = [reply("execute", "print(6 * 7)"), SUBMIT_42]
    openai_server.script(script)
    first_env = make_env(cache_dir=cache)
    first = ReActAgent().run(first_env)
    assert len(openai_server.requests) == 2
    second_env = make_env(cache_dir=cache, run="again")
    second = ReActAgent().run(second_env)
    assert len(openai_server.requests) == 2  # no new request
    assert second == first
    assert second_env.prompt_tokens == first_env.prompt_tokens
    assert second_env.cost_usd == 0.0 < first_env.cost_usd


# -- the registry ------------------------------------------------------------------------------------


def test_load_agent_by_name_and_path():
    assert load_agent("react").name == "react"
    assert load_agent("react-super").name == "react-super"
    assert load_agent("reflexion").name == "reflexion"
    assert load_agent("replay").name == "replay"
    assert load_agent("gold").name == "gold"
    assert isinstance(load_agent("pytest_super.agents.react:ReActSuperAgent"), ReActSuperAgent)
    assert load_agent("noagent").name == "noagent"
    assert set(AGENT_NAMES) == {
        "react",
        "react-super",
        "swe",
        "reflexion",
        "gold",
        "replay",
        "noagent",
    }
    with pytest.raises(ValueError, match="known agents: react, react-super, swe"):
        load_agent("nope")
    with pytest.raises(ValueError, match="no 'Missing'"):
        load_agent("pytest_super.agents.react:Missing")
    with pytest.raises(ValueError, match="not an agent"):
        load_agent("pytest_super.agents.base:EpisodeLimits")


def test_needs_llm():
    assert not needs_llm("gold") and not needs_llm("replay")
    assert needs_llm("react") and needs_llm("reflexion") and needs_llm("swe")
    assert needs_llm("noagent")
    assert not needs_llm("pytest_super.agents.replay:ReplayAgent")
