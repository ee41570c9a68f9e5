"""The plugin seen from the outside: collection, markers, selection, errors, runs and reports.

Each test builds a small project with pytester and runs pytest on it in a subprocess, the way a
user would. Runs use the local kernel backend (a real ipykernel) so they are quick; the Docker
path is covered in test_integration_docker.py.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from tests.support.projects import SOLUTION_AGENT, write_solution_agent
from tests.support.projects import junit_properties as read_junit_properties

#: an agent that is not gold and runs the solution cells: its misses are failures (a gold miss is
#: an environment error), for the tests of what a failure shows
SOLUTION = f"--super-agent={SOLUTION_AGENT}"

GOOD_EXPERT = """\
id: adder
query: 'Add the numbers. Report the sum as a json structured as follows: {"sum": 0}.'
answer: {sum: 5, label: "five"}
landmarks: ['adding \\d+ numbers', 'done']
solution:
  - execute: |
      nums = [2, 3]
      print(f"adding {len(nums)} numbers")
  - execute: |
      import json
      print("done")
      print(json.dumps({"sum": sum(nums), "label": "five"}))
"""

GOOD_MASKED = """\
id: adder_data,cpu
query: I have already executed some of the required steps. Now, report the sum.
answer: {sum: 5.5}
landmarks: ['prefix ran', 'total']
pre_executed:
  - execute: |
      print("prefix ran")
      open("config.txt", "w").write("a = 2\\nb = 3\\n")
  - edit:
      file: config.txt
      before: |
        b = 3
      after: |
        b = 3.5
solution:
  - execute: |
      import json
      values = dict(line.split(" = ") for line in open("config.txt").read().splitlines())
      print("total", sum(float(v) for v in values.values()))
      print(json.dumps({"sum": sum(float(v) for v in values.values())}))
"""

AUTO = """\
id: runner
query: Run the script.
entrypoint: train.py
solution:
  - execute: |
      print("quick")
"""

OFF_BY_002 = """\
id: almost
query: Report the score.
answer: {score: 0.5, name: "x"}
landmarks: ['scored']
solution:
  - execute: |
      import json
      print("scored")
      print(json.dumps({"score": 0.52, "name": "x"}))
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    for rel, text in {
        "tasks/expert/adder.yaml": GOOD_EXPERT,
        "tasks/masked/adder_data,cpu.yaml": GOOD_MASKED,
        "tasks/auto/runner.yaml": AUTO,
    }.items():
        path = pytester.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    write_solution_agent(pytester.path)
    return pytester


def write(pytester: pytest.Pytester, rel: str, text: str) -> None:
    path = pytester.path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_collects_every_task_with_node_ids(project):
    result = project.runpytest_subprocess("tasks", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "tasks/auto/runner.yaml::runner",
            "tasks/expert/adder.yaml::adder",
            "tasks/masked/adder_data,cpu.yaml::adder_data,cpu",
        ]
    )
    assert result.ret == 0


def test_markers_select_categories_and_pass_strict_markers(project):
    result = project.runpytest_subprocess(
        "tasks", "--collect-only", "-q", "--strict-markers", "-m", "data or cpu"
    )
    result.stdout.fnmatch_lines(
        ["tasks/masked/adder_data,cpu.yaml::adder_data,cpu", "*1/3 tests collected*"]
    )
    result = project.runpytest_subprocess("tasks", "--collect-only", "-q", "-m", "expert")
    result.stdout.fnmatch_lines(["tasks/expert/adder.yaml::adder", "*1/3 tests collected*"])


def test_super_set_selects_a_set_and_k_selects_ids(project):
    result = project.runpytest_subprocess("tasks", "--collect-only", "-q", "--super-set=masked")
    result.stdout.fnmatch_lines(["tasks/masked/adder_data,cpu.yaml::adder_data,cpu"])
    assert "adder.yaml::adder\n" not in result.stdout.str()
    result = project.runpytest_subprocess("tasks", "--collect-only", "-q", "-k", "runner")
    result.stdout.fnmatch_lines(["tasks/auto/runner.yaml::runner", "*1/3 tests collected*"])


def test_super_set_without_paths_collects_the_task_folders(project):
    project.makeini("[pytest]\nsuper_tasks = tasks\ntestpaths = tests\n")
    result = project.runpytest_subprocess("--collect-only", "-q", "--super-set=expert")
    result.stdout.fnmatch_lines(["tasks/expert/adder.yaml::adder"])


def test_plain_pytest_skips_tasks_and_says_how_to_run_them(project):
    result = project.runpytest_subprocess("tasks", "-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*--super-agent=gold*"])
    assert not (project.path / "reports").exists()


def test_jsonl_lines_are_items_and_a_bad_line_loses_no_other(project):
    rows = [
        {"task_id": "one", "query": "q", "answer": json.dumps({"a": 1}), "landmarks": []},
        {"task_id": "two", "query": "q", "answer": "{not json", "landmarks": []},
        {"task_id": "three_goal", "query": "q", "answer": json.dumps([1, 2]), "landmarks": []},
    ]
    write(project, "tasks/masked.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    result = project.runpytest_subprocess("tasks/masked.jsonl", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "tasks/masked.jsonl::one",
            "tasks/masked.jsonl::three_goal",
            "*masked.jsonl:2*answer*{not json*",
        ]
    )
    result = project.runpytest_subprocess(
        "tasks/masked.jsonl", "--collect-only", "-q", "-m", "goal"
    )
    result.stdout.fnmatch_lines(["tasks/masked.jsonl::three_goal"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id: x\nquery: [unclosed\n", ["*bad.yaml*"]),
        ("id: x\nquery: q\nanswer: 1\nanwser: 2\n", ["*bad.yaml*anwser*"]),
        ("id: x\nanswer: 1\n", ["*bad.yaml*query*"]),
        ("id: x\nquery: q\n", ["*bad.yaml*answer*"]),
        (
            "id: x\nquery: q\nanswer: 1\nlandmarks: ['(unclosed']\n",
            ["*bad.yaml*landmarks*(unclosed*"],
        ),
    ],
    ids=["malformed-yaml", "unknown-field", "missing-query", "missing-answer", "bad-regex"],
)
def test_bad_task_files_are_collection_errors_that_name_file_and_field(project, text, expected):
    write(project, "tasks/expert/bad.yaml", text)
    result = project.runpytest_subprocess("tasks", "--collect-only", "-q")
    result.stdout.fnmatch_lines(expected)
    result.stdout.fnmatch_lines(["tasks/expert/adder.yaml::adder", "*1 error*"])


def test_auto_task_without_entrypoint_is_an_error(project):
    write(project, "tasks/auto/noentry.yaml", "id: noentry\nquery: run it\n")
    result = project.runpytest_subprocess("tasks", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*noentry.yaml*entrypoint*"])


def test_duplicate_task_id_across_files_is_an_error(project):
    write(project, "tasks/expert/again.yaml", GOOD_EXPERT)
    result = project.runpytest_subprocess("tasks", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*duplicate task id*adder*"])


def test_a_bad_file_does_not_stop_the_other_tasks_from_running(project):
    write(project, "tasks/expert/bad.yaml", "id: x\nquery: q\n")
    result = project.runpytest_subprocess(
        "tasks/expert", "--super-agent=gold", "--super-backend=local"
    )
    result.assert_outcomes(passed=1, errors=1)


def test_gold_run_scores_and_reports(project):
    junit = project.path / "junit.xml"
    result = project.runpytest_subprocess(
        "tasks",
        "--super-agent=gold",
        "--super-backend=local",
        f"--junitxml={junit}",
        "--super-report-dir=out",
        "-p",
        "no:randomly",
    )
    # the auto task's script never runs the entrypoint for 10 s: it misses by design, which
    # under gold is an environment error (test_junit_properties_reach_the_controller_under_xdist
    # scores it with an agent that is not gold)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*EnvironmentFault: the expert solution did not run the task's script: script-executed 0 *"
        ]
    )
    result.stdout.fnmatch_lines(["*SUPER summary*", "*expert*", "*masked*"])
    props = read_junit_properties(junit)
    assert props["adder"]["super.accuracy"] == "1.0"
    assert props["adder"]["super.landmarks"] == "1.0"
    assert props["adder"]["super.submitted"] == "true"
    assert props["adder_data,cpu"]["super.category"] == "data,cpu"
    assert props["adder_data,cpu"]["super.landmarks"] == "1.0"
    assert props["runner"]["super.exit_status"] == "environment_error"
    for name in (
        "super.set",
        "super.agent",
        "super.exit_status",
        "super.steps",
        "super.duration_s",
        "super.prompt_tokens",
        "super.cost_usd",
        "super.trajectory",
        "super.model",
    ):
        assert name in props["adder"], name
    (run_dir,) = (project.path / "out").iterdir()
    lines = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["outcome"]) for r in lines) == [
        ("adder", "passed"),
        ("adder_data,cpu", "passed"),
        ("runner", "error"),
    ]
    assert "| expert |" in (run_dir / "summary.md").read_text()
    notebook = props["adder"]["super.trajectory"]
    assert notebook.endswith(".ipynb")
    import nbformat

    nbformat.validate(nbformat.read(notebook, as_version=4))


def test_answer_off_by_002_fails_with_a_readable_diff(project):
    write(project, "tasks/expert/almost.yaml", OFF_BY_002)
    result = project.runpytest_subprocess(
        "tasks/expert/almost.yaml", SOLUTION, "--super-backend=local"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*SUPER task almost (expert) did not pass: accuracy 0.500 < 1*",
            "*exit status: submitted*",
            "*MISS score: expected 0.5, submitted 0.52*",
            '*ok   name: expected "x", submitted "x"*',
            "*trajectory: *almost.ipynb*",
        ]
    )


def test_a_gold_answer_not_reproduced_is_an_environment_error_that_says_which(project):
    """Issue 44: under gold any miss of the expert solution is the environment's. Red before:
    `1 failed` (the wrong answer charged as a failure)."""
    write(project, "tasks/expert/almost.yaml", OFF_BY_002)
    result = project.runpytest_subprocess(
        "tasks/expert/almost.yaml", "--super-agent=gold", "--super-backend=local"
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*EnvironmentFault: the expert solution did not reproduce the gold answer: accuracy "
            "0.5 (score: expected 0.5, submitted 0.52); the environment differs from the one the "
            "answer was recorded in*"
        ]
    )


#: our messages that name a path: the failure text, the header, the summary
PATH_MESSAGES = ("trajectory: ", "reports in ", "reports: ", "HTML report: ")


def test_messages_name_paths_relative_to_the_working_folder(project):
    """Red before issue 30 item 6: the failure text, the header and the summary printed
    absolute paths (`trajectory: /tmp/pytest-of-root/.../reports/<run>/almost.ipynb`)."""
    write(project, "tasks/expert/almost.yaml", OFF_BY_002)
    result = project.runpytest_subprocess(
        "tasks/expert/almost.yaml", SOLUTION, "--super-backend=local"
    )
    result.assert_outcomes(failed=1)
    (run_dir,) = (project.path / "reports").iterdir()
    run = f"reports{os.sep}{run_dir.name}"
    result.stdout.fnmatch_lines(
        [
            f"pytest-super: run {run_dir.name}, reports in {run}",
            f"trajectory: {run}{os.sep}*almost.ipynb",
            f"reports: {run}",
            f"HTML report: {run}{os.sep}index.html",
        ]
    )
    shown = [ln for ln in result.stdout.lines if any(m in ln for m in PATH_MESSAGES)]
    assert len(shown) >= 4 and not [ln for ln in shown if str(project.path) in ln], shown


def test_messages_name_paths_outside_the_working_folder_absolute(project, tmp_path_factory):
    """The sibling: a report folder outside the working folder is named in full."""
    write(project, "tasks/expert/almost.yaml", OFF_BY_002)
    elsewhere = tmp_path_factory.mktemp("elsewhere").resolve()
    result = project.runpytest_subprocess(
        "tasks/expert/almost.yaml",
        SOLUTION,
        "--super-backend=local",
        f"--super-report-dir={elsewhere}",
    )
    result.assert_outcomes(failed=1)
    (run_dir,) = elsewhere.iterdir()
    result.stdout.fnmatch_lines(
        [f"trajectory: {run_dir}{os.sep}*almost.ipynb", f"reports: {run_dir}"]
    )


def test_tolerance_and_pass_metric_options(project):
    write(project, "tasks/expert/almost.yaml", OFF_BY_002)
    result = project.runpytest_subprocess(
        "tasks/expert/almost.yaml",
        "--super-agent=gold",
        "--super-backend=local",
        "--super-tolerance=0.05",
    )
    result.assert_outcomes(passed=1)
    result = project.runpytest_subprocess(
        "tasks/expert/almost.yaml",
        "--super-agent=gold",
        "--super-backend=local",
        "--super-pass-metric=landmarks",
    )
    result.assert_outcomes(passed=1)


def test_failing_prefix_cell_is_recorded_and_the_task_runs(project):
    # SUPER's reference records a failing pre-executed cell and goes on (issue 9, item 1)
    write(
        project,
        "tasks/masked/broken_data.yaml",
        """\
        id: broken_data
        query: q
        answer: {a: 1}
        landmarks: ['prefix broke']
        pre_executed:
          - execute: raise RuntimeError("prefix broke")
        solution:
          - execute: |
              print('{"a": 1}')
        """,
    )
    result = project.runpytest_subprocess(
        "tasks/masked/broken_data.yaml",
        "--super-agent=gold",
        "--super-backend=local",
        "--super-pass-metric=landmarks",
    )
    result.assert_outcomes(passed=1)  # the prefix's error output is in the record: landmark hit


def test_engine_down_is_an_error_not_a_failure(project, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    result = project.runpytest_subprocess("tasks/expert", "--super-agent=gold")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*EngineUnavailable*127.0.0.1:1*"])


def test_junit_properties_reach_the_controller_under_xdist(project):
    junit = project.path / "junit.xml"
    result = project.runpytest_subprocess(
        "tasks",
        SOLUTION,
        "--super-backend=local",
        "-n",
        "2",
        f"--junitxml={junit}",
        "--super-report-dir=out",
    )
    result.assert_outcomes(passed=2, failed=1)
    cases = read_junit_properties(junit)
    assert len(cases) == 3
    for names in cases.values():
        assert {"super.accuracy", "super.landmarks", "super.exit_status"} <= set(names)
    assert cases["runner"]["super.script_executed"] == "0.0"  # the auto task, by design
    (run_dir,) = (project.path / "out").iterdir()
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3  # written once, by the controller


def test_report_command_reads_junit_files(project, capsys):
    junit = project.path / "junit.xml"
    project.runpytest_subprocess(
        "tasks", SOLUTION, "--super-backend=local", f"--junitxml={junit}"
    ).assert_outcomes(passed=2, failed=1)
    from pytest_super.cli import main

    capsys.readouterr()
    assert main(["report", str(junit), str(junit)]) == 0
    out = capsys.readouterr().out.splitlines()
    lines, legend = out[: out.index("")], out[out.index("") + 1 :]
    assert lines[0].split()[:3] == ["group", "A:tasks", "A:pass"]
    assert len(lines[0].split()) == 1 + 2 * 9  # one column group per file
    assert legend[0] == f"A: {SOLUTION_AGENT}" and len(legend) == 2
    assert legend[1].startswith(f"B: {SOLUTION_AGENT}(")
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    # tasks, pass, err, acc%, lm%, sub%, exec%: both files give the same numbers
    assert (
        rows["expert"][:7]
        == rows["expert"][9:16]
        == ["1", "1", "0", "100.0", "100.0", "100.0", "-"]
    )
    # Auto has no submission by design (issue 23): its submitted is "-", not 0.0
    assert rows["auto"][:7] == ["1", "0", "0", "-", "-", "-", "0.0"]
    assert rows["all"][:3] == ["3", "2", "0"]


def test_import_command_writes_yaml_tasks_that_collect(project):
    rows = [
        {
            "task_id": "one_goal",
            "query": "q",
            "answer": json.dumps({"a": 1}),
            "landmarks": ["x"],
            "pre_execute_cells": [json.dumps({"type": "execute", "content": "print(1)"})],
        }
    ]
    src = project.path / "masked.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    from pytest_super.cli import main

    assert (
        main(["import", str(src), "--set", "masked", "--out", str(project.path / "tasks/masked")])
        == 0
    )
    result = project.runpytest_subprocess("tasks/masked", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["tasks/masked/one_goal.yaml::one_goal"])


def test_unknown_agent_is_a_usage_error_at_start(project):
    result = project.runpytest_subprocess("tasks", "--super-agent=nosuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--super-agent*unknown agent 'nosuch'*gold*"])


def test_llm_agent_without_model_is_a_usage_error(project):
    result = project.runpytest_subprocess("tasks", "--super-agent=react")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--super-model*"])


def test_live_prints_each_step(project):
    result = project.runpytest_subprocess(
        "tasks/expert", "--super-agent=gold", "--super-backend=local", "--super-live"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["[[]adder[]] execute:*", "*| adding 2 numbers*", "[[]adder[]] submit:*"]
    )


AGENT_MODULE = """
from pytest_super.agents.base import AgentResult, ExitStatus
from pytest_super.trajectory import Step


class SumAgent:
    name = "sum-agent"
    needs_llm = False  # it asks no model, so no --super-model is needed

    def run(self, env):
        result = env.execute("print(2 + 3)")
        env.record(Step(thought="add", action="execute", content="print(2 + 3)",
                        output=result.output, code="print(2 + 3)", duration_s=result.duration_s))
        total = int(result.output.strip())
        return AgentResult(ExitStatus.SUBMITTED, '{"sum": %d, "label": "five"}' % total)
"""


def test_third_party_agent_by_module_path(project):
    write(project, "my_agents.py", AGENT_MODULE)
    result = project.runpytest_subprocess(
        "tasks/expert",
        "--super-agent=my_agents:SumAgent",
        "--super-backend=local",
        "--super-pass-metric=accuracy",
    )
    result.assert_outcomes(passed=1)


def test_fixtures_serve_a_users_own_tests(project):
    write(
        project,
        "test_mine.py",
        """\
        import pytest

        def test_kernel_runs_cells(super_kernel):
            assert super_kernel.execute("x = 20 + 1", 10).status == "ok"
            assert super_kernel.execute("print(x * 2)", 10).output.strip() == "42"

        @pytest.mark.super_task("tasks/expert/adder.yaml")
        def test_task_of_a_file(super_task):
            assert super_task.id == "adder" and super_task.answer == {"sum": 5, "label": "five"}
        """,
    )
    result = project.runpytest_subprocess("test_mine.py", "--super-backend=local")
    result.assert_outcomes(passed=2)


def test_a_dead_engine_ends_the_run_once_with_the_resume_command(project, monkeypatch):
    # issue 44: a missing engine errored each task in turn; now the first task's error stops the
    # run (one message, the command that runs the rest), as the endpoint's circuit breaker does
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    result = project.runpytest_subprocess("tasks", "--super-agent=gold", "-p", "no:randomly")
    result.assert_outcomes(errors=1, skipped=1)  # the next task: not started; the third: not run
    out = result.stdout.str()
    assert out.count("EngineUnavailable") >= 1
    result.stdout.fnmatch_lines(
        [
            "*SUPER run stopped*",
            "pytest-super: the Docker engine stopped answering*127.0.0.1:1*",
            "    pytest *tasks --super-agent=gold -p no:randomly --super-resume",
        ]
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
