"""Attacks on a run as a whole (issue 11): task files, model replies, results files, signals and
names that once aborted a session (INTERNALERROR), lost results or charged the harness's faults
to the agent. Each test reproduces its attack the way a user would meet it: pytest run in a
subprocess on a small project (real ipykernel with the local backend; the real Docker engine where
the attack is about containers), a real HTTP endpoint on 127.0.0.1 for model replies.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_super import options, report
from pytest_super.errors import LLMError
from pytest_super.kernels.docker.cleanup import cleanup_containers
from pytest_super.kernels.docker.engine import LABEL_HOST, LABEL_PID, LABEL_RUN, docker_client_for
from pytest_super.kernels.docker.image import build_image
from pytest_super.kernels.docker.lease import LABEL_LEASE, TTL_S, Lease, engine_time
from pytest_super.llm import MAX_USAGE_TOKENS, LLMClient, LLMSettings
from pytest_super.process_identity import Holder
from pytest_super.tasks import TaskFileError, iter_jsonl_tasks
from tests.support.attack_runs import Run, junit_cases, recorded, run_leftovers, running, wait_for
from tests.support.openai_server import Status
from tests.support.projects import SOLUTION_AGENT, write_solution_agent

ANSWER_X1 = """\
id: {id}
query: 'Report x as a json structured as follows: {{"x": 0}}.'
answer: {{x: 1}}
solution:
  - execute: |
      print('{{"x": 1}}')
"""


def gold_task(task_id: str) -> str:
    return ANSWER_X1.format(id=task_id)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    write(pytester, "tasks/expert/ok.yaml", gold_task("ok"))
    return pytester


def write(pytester: pytest.Pytester, rel: str, text: str | bytes) -> Path:
    path = pytester.path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def run_results(root: Path) -> list[dict]:
    (run_dir,) = (root / "reports").iterdir()
    return [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


# -- 1. collection errors of any type ------------------------------------------------------------
@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_task_answer_nested_1000_deep_is_an_error_and_the_others_run(project, xdist):
    write(project, "tasks/expert/deep.yaml", f"id: deep\nquery: q\nanswer: {nested(1000)}\n")
    result = project.runpytest_subprocess("--super-agent=gold", "--super-backend=local", *xdist)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*deep.yaml*nested too deeply*"])


def test_an_unexpected_exception_in_the_call_phase_does_not_end_the_session(project):
    write(project, "tasks/expert/other.yaml", gold_task("other"))
    write(
        project,
        "conftest.py",
        "import pytest\n\n"
        "@pytest.hookimpl(wrapper=True)\n"
        "def pytest_runtest_call(item):\n"
        "    if item.name == 'ok':\n"
        "        raise RuntimeError('unexpected in call')\n"
        "    return (yield)\n",
    )
    result = project.runpytest_subprocess("--super-agent=gold", "--super-backend=local")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: unexpected in call*"])


# -- 2. endpoint usage -----------------------------------------------------------------------------
def completion_with_usage(prompt_tokens: object, completion_tokens: object = 3) -> Status:
    body = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }
    return Status(200, body=body)


@pytest.mark.parametrize(
    "usage",
    [-(10**12), -1, MAX_USAGE_TOKENS + 1, 10**40, 1.5, "12", True, None],
    ids=["-1e12", "-1", "over-bound", "1e40", "float", "string", "bool", "null"],
)
def test_usage_must_be_a_bounded_non_negative_integer(openai_server, usage):
    openai_server.script([completion_with_usage(usage)])
    client = LLMClient(LLMSettings(model="gpt-4o", base_url=openai_server.base_url))
    if usage is None:  # absent counts are estimated, as before
        assert client.complete([{"role": "user", "content": "x" * 40}]).prompt_tokens == 10
        return
    with pytest.raises(LLMError, match=r"usage\.prompt_tokens = .*0 to 1,000,000,000"):
        client.complete([{"role": "user", "content": "hello"}])


NEGATIVE_USAGE_AGENT_TASKS = {
    f"tasks/expert/t{i}.yaml": gold_task(f"t{i}").replace("solution:", "landmarks: []\nsolution:")
    for i in range(2)
}
SUBMIT = 'Thought: x is 1.\nAction: submit\n<content>\n{"x": 1}\n'


def test_negative_usage_under_xdist_is_an_llm_error_and_loses_nothing(pytester, openai_server):
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    for rel, text in NEGATIVE_USAGE_AGENT_TASKS.items():
        write(pytester, rel, text)
    reply = openai_server._completion({}, SUBMIT)
    reply["usage"]["prompt_tokens"] = -(10**12)
    openai_server.script([Status(200, body=reply), SUBMIT])
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "--super-agent=react",
        "--super-model=gpt-4o",
        f"--super-base-url={openai_server.base_url}",
        "--super-backend=local",
        "-n",
        "2",
        f"--junitxml={junit}",
    )
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "struct.error" not in text, text
    result.assert_outcomes(passed=1, errors=1)
    lines = run_results(pytester.path)
    assert sorted(r["outcome"] for r in lines) == ["error", "passed"]
    (bad,) = [r for r in lines if r["outcome"] == "error"]
    assert bad["exit_status"] == "llm_error"
    assert len(list(ET.parse(junit).getroot().iter("testcase"))) == 2


# -- 3. a truncated results.jsonl line ---------------------------------------------------------------
def test_a_truncated_results_line_is_skipped_with_a_warning_naming_file_and_line(project, capsys):
    first = project.runpytest_subprocess("--super-agent=gold", "--super-backend=local")
    first.assert_outcomes(passed=1)
    (run_dir,) = (project.path / "reports").iterdir()
    results = run_dir / "results.jsonl"
    good = results.read_text()
    results.write_text(good + good[: len(good) // 2])  # what a crash or a full disk leaves

    warned: list[str] = []
    records = report.read_results(results, on_bad_line=warned.append)
    assert [r.task_id for r in records] == ["ok"]
    assert warned and f"{results}:2:" in warned[0]

    from pytest_super.cli import main

    assert main(["report", str(results)]) == 0
    assert f"{results}:2: skipped a broken results line" in capsys.readouterr().err

    resumed = project.runpytest_subprocess(
        "--super-agent=gold", "--super-backend=local", "--super-resume", "-rs"
    )
    assert "INTERNALERROR" not in resumed.stdout.str() + resumed.stderr.str()
    resumed.assert_outcomes(skipped=1)
    resumed.stdout.fnmatch_lines([f"*resumed: passed in run {run_dir.name}*"])
    resumed.stdout.fnmatch_lines([f"*{results}:2: skipped a broken results line*"])


# -- 4. SUPER JSONL line by line -----------------------------------------------------------------
def super_row(task_id: str, query: str = "q") -> bytes:
    row = {"task_id": task_id, "query": query, "answer": json.dumps({"a": 1}), "landmarks": []}
    return json.dumps(row, ensure_ascii=False).encode()


def test_a_binary_junk_line_is_an_error_of_that_line_only(tmp_path):
    path = tmp_path / "expert.jsonl"
    path.write_bytes(b"\n".join([super_row("one"), b"\xff\xfe\x00junk\x80", super_row("two")]))
    items = list(iter_jsonl_tasks(path))
    assert [getattr(i, "id", None) for i in items] == ["one", None, "two"]
    error = items[1]
    assert isinstance(error, TaskFileError) and error.line == 2
    assert f"{path}:2: not UTF-8" in str(error)


def test_a_line_separator_inside_a_string_does_not_split_the_row(tmp_path):
    path = tmp_path / "expert.jsonl"
    query = "first part\u2028second part\x1cthird\x85fourth"
    path.write_bytes(super_row("one", query) + b"\n" + super_row("two") + b"\n")
    items = list(iter_jsonl_tasks(path))
    assert not [i for i in items if isinstance(i, TaskFileError)], items
    assert [(i.id, i.line) for i in items] == [("one", 1), ("two", 2)]
    assert items[0].query == query


def test_a_jsonl_line_nested_5000_deep_is_an_error_of_that_line(tmp_path):
    path = tmp_path / "expert.jsonl"
    deep = b'{"task_id": "deep", "query": "q", "answer": ' + nested(5000).encode() + b"}"
    path.write_bytes(b"\n".join([super_row("one"), deep, super_row("two")]))
    items = list(iter_jsonl_tasks(path))
    assert [getattr(i, "id", None) for i in items] == ["one", None, "two"]
    assert "nested too deeply" in str(items[1]) and items[1].line == 2


# -- 10. long task ids -------------------------------------------------------------------------------
def test_a_task_id_of_300_allowed_characters_runs_and_saves_its_trajectory(project):
    long_id = "a" * 150 + "_" + "b" * 149
    write(project, "tasks/expert/long.yaml", gold_task(long_id))
    junit = project.path / "junit.xml"
    result = project.runpytest_subprocess(
        "--super-agent=gold", "--super-backend=local", f"--junitxml={junit}"
    )
    result.assert_outcomes(passed=2)
    (line,) = [r for r in run_results(project.path) if r["task_id"] == long_id]
    trajectory = Path(line["trajectory"])
    assert trajectory.is_file() and len(trajectory.name) <= 255
    assert json.loads(trajectory.with_suffix(".json").read_text())["task_id"] == long_id


# -- 11. timeouts, retries, load failures, run ids -----------------------------------------------------
def test_a_timed_out_task_carries_an_exit_status(project):
    write(
        project,
        "tasks/expert/slow.yaml",
        gold_task("slow").replace("print(", "import time; time.sleep(60); print("),
    )
    result = project.runpytest_subprocess(
        "--super-agent=gold", "--super-backend=local", "--timeout=5", "--timeout-method=signal"
    )
    result.assert_outcomes(passed=1, errors=1)
    (slow,) = [r for r in run_results(project.path) if r["task_id"] == "slow"]
    assert slow["outcome"] == "error" and slow["exit_status"] == "timeout", slow


def test_retries_back_off_and_every_retry_reason_survives(project, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")  # nothing listens there
    started = time.monotonic()
    result = project.runpytest_subprocess("--super-agent=gold", "--super-retries=2")
    elapsed = time.monotonic() - started
    result.assert_outcomes(errors=1)
    assert elapsed >= 2 + 4, elapsed  # waited 2 s, then 4 s
    (line,) = run_results(project.path)
    reasons = line["retried_after"].splitlines()
    assert [r.split(":")[0] for r in reasons] == ["attempt 1", "attempt 2"], reasons
    assert all("EngineUnavailable" in r for r in reasons)


def test_files_that_fail_to_load_are_errors_in_results_and_summary(project):
    write(project, "tasks/expert/broken.yaml", "id: broken\nquery: q\n")  # no answer
    write(project, "tasks/expert.jsonl", b"\x80junk\n" + super_row("fromjsonl") + b"\n")
    result = project.runpytest_subprocess("--super-agent=gold", "--super-backend=local", "-n", "2")
    # the row from the .jsonl has no solution: the gold agent cannot run it, a task error
    result.assert_outcomes(passed=1, errors=3)
    lines = {r["task_id"]: r for r in run_results(project.path)}
    assert lines["tasks/expert/broken.yaml"]["outcome"] == "error"
    assert "answer" in lines["tasks/expert/broken.yaml"]["load_error"]
    assert lines["tasks/expert.jsonl::line1"]["outcome"] == "error"
    assert "not UTF-8" in lines["tasks/expert.jsonl::line1"]["load_error"]
    assert len(lines) == 4  # once each, though both workers collected them
    (run_dir,) = (project.path / "reports").iterdir()
    assert lines["fromjsonl"]["exit_status"] == "task_error"
    assert "| expert | 4 | 1 | 3 |" in (run_dir / "summary.md").read_text()


def test_run_ids_have_64_random_bits():
    ids = {options.new_run_id() for _ in range(2000)}
    assert len(ids) == 2000
    for run_id in ids:
        assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{16}", run_id), run_id


# -- 15. report on JUnit with resumed tasks -----------------------------------------------------------
def test_report_on_junit_counts_resumed_tasks_with_their_earlier_outcome(project, capsys):
    """An agent that is not gold: a gold miss is an environment error, which resume runs again."""
    write(project, "tasks/expert/wrong.yaml", gold_task("wrong").replace("{x: 1}", "{x: 2}"))
    write_solution_agent(project.path)
    agent = f"--super-agent={SOLUTION_AGENT}"
    project.runpytest_subprocess(agent, "--super-backend=local")
    junit = project.path / "junit.xml"
    resumed = project.runpytest_subprocess(
        agent, "--super-backend=local", "--super-resume", f"--junitxml={junit}"
    )
    resumed.assert_outcomes(skipped=2)
    records = {r.task_id: r.outcome for r in report.read_junit(junit)}
    assert records == {"ok": "passed", "wrong": "failed"}
    from pytest_super.cli import main

    assert main(["report", str(junit)]) == 0
    table = capsys.readouterr().out
    assert re.search(r"expert\s+2\s+1\s+0\s+50\.0", table), table


LATE_SIGTERM = """
import os, signal, time
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):  # a CI cancel while the run writes its reports
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.2)
"""


def test_a_sigterm_while_the_reports_are_written_is_ignored(project):
    """The chaos run's SIGTERM once landed inside the HTML report's writing: a KeyboardInterrupt
    out of pytest_sessionfinish, a traceback, no JUnit file. The tasks are done by then; the
    signal is ignored and the reports are complete."""
    project.makeconftest(LATE_SIGTERM)
    junit = project.path / "junit.xml"
    result = project.runpytest_subprocess(
        "--super-agent=gold", "--super-backend=local", f"--junitxml={junit}"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert "KeyboardInterrupt" not in result.stdout.str() + result.stderr.str()
    assert junit_cases(junit) == {"ok": "passed"}
    (run_dir,) = (project.path / "reports").iterdir()
    assert (run_dir / "index.html").is_file()
    assert "| expert |" in (run_dir / "summary.md").read_text()


# -- on the real engine -------------------------------------------------------------------------------
def sleep_task(task_id: str, seconds: float) -> str:
    return gold_task(task_id).replace("print(", f"import time; time.sleep({seconds}); print(")


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture
def engine(image):
    return docker_client_for(None)


# -- 5. SIGTERM ------------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.parametrize("target", ["process-group", "controller"])
def test_sigterm_writes_junit_and_summary_keeps_late_results_and_leaves_nothing(
    pytester, engine, target
):
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    for i in range(2):
        write(pytester, f"tasks/expert/quick{i}.yaml", gold_task(f"quick{i}"))
    waits = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.1)\n"
    write(
        pytester,
        "tasks/expert/slowpass.yaml",
        gold_task("slowpass").replace(
            "      print(", "      " + waits.replace("\n", "\n      ") + "print("
        ),
    )
    write(pytester, "tasks/expert/zlong.yaml", sleep_task("zlong", 300))
    junit = pytester.path / "junit.xml"
    run = Run(pytester.path, "--super-agent=gold", "-n", "2", f"--junitxml={junit}")
    try:
        wait_for(lambda: len(recorded(pytester.path / "reports")) >= 2, 120, "the quick tasks")
        wait_for(
            lambda: running(engine, "slowpass", pytester.path / "reports"),
            60,
            "the slowpass container",
        )
        if target == "process-group":
            os.killpg(run.proc.pid, signal.SIGTERM)  # `timeout`, a CI cancel
        else:
            os.kill(run.proc.pid, signal.SIGTERM)  # `kill <pid>`, `docker stop` of a CI box
            time.sleep(0.5)
            (box,) = running(
                engine, "slowpass", pytester.path / "reports"
            )  # now let slowpass finish: after the signal
            box.exec_run(["touch", "/content/go"])
        code = run.wait(60)
    finally:
        run.kill()
    out = run.output()
    assert code == pytest.ExitCode.INTERRUPTED, out
    done = recorded(pytester.path / "reports")
    assert done["quick0"] == done["quick1"] == "passed", done
    if target == "controller":  # its worker finished it after the signal
        assert done["slowpass"] == "passed", out
    cases = junit_cases(junit)
    assert {k: v for k, v in cases.items() if k in done} == done
    (run_dir,) = (pytester.path / "reports").iterdir()
    assert "| expert |" in (run_dir / "summary.md").read_text()
    assert run_leftovers(engine, pytester.path / "reports") == []
    assert run.key_folders() == []


# -- 12. liveness that a PID namespace cannot fool ---------------------------------------------------
def unused_pid_above(start: int) -> int:
    """A pid with nothing running under it here (and none next to it), at most pid_max - 2."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    for pid in range(start, pid_max - 2):
        if not any(Path(f"/proc/{p}").exists() for p in range(pid, pid + 3)):
            return pid
    raise AssertionError("no free pid")


@pytest.mark.docker
def test_a_live_run_in_another_pid_namespace_keeps_its_containers(pytester, engine):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to start a run in a PID namespace of its own")
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    write(pytester, "tasks/expert/far.yaml", sleep_task("far", 45))
    # A CI container sharing the engine and the host name: in its own PID namespace the run's
    # pid is one that names no process out here, so by pid and host name it looks dead. Both
    # runs share a host name of their own (a UTS namespace each), which other pytest-super
    # sessions on this engine never take for theirs.
    host = f"ci-box-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    pid = unused_pid_above(20000)
    in_pid_namespace = ["unshare", "--pid", "--fork", "--mount-proc", "--uts", "sh", "-c"]
    inner = Run(
        pytester.path,
        "--super-agent=gold",
        "--super-report-dir=inner",
        prefix=[
            *in_pid_namespace,
            f'hostname {host}; echo {pid} > /proc/sys/kernel/ns_last_pid; "$@"',
            "sh",
        ],
    )
    try:
        (box,) = wait_for(
            lambda: running(engine, "far", pytester.path / "inner"), 120, "the far run's container"
        )
        assert not Path(f"/proc/{box.labels[LABEL_PID]}").exists(), box.labels  # looks dead
        assert box.labels[LABEL_HOST] == host
        write(pytester, "other/expert/near.yaml", gold_task("near"))
        near = Run(
            pytester.path,
            "other/expert/near.yaml",
            "--super-agent=gold",
            prefix=["unshare", "--uts", "sh", "-c", f'hostname {host}; "$@"', "sh"],
        )
        assert near.wait(120) == 0, near.output()
        assert running(engine, "far", pytester.path / "inner") == [box], (
            "an ordinary run removed a live run's container"
        )
        code = inner.wait(120)
    finally:
        inner.kill()
    assert code == 0, inner.output()
    (line,) = [
        json.loads(ln)
        for ln in next((pytester.path / "inner").glob("*/results.jsonl")).read_text().splitlines()
    ]
    assert line["outcome"] == "passed", line


def foreign_lease(engine, image: str, renewed_ago_s: float) -> Lease:
    """A lease held (so it says) by a process in another PID namespace, renewed long ago or now."""
    lease = Lease(engine, image)
    lease.stop_renewing()  # no renewals from this test process
    elsewhere = Holder(pid=1, boot_id="another-boot", pid_ns=1, start_ticks=1)
    lease.write(engine_time(engine) - renewed_ago_s, elsewhere)
    return lease


@pytest.mark.docker
def test_containers_of_an_expired_lease_are_removed_and_of_a_fresh_one_kept(engine, image):
    run_id = f"attack-lease-{time.monotonic_ns()}"
    expired = foreign_lease(engine, image, renewed_ago_s=TTL_S + 5)
    fresh = foreign_lease(engine, image, renewed_ago_s=1)
    boxes = {}
    try:
        for name, lease in (("expired", expired), ("fresh", fresh)):
            boxes[name] = engine.containers.create(
                image,
                command=["sleep", "60"],
                labels={"pytest-super": "1", LABEL_RUN: run_id, LABEL_LEASE: lease.id},
            )
        removed = cleanup_containers(engine, dead_runs_only=True)
        assert boxes["expired"].name in removed
        assert boxes["fresh"].name not in removed
        left = {c.name for c in engine.containers.list(all=True)}
        assert expired.name not in left and fresh.name in left
    finally:
        for box in boxes.values():
            with contextlib.suppress(Exception):
                box.remove(force=True)
        expired.release()
        fresh.release()
