"""`--super-repeat N`: each task N times as its own item, under xdist and --super-resume, with
pass@k and pass^k in the summary."""

from __future__ import annotations

import json

import pytest

from tests.support.projects import SOLUTION_AGENT, write_solution_agent

# Passes on the 1st and 3rd run of the task wherever and in whichever order the runs happen: each
# run claims the next free ticket (O_EXCL, atomic across xdist workers) and submits a wrong sum on
# even tickets. So 3 runs give c = 2 passes of n = 3. The agent runs the solution as gold does, but
# is not gold: a gold miss would be an environment error, and pass@k counts failures.
FLAKY = """\
id: flaky
query: 'Report the sum as {{"sum": 0}}.'
answer: {{sum: 5}}
solution:
  - execute: |
      import json, os
      ticket = 1
      while True:
          try:
              os.close(os.open(f"{tickets}/{{ticket}}", os.O_CREAT | os.O_EXCL))
              break
          except FileExistsError:
              ticket += 1
      print(json.dumps({{"sum": 5 if ticket % 2 else 4}}))
"""

STEADY = """\
id: steady
query: 'Report the sum as {"sum": 0}.'
answer: {sum: 5}
solution:
  - execute: |
      print('{"sum": 5}')
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    tickets = pytester.path / "tickets"
    tickets.mkdir()
    (pytester.path / "tasks" / "expert").mkdir(parents=True)
    (pytester.path / "tasks/expert/flaky.yaml").write_text(FLAKY.format(tickets=tickets))
    (pytester.path / "tasks/expert/steady.yaml").write_text(STEADY)
    write_solution_agent(pytester.path)
    return pytester


def run_args(*extra: str) -> list[str]:
    return [
        "tasks",
        f"--super-agent={SOLUTION_AGENT}",
        "--super-backend=local",
        "--super-report-dir=out",
        "--super-repeat=3",
        "-p",
        "no:randomly",
        *extra,
    ]


def test_repeat_items_have_suffixed_ids_and_k_selects_them(project):
    result = project.runpytest_subprocess(*run_args("--collect-only", "-q"))
    assert sorted(ln for ln in result.outlines if "::" in ln) == [
        f"tasks/expert/{task}.yaml::{task}[repeat{n}]"
        for task in ("flaky", "steady")
        for n in (1, 2, 3)
    ]
    result = project.runpytest_subprocess(*run_args("--collect-only", "-q", "-k", "repeat2"))
    assert sorted(ln for ln in result.outlines if "::" in ln) == [
        "tasks/expert/flaky.yaml::flaky[repeat2]",
        "tasks/expert/steady.yaml::steady[repeat2]",
    ]


def test_repeats_under_xdist_give_pass_at_k_and_pass_hat_k(project):
    result = project.runpytest_subprocess(*run_args("-n", "2"))
    result.assert_outcomes(passed=5, failed=1)
    (run_dir,) = (project.path / "out").iterdir()
    lines = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["repeat"]) for r in lines) == [
        (f"{task}[repeat{n}]", n) for task in ("flaky", "steady") for n in (1, 2, 3)
    ]
    # each repeat wrote its own trajectory
    assert len(list((run_dir / "trajectories").glob("*.json"))) == 6
    # by hand: flaky runs [1, 0, 1] -> 2/3, steady [1, 1, 1] -> 1; the mean over the two tasks is
    # 5/6 = 83.3%. pass@3 = mean(1 - C(1,3)/C(3,3), 1) = 1; pass^3 = mean(C(2,3)/C(3,3), 1) = 0.5
    summary = (run_dir / "summary.md").read_text()
    header, _, expert = summary.splitlines()[4:7]
    cells = dict(zip(cells_of(header), cells_of(expert), strict=True))
    assert cells["tasks"] == "2" and cells["runs"] == "6" and cells["pass"] == "5"
    assert cells["acc%"].startswith("83.3 [")
    assert cells["pass@k"] == "100.0" and cells["pass^k"] == "50.0"
    assert "pass@k" in result.stdout.str() and "pass^k" in result.stdout.str()
    page = (run_dir / "index.html").read_text()
    assert "<th>pass@k</th><th>pass^k</th>" in page
    assert 'data-task="flaky[repeat2]"' in page


def cells_of(markdown_row: str) -> list[str]:
    return [c.strip() for c in markdown_row.strip().strip("|").split("|")]


def test_resume_skips_finished_repeats_only(project):
    first = project.runpytest_subprocess(*run_args("-k", "repeat1 or repeat2"))
    first.assert_outcomes(passed=3, failed=1)
    again = project.runpytest_subprocess(*run_args("--super-resume"))
    again.assert_outcomes(passed=2, skipped=4)
    newest = sorted((project.path / "out").iterdir())[-1]
    lines = [json.loads(ln) for ln in (newest / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in lines) == sorted(
        f"{task}[repeat{n}]" for task in ("flaky", "steady") for n in (1, 2, 3)
    )


def test_repeat_must_be_positive(project):
    result = project.runpytest_subprocess(*run_args("--super-repeat=0"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--super-repeat 0: give 1 or more runs per task*"])
