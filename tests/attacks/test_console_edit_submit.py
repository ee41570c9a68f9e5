"""Attacks on the console, the edit tool and submissions (issue 29, causes 6, 9 and 10).

Real runs: pytest in a subprocess with the Docker backend and a scripted chat-completions server on
127.0.0.1, or the edit API against a real Docker kernel. Each test failed before its fix.
"""

from __future__ import annotations

import json

import pytest

from tests.support.projects import junit_properties as read_junit_properties

SECRET = "sk-test-console-edit-submit-9d8c"

TASK = """\
id: answer_task
query: 'Report the score as a json structured as follows: {"score": 0.0}.'
answer: {score: 0.5}
"""


def swe_reply(command: str) -> str:
    return f"DISCUSSION\nNext.\n```\n{command}\n```\n"


def react_reply(action: str, content: str) -> str:
    return f"Thought: next.\nAction: {action}\n<content>\n{content}\n"


@pytest.fixture
def project(pytester: pytest.Pytester, image: str, monkeypatch) -> pytest.Pytester:
    monkeypatch.setenv("SUPER_API_KEY", SECRET)
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    path = pytester.path / "tasks/expert/answer.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(TASK)
    return pytester


def run(project: pytest.Pytester, server, agent: str, *extra: str) -> pytest.RunResult:
    return project.runpytest_subprocess(
        "tasks",
        f"--super-agent={agent}",
        "--super-model=gpt-4o",
        f"--super-base-url={server.base_url}",
        f"--junitxml={project.path / 'junit.xml'}",
        "--super-mem=1g",
        "-p",
        "no:cacheprovider",
        *extra,
    )


def junit_properties(project: pytest.Pytester) -> dict[str, str]:
    (props,) = read_junit_properties(project.path / "junit.xml").values()
    return props


def trajectory_info(props: dict[str, str]) -> dict:
    path = props["super.trajectory"].removesuffix(".ipynb") + ".json"
    return json.loads(open(path, encoding="utf-8").read())["info"]


# --- cause 10: submissions the scorer could not take ----------------------------------------------

DEEP = "[" * 5000 + "]" * 5000  # nested 5,000 deep: json.loads raised RecursionError
HUGE = "9" * 401  # a 401-digit integer: int - float raised OverflowError


@pytest.mark.docker
@pytest.mark.parametrize(
    "answer",
    [DEEP, '{"score": ' + DEEP + "}", '{"score": ' + HUGE + "}", '{"score": NaN}'],
    ids=["deep", "deep-under-a-key", "huge-int", "nan"],
)
def test_a_swe_agent_submission_the_scorer_cannot_match_is_scored_zero(
    project, openai_server, answer
):
    openai_server.script([swe_reply(f"submit {answer}")])
    result = run(project, openai_server, "swe")
    result.assert_outcomes(failed=1)  # the agent's answer, scored: a failure, not an error
    props = junit_properties(project)
    assert props["super.exit_status"] == "submitted"
    assert float(props["super.accuracy"]) == 0.0
    assert "harness_error" not in result.stdout.str()
    assert trajectory_info(props)["exit_status"] == "submitted"


@pytest.mark.docker
def test_a_react_agent_told_its_deep_answer_is_refused_then_scored(project, openai_server):
    """ReAct-SUPER checks a submission's JSON before it ends the episode: a deep one is a format
    error the model is told about (it was a RecursionError: harness_error); its next answer, a
    401-digit integer against a float, scores 0."""
    openai_server.script(
        [react_reply("submit", '{"score": ' + DEEP + "}"), react_reply("submit", HUGE)]
    )
    result = run(project, openai_server, "react-super")
    result.assert_outcomes(failed=1)
    assert "levels deep" in openai_server.requests[1].prompt_text
    props = junit_properties(project)
    assert props["super.exit_status"] == "submitted" and float(props["super.accuracy"]) == 0.0


# --- cause 6: nothing a task prints or a model says drives the user's terminal -------------------

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"
OSC52 = f"{ESC}]52;c;aGVsbG8={BEL}"  # a clipboard write
OSC0 = f"{ESC}]0;pwned-title{BEL}"  # the window title
#: the issue's construction: one pass removed the inner CSI and joined ESC to `]52;...`
NESTED_OSC52 = f"{ESC}{ESC}[m]52;c;aGVsbG8={BEL}"
C1_SEQUENCES = ["\x9d0;pwned-title\x9c", "\x9b31mred", "\x90qdcs\x9c", "\x9b2J"]
#: every character a terminal may act on: C0 but tab and newline, DEL, C1 (carriage return too)
CONTROLS = {chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]} - {"\n", "\t"}

#: pieces that nest into sequences when joined (openers, intermediates, finals, terminators)
PIECES = [
    *(ESC, BEL, ST, "\r\n", "0;", "52;c;aGk=", "8;;http://x", "31", "?25l", "(B", "#8", "text"),
    *"[]PX^_m\\;\x9b\x9d\x90\x98\x9e\x9f\x9c\x84\x08\r\x7f\x00 \n\té━",
]


def nested_constructions(count: int, seed: int = 29) -> list[str]:
    """The issue's construction, its nestings k deep, and random joins of `PIECES`."""
    import random

    rng = random.Random(seed)
    made = [OSC52, OSC0, NESTED_OSC52, *C1_SEQUENCES]
    for k in range(1, 12):  # ESC^k ESC[m^k ]52;...: each layer removed joins the next
        made.append(ESC * k + f"{ESC}[m" * k + "]52;c;aGk=" + BEL)
        made.append(f"{ESC}[{ESC}" * k + "]0;t" + BEL)
        made.append(ESC + f"]0;{ESC}]0;" * k + "t" + ST * k)
    for _ in range(count):
        made.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 40))))
    return made


def test_no_control_survives_cleaning_however_nested():
    from pytest_super.kernels.jupyter.output import clean_for_model, console_text, strip_ansi

    for text in nested_constructions(20_000):
        shown = console_text(text)
        assert not CONTROLS & set(shown), repr(text)
        assert console_text(shown) == shown  # nothing left to remove: a fixed point
        for cleaned in (strip_ansi(text), clean_for_model(text)):
            assert not (CONTROLS - {"\r"}) & set(cleaned), repr(text)
        assert not CONTROLS & set(clean_for_model(text)), repr(text)


def test_cleaning_keeps_text_readable():
    from pytest_super.kernels.jupyter.output import console_text

    link = f"{ESC}]8;;http://example.org{ST}the link{ESC}]8;;{ST}"
    assert console_text(f"{ESC}[1;31mred{ESC}[0m {link} {OSC0}done") == "red the link done"
    assert console_text("épochs ━━━ 45%\ttab\r\nnext\rover") == "épochs ━━━ 45%\ttab\nnext\nover"
    assert console_text("\x9b31mred\x9b0m \x9d0;title\x9c!") == "red !"
    assert console_text(NESTED_OSC52) == "]52;c;aGVsbG8="  # harmless, and shows the attempt


def test_cleaning_stays_linear_on_hostile_text():
    import time

    from pytest_super.kernels.jupyter.output import console_text

    for text in ("\x9d" * 200_000, f"{ESC}]" * 200_000, "\x9b" + "0" * 400_000, ESC * 400_000):
        started = time.perf_counter()
        assert not CONTROLS & set(console_text(text))
        assert time.perf_counter() - started < 60  # a quadratic scan of these takes many minutes


SAY = f"Thought: I print some escapes {OSC0}{NESTED_OSC52}\x9d0;model-title\x9c.\nAction: "
PRINT_ESCAPES = (
    "print('\\x1b]52;c;aGVsbG8=\\x07', '\\x1b]0;pwned\\x07', '\\x1b\\x1b[m]52;c;aGk=\\x07', "
    "'\\x9d0;c1-title\\x9c', '\\x9b2J', 'bell\\x07', 'back\\x08\\x08\\x08')"
)


@pytest.mark.docker
@pytest.mark.parametrize("live", [False, True], ids=["failure-text", "super-live"])
def test_a_run_whose_task_and_model_print_escapes_writes_none_to_the_console(
    project, openai_server, live
):
    """A scripted ReAct-SUPER episode: the model's thoughts hold OSC 0, the issue's nested OSC 52
    and C1 sequences; the cell it runs prints OSC 52, OSC 0, C1 CSI and OSC, BEL and backspaces;
    it submits a wrong answer, so the failure text shows the output. The console's bytes hold no
    ESC, no C1 character, no other control but newline and tab."""
    import os
    import subprocess
    import sys

    openai_server.script(
        [
            SAY + f"execute\n<content>\n{PRINT_ESCAPES}\n",
            SAY + 'submit\n<content>\n{"score": 0.25}\n',
        ]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(PY_COLORS="0", SUPER_API_KEY=SECRET)
    args = [
        sys.executable, "-m", "pytest", "tasks", "--super-agent=react-super",
        "--super-model=gpt-4o", f"--super-base-url={openai_server.base_url}", "--super-mem=1g",
        "-p", "no:cacheprovider", "-rA", *(["--super-live"] if live else []),
    ]  # fmt: skip
    done = subprocess.run(args, cwd=project.path, env=env, capture_output=True, timeout=600)
    console = done.stdout + done.stderr
    text = console.decode("utf-8")
    assert "1 failed" in text, text
    assert "did not pass" in text and "bell" in text  # the failure text shows the output
    if live:
        assert "I print some escapes" in text
    assert b"\x1b" not in console and b"\x07" not in console
    assert not CONTROLS & set(text), sorted(CONTROLS & set(text))


# --- cause 9: the edit tool and the file viewer read only bounded regular files ------------------

#: what each hostile target is; made in the kernel by `MAKE_TARGETS`
TARGETS = {
    "big.py": "larger than 4000000 bytes",  # 42 MB of `x = 1` lines
    "pipe.py": "FIFO",  # a named pipe nobody writes: the read blocked for 60 s
    "/dev/zero": "character device",  # endless: the kernel was OOM-killed
    "zero.py": "character device",  # a link to /dev/zero
}
MAKE_TARGETS = (
    "import os\n"
    "open('big.py', 'wb').write(b'x = 1\\n' * 7_000_000)\n"
    "os.mkfifo('pipe.py')\n"
    "os.symlink('/dev/zero', 'zero.py')\n"
    "print('made')"
)
#: an answer, well within the harness's own 60 s bound on a file request (a read that blocks
#: waits for it); the quiet figure is under a second: no band near it (issue 42)
FAST_S = 30.0


@pytest.fixture
def docker_kernel(image: str):
    import uuid

    from pytest_super.kernels import provision_kernel
    from pytest_super.kernels.base import KernelSettings
    from pytest_super.kernels.docker.cleanup import cleanup_containers
    from pytest_super.kernels.docker.engine import docker_client

    run_id = f"test-{uuid.uuid4().hex[:10]}"
    settings = KernelSettings(run_id=run_id, mem="1g", cpus=1.0, startup_timeout_s=60)
    kernel = provision_kernel(settings, task_id="edit-attack")
    try:
        result = kernel.execute(MAKE_TARGETS, timeout=120)
        assert "made" in result.output, result.output
        yield kernel
    finally:
        kernel.close()
        cleanup_containers(docker_client(settings), run_id=run_id)


def kernel_still_works(kernel) -> None:
    result = kernel.execute("import os; print(os.path.getsize('big.py'), 6 * 7_000_000)", 60)
    assert result.output.split() == ["42000000", "42000000"], result.output  # nothing cut


@pytest.mark.docker
@pytest.mark.parametrize("target", list(TARGETS))
def test_an_edit_of_a_large_or_special_file_is_a_quick_failed_edit(docker_kernel, target):
    import time

    from pytest_super.edit import EditRequest, edit_file

    started = time.monotonic()
    outcome = edit_file(docker_kernel, EditRequest(target, "x = 1\n", "x = 2\n"))
    elapsed = time.monotonic() - started
    print(f"edit of {target}: {elapsed:.1f} s: {outcome.message[:300]}")  # the figures
    assert not outcome.ok and outcome.new_text is None
    assert outcome.message.startswith(f"Edit failed: cannot read {target}"), outcome.message
    assert TARGETS[target] in outcome.message and "shell commands" in outcome.message
    assert elapsed < FAST_S, f"{elapsed:.1f} s"
    kernel_still_works(docker_kernel)


@pytest.mark.docker
def test_the_swe_viewer_and_file_writes_refuse_large_and_special_files_quickly(docker_kernel):
    """SWE-agent's open and create, its searches, and the harness's writes, on the same files."""
    import time

    from pytest_super.agents.swe_commands import FileViewer, parse_command

    viewer = FileViewer(docker_kernel)

    def command(text: str) -> str:
        return viewer.run(parse_command(text))

    for target, kind in TARGETS.items():
        started = time.monotonic()
        shown = command(f"open {target}")
        assert shown.startswith("Error: `open` failed") and kind in shown, shown
        shown = command(f"create {target}")
        assert shown.startswith("Error: `create` failed") and kind in shown, shown  # exists
        assert time.monotonic() - started < 2 * FAST_S, target
    started = time.monotonic()
    assert "No matches found" in command("search_dir needle .")  # walks past the FIFO
    assert "Error" in command("search_file x pipe.py")
    assert time.monotonic() - started < FAST_S
    for target in ("pipe.py", "/dev/zero"):
        with pytest.raises(OSError, match="not a regular file"):
            docker_kernel.write_file(target, "x = 2\n")
    with pytest.raises(OSError, match="larger than 4000000 bytes"):
        docker_kernel.read_bytes("big.py")
    kernel_still_works(docker_kernel)


def edit(target: str) -> str:
    return react_reply("edit", f"{target}\n<<<BEFORE_EDIT>>>\nx = 1\n<<<AFTER_EDIT>>>\nx = 2")


@pytest.mark.docker
def test_an_episode_goes_on_after_edits_of_large_and_special_files(project, openai_server):
    """ReAct-SUPER makes the files, edits each (each edit was a kernel error: the task an error
    charged to the engine), then submits: every edit is an `Edit failed` observation, the
    episode is scored."""
    import time

    openai_server.script(
        [
            react_reply("execute", MAKE_TARGETS),
            *(edit(target) for target in TARGETS),
            react_reply("submit", '{"score": 0.5}'),
        ]
    )
    started = time.monotonic()
    result = run(project, openai_server, "react-super")
    result.assert_outcomes(passed=1)
    assert time.monotonic() - started < 120
    for number, kind in enumerate(TARGETS.values(), start=2):
        prompt = openai_server.requests[number].prompt_text
        assert "Edit failed" in prompt and kind in prompt, (number, prompt[-2000:])


def test_the_report_command_prints_no_escape_from_a_results_file(tmp_path, capsys):
    """`pytest-super report` prints names it reads from another run's results.jsonl."""
    from pytest_super.cli import main

    results = tmp_path / "results.jsonl"
    record = {"task_id": f"t{OSC52}{NESTED_OSC52}", "outcome": "passed", "set": f"expert{OSC0}"}
    results.write_text(json.dumps({**record, "accuracy": 1.0}) + "\n")
    for extra in ([], ["--by-task"]):
        assert main(["report", *extra, str(results)]) == 0
        printed = capsys.readouterr()
        assert "expert" in printed.out or "t]52" in printed.out, printed.out
        assert not CONTROLS & set(printed.out + printed.err), printed.out
