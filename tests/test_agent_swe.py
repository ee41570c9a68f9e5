"""The SWE-agent: its commands and file viewer on a real local kernel, and whole episodes driven by
scripted replies from a real HTTP server that speaks OpenAI's chat-completions protocol."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_super.agents.base import (
    BudgetExceeded,
    Environment,
    EpisodeLimits,
    ExitStatus,
    FormatErrorsExceeded,
    StepLimitReached,
)
from pytest_super.agents.swe import STOP_STRINGS, SWEAgent, parse_reply
from pytest_super.agents.swe_commands import (
    CommandFormatError,
    FileViewer,
    parse_command,
)
from pytest_super.errors import LLMError
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.local import start_local_kernel
from pytest_super.llm import LLMClient, LLMSettings
from pytest_super.tasks import Task
from pytest_super.trajectory import Step, Trajectory

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BIG = "".join(f"line {i}\n" for i in range(1, 251))


@pytest.fixture
def kernel() -> Iterator:
    k = start_local_kernel(KernelSettings(backend="local"), task_id="swe-test")
    try:
        yield k
    finally:
        k.close()


@pytest.fixture
def viewer(kernel) -> FileViewer:
    return FileViewer(kernel)


def run(viewer: FileViewer, text: str) -> str:
    return viewer.run(parse_command(text))


def shown_lines(window: str) -> list[int]:
    """The line numbers a viewer window shows."""
    return [int(line.split(":", 1)[0]) for line in window.splitlines() if line[:1].isdigit()]


# -- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ("open src/a.py 30", "open", ("src/a.py", "30")),
        ('search_dir "two words" src', "search_dir", ("two words", "src")),
        ("scroll_down", "scroll_down", ()),
        ("!ls -la", "execute", ()),
        ("open = 3", "execute", ()),  # Python that happens to start with a command's name
        ("open('a.txt').read()", "execute", ()),
        ("import os\nprint(os.getcwd())", "execute", ()),
        ("interrupt", "interrupt", ()),
        ("interrupt = True", "execute", ()),
        # an edit without `end_of_edit` is no command: the paper's SWE-agent ran it as a cell
        ("edit 3:5\nx = 1\n", "execute", ()),
    ],
)
def test_parse_command_names(text: str, name: str, args: tuple[str, ...]) -> None:
    command = parse_command(text)
    assert (command.name, command.args) == (name, args)


def test_parse_command_edit_and_submit_bodies() -> None:
    edit = parse_command("edit 3:5\n    x = 1\n\n    y = 2\nend_of_edit\n")
    assert (edit.name, edit.args, edit.body) == ("edit", ("3:5",), "    x = 1\n\n    y = 2")
    submit = parse_command('submit {"acc": 0.5,\n "f1": 1}')
    assert submit.name == "submit" and json.loads(submit.body) == {"acc": 0.5, "f1": 1}
    # text that is not JSON is taken as it is, as by the paper's SWE-agent (it scores 0)
    assert parse_command("submit {acc: 0.5}").body == "{acc: 0.5}"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("edit 3:5\nx = 1\nend_of_edit\n!ls", "after `end_of_edit`"),
        ("open a.py\ngoto 30", "one command per"),
        ("submit", "needs the answer as JSON"),
        ("continue_wait 10", "takes no arguments"),
        ("   \n", "empty"),
    ],
)
def test_parse_command_rejects(text: str, problem: str) -> None:
    with pytest.raises(CommandFormatError, match=problem.replace("(", r"\(")):
        parse_command(text)


def test_parse_reply_discussion_and_one_block() -> None:
    thought, command = parse_reply("DISCUSSION\nLook around first.\n```bash\n!ls\n```\n")
    assert thought == "Look around first."
    assert (command.name, command.body) == ("execute", "!ls")
    # as the paper's SWE-agent: the last block is the command, the rest the discussion
    thought, command = parse_reply("DISCUSSION\ntwo\n```\n!ls\n```\nthen\n```\n!pwd\n```")
    assert (command.body, thought) == ("!pwd", "two\n```\n!ls\n```\nthen")
    with pytest.raises(CommandFormatError, match="no command"):
        parse_reply("DISCUSSION\nI will list the files with !ls")
    with pytest.raises(CommandFormatError, match="not closed"):
        parse_reply("DISCUSSION\nx\n```\n!ls")


# -- the file viewer -----------------------------------------------------------------------------


def test_open_scroll_goto_windows_on_a_250_line_file(kernel, viewer: FileViewer) -> None:
    kernel.write_file("big.txt", BIG)
    cwd = viewer.cwd()

    first = run(viewer, "open big.txt")
    assert first.splitlines()[0] == f"[File: {cwd}/big.txt (250 lines total)]"
    assert shown_lines(first) == list(range(1, 101))
    assert "1:line 1\n" in first and "100:line 100\n" in first
    assert first.endswith("(150 more lines below)") and "more lines above" not in first
    assert viewer.open_file == f"{cwd}/big.txt"

    down = run(viewer, "scroll_down")
    assert shown_lines(down) == list(range(99, 199))  # two lines of overlap
    assert "(98 more lines above)" in down and down.endswith("(52 more lines below)")

    bottom = run(viewer, "scroll_down")
    assert shown_lines(bottom) == list(range(151, 251))  # clamped to the end of the file
    assert "(150 more lines above)" in bottom and "more lines below" not in bottom

    up = run(viewer, "scroll_up")
    assert shown_lines(up) == list(range(53, 153))

    at = run(viewer, "goto 120")
    assert shown_lines(at) == list(range(104, 204))  # the line near the top, with context above
    assert "120:line 120" in at

    centred = run(viewer, "open big.txt 200")
    assert shown_lines(centred) == list(range(150, 250))
    top = run(viewer, "open big.txt 10")
    assert shown_lines(top) == list(range(1, 101))

    assert "must be between 1 and 250" in run(viewer, "goto 300")
    assert run(viewer, "goto x").startswith("Usage: goto")
    assert "not found" in run(viewer, "open missing.txt")
    assert "is a directory" in run(viewer, "open .")


def test_goto_scroll_and_edit_need_an_open_file(viewer: FileViewer) -> None:
    for text in ("goto 3", "scroll_down", "edit 1:1\nx\nend_of_edit", "search_file x"):
        assert "no file is open" in run(viewer, text)


def test_create_makes_an_empty_file_and_opens_it(kernel, viewer: FileViewer) -> None:
    shown = run(viewer, "create pkg/new_module.py")
    cwd = viewer.cwd()
    assert shown == f"[File: {cwd}/pkg/new_module.py (1 lines total)]\n1:"
    assert kernel.read_file("pkg/new_module.py") == "\n"
    kernel.write_file("pkg/new_module.py", "keep = True\n")
    again = run(viewer, "create pkg/new_module.py")
    assert "already exists" in again and "1:keep = True" in again
    assert kernel.read_file("pkg/new_module.py") == "keep = True\n"


PY = "import os\n\ndef f(x):\n    y = x + 1\n    return y\n\nprint(f(1))\n"


def test_edit_replaces_lines_3_to_5_of_a_python_file(kernel, viewer: FileViewer) -> None:
    kernel.write_file("m.py", PY)
    run(viewer, "open m.py")
    shown = run(viewer, "edit 3:5\ndef f(x):\n    return 2 * x\nend_of_edit")
    assert kernel.read_file("m.py") == "import os\n\ndef f(x):\n    return 2 * x\n\nprint(f(1))\n"
    assert "(6 lines total)" in shown and "4:    return 2 * x" in shown
    assert "File updated" in shown
    out = kernel.execute("!python m.py", 30)
    assert out.output.strip() == "2"


def test_edit_inserts_and_checks_its_range(kernel, viewer: FileViewer) -> None:
    kernel.write_file("notes.txt", "a\nb\nc\n")
    run(viewer, "open notes.txt")
    run(viewer, "edit 2:1\ninserted\nend_of_edit")  # end = start - 1 inserts before start
    assert kernel.read_file("notes.txt") == "a\ninserted\nb\nc\n"
    run(viewer, "edit 5:4\nappended\nend_of_edit")
    assert kernel.read_file("notes.txt") == "a\ninserted\nb\nc\nappended\n"
    run(viewer, "edit 2:3\nend_of_edit")  # no replacement lines: delete
    assert kernel.read_file("notes.txt") == "a\nc\nappended\n"
    assert "start_line must be between 1 and 4" in run(viewer, "edit 9:9\nx\nend_of_edit")
    assert "end_line must be between" in run(viewer, "edit 2:7\nx\nend_of_edit")
    assert "end_line must be between" in run(viewer, "edit 3:1\nx\nend_of_edit")
    assert "look like 12:15" in run(viewer, "edit 2\nx\nend_of_edit")
    assert kernel.read_file("notes.txt") == "a\nc\nappended\n"


def test_edit_that_breaks_python_is_rejected_and_the_file_kept(kernel, viewer: FileViewer) -> None:
    kernel.write_file("m.py", PY)
    run(viewer, "open m.py")
    shown = run(viewer, "edit 3:3\ndef f(x:\nend_of_edit")
    assert kernel.read_file("m.py") == PY
    assert "NOT applied" in shown
    assert "ERRORS:\n- E999 SyntaxError:" in shown
    would_be, original = shown.split("This is the file as it still is:")
    assert "3:def f(x:" in would_be
    assert "3:def f(x):" in original and "def f(x:" not in original
    bad_indent = run(viewer, "edit 4:4\n  y = x + 1\nend_of_edit")
    assert "NOT applied" in bad_indent and "IndentationError" in bad_indent
    assert kernel.read_file("m.py") == PY


@pytest.mark.parametrize(
    ("replacement", "code"),
    [
        ("    return undefined_name", "F821"),  # compiles, but names nothing defined
        ("    if x:\n      return x", "E111"),  # indentation not a multiple of four
        ("    y = x\n     # off by one\n    return y", "E116"),  # not checked: accepted
    ],
)
def test_edit_lint_rejects_new_flake8_errors(kernel, viewer, replacement, code) -> None:
    kernel.write_file("m.py", PY)
    run(viewer, "open m.py")
    shown = run(viewer, f"edit 4:5\n{replacement}\nend_of_edit")
    if code == "E116":
        assert "File updated" in shown
        return
    assert "NOT applied" in shown and f"- {code} " in shown
    assert kernel.read_file("m.py") == PY


def test_edit_lint_ignores_errors_the_file_already_had(kernel, viewer: FileViewer) -> None:
    source = "def f():\n    return missing\n\n\nx = 1\n"
    kernel.write_file("old.py", source)
    run(viewer, "open old.py")
    shown = run(viewer, "edit 1:1\n# a new first line\ndef f():\nend_of_edit")  # F821 moves
    assert "File updated" in shown
    assert kernel.read_file("old.py").startswith("# a new first line\ndef f():\n")


def test_edit_lint_never_enters_the_kernels_python(kernel, viewer: FileViewer) -> None:
    kernel.write_file("m.py", PY)
    run(viewer, "open m.py")
    run(viewer, "edit 3:3\ndef f(x:\nend_of_edit")
    modules = kernel.execute(
        "import sys; print(sorted(m for m in sys.modules if 'flake' in m))", 30
    )
    assert modules.output.strip() == "[]"


def test_edit_of_a_python_file_that_never_compiled_is_allowed(kernel, viewer: FileViewer) -> None:
    kernel.write_file("old.py", "print 'python 2'\nx = 1\n")
    run(viewer, "open old.py")
    shown = run(viewer, "edit 2:2\nx = 2\nend_of_edit")  # its E999 was there before
    assert "File updated" in shown
    assert kernel.read_file("old.py") == "print 'python 2'\nx = 2\n"


def test_a_text_file_is_not_syntax_checked(kernel, viewer: FileViewer) -> None:
    kernel.write_file("conf.yaml", "lr: 1\n")
    run(viewer, "open conf.yaml")
    assert "File updated" in run(viewer, "edit 1:1\nlr: (((\nend_of_edit")
    assert kernel.read_file("conf.yaml") == "lr: (((\n"


@pytest.fixture
def repo(kernel) -> None:
    kernel.write_file("repo/train.py", "import torch\nlr = 0.1\nprint('lr', lr)\n")
    kernel.write_file("repo/src/model.py", "class Model:\n    lr = 0.01\n")
    kernel.write_file("repo/src/config.yaml", "epochs: 3\n")
    kernel.write_file("repo/.git/config", "lr everywhere\n")
    kernel.execute("open('repo/weights.bin', 'wb').write(b'\\x00lr\\x00')", 30)


def test_search_dir(repo, viewer: FileViewer) -> None:
    cwd = viewer.cwd()
    shown = run(viewer, "search_dir lr")
    assert shown.splitlines() == [
        f'Found 3 matches for "lr" in {cwd}:',
        "repo/src/model.py (1 matches)",
        "repo/train.py (2 matches)",
        f'End of matches for "lr" in {cwd}',
    ]  # .git and binary files are skipped
    assert run(viewer, "search_dir lr repo/src").splitlines()[1] == "repo/src/model.py (1 matches)"
    assert run(viewer, "search_dir nothing_like_this") == (
        f'No matches found for "nothing_like_this" in {cwd}'
    )
    assert "not found" in run(viewer, "search_dir lr nowhere")


def test_search_file(repo, viewer: FileViewer) -> None:
    cwd = viewer.cwd()
    shown = run(viewer, "search_file lr repo/train.py")
    assert shown.splitlines() == [
        f'Found 2 matches for "lr" in {cwd}/repo/train.py:',
        "Line 2:lr = 0.1",
        "Line 3:print('lr', lr)",
        f'End of matches for "lr" in {cwd}/repo/train.py',
    ]
    run(viewer, "open repo/src/model.py")
    assert "Line 2:    lr = 0.01" in run(viewer, "search_file 'lr = '")  # the open file
    assert "not found" in run(viewer, "search_file lr nofile.py")


def test_find_file(repo, viewer: FileViewer) -> None:
    cwd = viewer.cwd()
    assert run(viewer, "find_file model.py").splitlines() == [
        f'Found 1 matches for "model.py" in {cwd}:',
        "repo/src/model.py",
        f'End of matches for "model.py" in {cwd}',
    ]
    assert run(viewer, "find_file '*.py' repo").splitlines()[1:3] == [
        "repo/src/model.py",
        "repo/train.py",
    ]
    assert "No matches found" in run(viewer, "find_file missing.py")


def test_paths_follow_the_kernels_cd(kernel, repo, viewer: FileViewer) -> None:
    root = viewer.cwd()
    kernel.execute("%cd repo", 30)
    assert viewer.cwd() == f"{root}/repo"
    shown = run(viewer, "open train.py")
    assert shown.startswith(f"[File: {root}/repo/train.py (3 lines total)]")
    assert run(viewer, "find_file model.py").splitlines()[1] == "src/model.py"
    assert run(viewer, "search_dir torch").splitlines()[1] == "train.py (1 matches)"
    run(viewer, "create notes.md")
    assert Path(root, "repo", "notes.md").read_text() == "\n"
    run(viewer, "open train.py")
    kernel.execute("%cd ..", 30)
    # the open file keeps its absolute path after a %cd
    run(viewer, "edit 2:2\nlr = 0.5\nend_of_edit")
    assert kernel.read_file("repo/notes.md") == "\n"
    assert kernel.read_file("repo/train.py") == "import torch\nlr = 0.5\nprint('lr', lr)\n"


def test_commands_leave_the_users_namespace_alone(kernel, repo, viewer: FileViewer) -> None:
    before = kernel.execute("print(sorted(k for k in globals() if not k.startswith('_')))", 30)
    run(viewer, "search_dir lr")
    run(viewer, "find_file '*.py'")
    after = kernel.execute("print(sorted(k for k in globals() if not k.startswith('_')))", 30)
    assert before.output == after.output


# -- the agent -----------------------------------------------------------------------------------


def make_env(
    kernel, tmp_path: Path, base_url: str, *, query: str = "Report the accuracy.", **limits
) -> Environment:
    task = Task(id="swe-demo", set="expert", query=query, answer={"acc": 0.5})
    trajectory = Trajectory(path=tmp_path / "traj.json", task_id=task.id, query=query, agent="swe")
    llm = LLMClient(
        LLMSettings(model="gpt-4o", base_url=base_url, api_key="sk-test", max_retries=0)
    )
    return Environment(task, kernel, trajectory, EpisodeLimits(**limits), llm=llm)


def reply(discussion: str, command: str) -> str:
    return f"DISCUSSION\n{discussion}\n```\n{command}\n```\n"


TRAIN = "import json\nacc = 0.25\nprint(json.dumps({'acc': acc}))\n"


def test_open_edit_run_submit(kernel, openai_server, tmp_path: Path) -> None:
    kernel.write_file("train.py", TRAIN)
    look = reply("Look at the script.", "open train.py")
    openai_server.script(
        [
            look,
            reply("The accuracy is hard-coded; fix it.", "edit 2:2\nacc = 0.5\nend_of_edit"),
            reply("Run it.", "!python train.py"),
            reply("Done.", 'submit {"acc": 0.5}'),
        ]
    )
    env = make_env(kernel, tmp_path, openai_server.base_url)
    result = SWEAgent().run(env)

    assert result.exit_status is ExitStatus.SUBMITTED
    assert json.loads(result.submission) == {"acc": 0.5}
    steps = env.trajectory.steps
    assert [s.action for s in steps] == ["open", "edit", "execute", "submit"]
    assert steps[0].thought == "Look at the script."
    assert steps[0].code is None and steps[0].observation.startswith("[File: ")
    assert steps[2].code == "!python train.py" and steps[2].cell_status == "ok"
    assert json.loads(steps[2].output) == {"acc": 0.5}
    assert kernel.read_file("train.py") == TRAIN.replace("0.25", "0.5")
    assert all(s.prompt_tokens > 0 for s in steps)
    assert env.prompt_tokens == sum(s.prompt_tokens for s in steps)
    assert json.loads(Path(tmp_path / "traj.json").read_text())["steps"][3]["action"] == "submit"

    requests = openai_server.requests
    assert len(requests) == 4
    assert STOP_STRINGS is None and "stop" not in requests[0].body  # SWE-agent sends none
    cwd = kernel.execute("import os; print(os.getcwd())", 30).output.strip()
    first = requests[0].messages
    assert first[0]["role"] == "system" and "search_dir" in first[0]["content"]
    assert "Report the accuracy." in first[1]["content"]
    assert first[-1]["content"].endswith(f"(Open file: n/a)\n(Current directory: {cwd})\nIn [ ]")
    second = requests[1].messages
    assert second[-2] == {"role": "assistant", "content": look}
    assert f"[File: {cwd}/train.py (3 lines total)]" in second[-1]["content"]
    assert second[-1]["content"].endswith(
        f"(Open file: {cwd}/train.py)\n(Current directory: {cwd})\nIn [ ]"
    )
    assert "File updated" in requests[2].messages[-1]["content"]
    assert '{"acc": 0.5}' in requests[3].messages[-1]["content"]


def test_prompt_follows_cd_and_keeps_the_last_five_observations(
    kernel, openai_server, tmp_path: Path
) -> None:
    # SWE-agent's history: the task message with its first state prompt, the last five
    # observation messages whole, each earlier one as its line count; no output is said so
    openai_server.script(
        [
            reply("Make a directory.", "!mkdir -p sub && python -c \"print('x' * 2000)\""),
            reply("Go there.", "%cd sub"),
            reply("Set a variable.", "x = 1"),
            *[reply(f"Print {i}.", f"print({i})") for i in range(4)],
            reply("Done.", "submit null"),
        ]
    )
    env = make_env(kernel, tmp_path, openai_server.base_url)
    assert SWEAgent().run(env).submission == "null"
    requests = openai_server.requests
    assert "x" * 2000 in requests[1].messages[-1]["content"]  # no cut
    last = [m["content"] for m in requests[7].messages if m["role"] == "user"]
    assert last[0].endswith("In [ ]") and "/sub)" not in last[0]  # the first state prompt
    assert last[1] == "Old output omitted (5 lines)"  # 2,000 x, its line break, the state
    assert re.fullmatch(r"Old output omitted \(\d+ lines\)", last[2])
    assert last[3].startswith("Your command ran successfully and did not produce any output.\n")
    assert last[-1].startswith("3\n") and last[-1].endswith("/sub)\nIn [ ]")
    assert len(last) == 8


def test_format_errors_stay_in_the_conversation(kernel, openai_server, tmp_path: Path) -> None:
    openai_server.script(
        [
            "DISCUSSION\nNot closed.\n```\n!ls",
            "I would run !ls now.",
            reply("One command.", "!echo hello"),
            "DISCUSSION\nSubmit.\n```\nsubmit\n```",
            reply("Not JSON, taken as it is.", "submit {acc: 0.5}"),
        ]
    )
    env = make_env(kernel, tmp_path, openai_server.base_url)
    result = SWEAgent().run(env)
    assert (result.exit_status, result.submission) == (ExitStatus.SUBMITTED, "{acc: 0.5}")
    actions = [s.action for s in env.trajectory.steps]
    assert actions == ["format_error", "format_error", "execute", "format_error", "submit"]
    requests = openai_server.requests
    assert "not closed" in requests[1].messages[-1]["content"]
    assert "no command" in requests[2].messages[-1]["content"]
    assert "needs the answer" in requests[4].messages[-1]["content"]
    assert requests[1].messages[-1]["content"].endswith("In [ ]")
    # the malformed replies and their corrections stay in the conversation
    later = [m["content"] for m in requests[4].messages]
    assert any("Not closed" in m for m in later) and any("I would run" in m for m in later)
    assert sum("is not closed" in m for m in later) == 1
    assert env.trajectory.steps[2].output.strip() == "hello"


def test_format_errors_end_the_episode_only_with_the_cap(kernel, openai_server, tmp_path) -> None:
    openai_server.script(["no command", "```\n!ls", "submit", "unused"])
    env = make_env(kernel, tmp_path, openai_server.base_url, format_errors=3)
    with pytest.raises(FormatErrorsExceeded) as raised:
        SWEAgent().run(env)
    assert raised.value.status is ExitStatus.FORMAT_ERRORS
    assert len(openai_server.requests) == 3
    assert [s.action for s in env.trajectory.steps] == ["format_error"] * 3


def test_timed_out_cell_then_interrupt(kernel, openai_server, tmp_path: Path) -> None:
    openai_server.script(
        [
            reply("Long run.", "import time\nprint('started', flush=True)\ntime.sleep(60)"),
            reply("Give it a little longer.", "continue_wait"),
            reply("It hangs; stop it.", "interrupt"),
            reply("Check the kernel still works.", "print('alive')"),
            reply("Done.", "submit []"),
        ]
    )
    env = make_env(kernel, tmp_path, openai_server.base_url, cell_timeout_s=1.5)
    result = SWEAgent().run(env)
    assert result.exit_status is ExitStatus.SUBMITTED
    steps = env.trajectory.steps
    assert [s.action for s in steps] == [
        "execute",
        "continue_wait",
        "interrupt",
        "execute",
        "submit",
    ]
    assert steps[0].cell_status == "timeout" and "started" in steps[0].output
    assert "still running" in steps[0].observation
    assert steps[1].cell_status == "timeout"
    assert "KeyboardInterrupt" in steps[2].output
    assert steps[3].output.strip() == "alive"
    requests = openai_server.requests
    assert "continue_wait" in requests[1].messages[-1]["content"]
    assert "(Current directory: " in requests[1].messages[-1]["content"]


def test_another_command_interrupts_a_running_cell_first(kernel, openai_server, tmp_path) -> None:
    kernel.write_file("a.txt", "content\n")
    openai_server.script(
        [
            reply("Long run.", "import time\ntime.sleep(60)"),
            reply("Read a file meanwhile.", "open a.txt"),
            reply("Nothing is running now.", "interrupt"),
            reply("Done.", "submit 1"),
        ]
    )
    env = make_env(kernel, tmp_path, openai_server.base_url, cell_timeout_s=1.0)
    SWEAgent().run(env)
    steps = env.trajectory.steps
    assert [s.action for s in steps] == ["execute", "interrupt", "open", "interrupt", "submit"]
    assert "KeyboardInterrupt" in steps[1].output and steps[1].code is None
    assert "1:content" in steps[2].observation
    seen = openai_server.requests[2].messages[-1]["content"]
    assert "interrupted" in seen and "1:content" in seen
    assert "No cell is running" in steps[3].observation


def test_step_limit_counts_replies(kernel, openai_server, tmp_path: Path) -> None:
    openai_server.script(
        [reply("a", "x = 1"), "no command", reply("b", "x += 1"), reply("c", "submit 1")]
    )
    env = make_env(kernel, tmp_path, openai_server.base_url, steps=3)
    with pytest.raises(StepLimitReached):
        SWEAgent().run(env)
    assert [s.action for s in env.trajectory.steps] == ["execute", "format_error", "execute"]
    assert len(openai_server.requests) == 3


def test_token_budget(kernel, openai_server, tmp_path: Path) -> None:
    openai_server.script([reply("a", "print('acted on')"), reply("b", "x = 2")])
    env = make_env(kernel, tmp_path, openai_server.base_url)
    calls = len(openai_server.requests)
    with pytest.raises(BudgetExceeded):
        SWEAgent().run_attempt(env, budget=1)  # crossed by the first call: its reply is run
    assert len(openai_server.requests) == calls + 1
    steps = env.trajectory.steps
    assert [s.action for s in steps] == ["execute", "budget_exceeded"]
    assert steps[0].output == "acted on\n"
    assert "token budget exceeded" in steps[1].observation
    assert env.prompt_tokens == sum(s.prompt_tokens for s in steps)


def test_llm_error_propagates(kernel, openai_server, tmp_path: Path) -> None:
    from tests.support.openai_server import Status

    openai_server.script([Status(401)])
    env = make_env(kernel, tmp_path, openai_server.base_url)
    with pytest.raises(LLMError):
        SWEAgent().run(env)


def test_pre_executed_steps_are_history(kernel, openai_server, tmp_path: Path) -> None:
    openai_server.script([reply("Done.", "submit 1")])
    env = make_env(kernel, tmp_path, openai_server.base_url)
    env.set_prefix_steps(
        [
            Step(
                thought="[pre-executed by user]",
                action="execute",
                content="!echo cloned",
                observation="cloned\n",
                output="cloned\n",
                code="!echo cloned",
                pre_executed=True,
            ),
            Step(
                thought="[pre-executed by user]",
                action="edit",
                content="cfg.yaml\n<<<BEFORE_EDIT>>>\ndevice: cuda\n<<<AFTER_EDIT>>>\ndevice: cpu\n",
                observation="Edit applied to cfg.yaml.",
                pre_executed=True,
            ),
        ]
    )
    SWEAgent().run(env)
    messages = openai_server.requests[0].messages
    # as SUPER's SWE-agent on Masked (its notebooks): the task message with the state at the
    # start, then each pre-executed step as a turn in a reply's layout and its observation with
    # the state prompt; an edit as the notebooks write it, the last state the kernel's own
    start = "(Open file: n/a)\n(Current directory: /content)\nIn [ ]"
    assert messages[1]["content"].endswith(f"\n{start}")
    assert messages[2] == {
        "role": "assistant",
        "content": "DISCUSSION\n[pre-executed by user]\n\n```\n!echo cloned\n```",
    }
    assert messages[3] == {"role": "user", "content": f"cloned\n\n{start}"}
    assert messages[4] == {
        "role": "assistant",
        "content": "DISCUSSION\nEXECUTED BY USER\n\n```\nEDITING `cfg.yaml. CHANGING:\n\n\n"
        "device: cuda\n\n\nTO:\n\n\ndevice: cpu\n\n```",
    }
    assert messages[5]["content"].startswith("Edit applied to cfg.yaml.\n(Open file: n/a)\n")
    assert messages[5]["content"].endswith("In [ ]") and len(messages) == 6


@pytest.mark.docker
def test_episode_in_a_docker_kernel(openai_server, tmp_path: Path) -> None:
    """The same commands in a container: paths start at /content, the syntax check uses the
    container's Python."""
    import uuid

    from pytest_super.kernels import provision_kernel
    from pytest_super.kernels.docker.cleanup import cleanup_containers
    from pytest_super.kernels.docker.engine import docker_client
    from pytest_super.kernels.docker.image import build_image

    build_image(offline=True, log=lambda line: None)
    settings = KernelSettings(run_id=f"test-swe-{uuid.uuid4().hex[:8]}", mem="1g", cpus=1.0)
    docker_kernel = provision_kernel(settings, task_id="swe-docker")
    try:
        docker_kernel.write_file("repo/train.py", TRAIN)
        openai_server.script(
            [
                reply("Go into the repository.", "%cd repo"),
                reply("Find the script.", "find_file '*.py'"),
                reply("Open it.", "open train.py"),
                reply("A broken edit.", "edit 2:2\nacc = (0.5\nend_of_edit"),
                reply("Fix it properly.", "edit 2:2\nacc = 0.5\nend_of_edit"),
                reply("Run it.", "!python train.py"),
                reply("Done.", 'submit {"acc": 0.5}'),
            ]
        )
        env = make_env(docker_kernel, tmp_path, openai_server.base_url)
        result = SWEAgent().run(env)
        assert result.exit_status is ExitStatus.SUBMITTED
        steps = env.trajectory.steps
        assert steps[1].observation.splitlines()[1] == "train.py"
        assert steps[2].observation.startswith("[File: /content/repo/train.py (3 lines total)]")
        assert "NOT applied" in steps[3].observation
        assert json.loads(steps[5].output) == {"acc": 0.5}
        prompt = openai_server.requests[3].messages[-1]["content"]
        assert prompt.endswith(
            "(Open file: /content/repo/train.py)\n(Current directory: /content/repo)\nIn [ ]"
        )
    finally:
        docker_kernel.close()
        cleanup_containers(docker_client(settings), run_id=settings.run_id)
