"""LMR-Bench's tasks in every report of a real mixed run (issue 46, item 5): one SUPER task and
the LMR demo set (tasks/lmr), the gold agent, local kernels. Each benchmark is reported apart:
SUPER's summary over its SUPER tasks, LMR-Bench's pass rate overall and per category with 95%
intervals and upstream's published runs beside, in the HTML report (rendered by a real headless
Chromium with the network off), summary.md, `pytest-super report` and JUnit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super.cli import main as cli_main
from pytest_super.lmr_report import published_totals
from tests.support.projects import junit_properties
from tests.test_html_report import EXPERT_PASS, render, screenshot

#: one worker runs the module, so its mixed run is made once (`--dist loadgroup`)
pytestmark = pytest.mark.xdist_group("lmr-reports")

DEMO = Path(__file__).resolve().parents[1] / "tasks" / "lmr"
LMR_TASKS = ["01-NgramMetrics/1", "02-LabelSmoothing/1"]  # a task of each demo paper
EVAL = "Evaluation Metrics"
TRAIN = "Training Objectives &amp; Optimization Techniques"


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run of SUPER's `adder` and LMR's demo set with the gold agent."""
    root = tmp_path_factory.mktemp("mixed")
    (root / "pytest.ini").write_text("[pytest]\nsuper_tasks = tasks\n")
    (root / "tasks" / "expert").mkdir(parents=True)
    (root / "tasks" / "expert" / "adder.yaml").write_text(EXPERT_PASS)
    shutil.copytree(DEMO, root / "tasks" / "lmr")
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "pytest"),
            "tasks",
            "--deselect=tasks/lmr/01-NgramMetrics/info.json::01-NgramMetrics/2",
            "--super-agent=gold",
            "--super-backend=local",
            f"--junitxml={root / 'junit.xml'}",
            "--super-report-dir=reports",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "3 passed" in done.stdout, done.stdout[-4000:] + done.stderr[-3000:]
    (run_dir,) = (root / "reports").iterdir()
    (run_dir / "terminal.txt").write_text(done.stdout)
    return run_dir


def _table(dom: str, marker: str) -> str:
    start = dom.index(marker)
    return dom[start : dom.index("</table>", start)]


def test_the_html_report_shows_both_benchmarks_with_upstreams_baselines(
    mixed_run, tmp_path, record_property
):
    dom = render(mixed_run / "index.html", tmp_path)
    assert f"<title>SUPER and LMR-Bench run {mixed_run.name}</title>" in dom
    # SUPER's summary is over the SUPER task alone: no LMR group, no `all` mixing the two
    supers = _table(dom, 'class="summary"')
    groups = re.findall(r"<tr[^>]*>\s*<td>([^<]*)</td>", supers)
    assert groups == ["expert"], groups
    # LMR-Bench's: overall and per category, our pass rate, each published run beside
    lmr = _table(dom, 'class="summary lmr"')
    rows = {
        m[0]: m[1:]
        for m in re.findall(
            r'<tr class="(?:total|sub)">\s*<td>([^<]*)</td><td class="num">(\d+)</td>'
            r'<td class="num">(\d+)</td><td class="num">(\d+)</td>\s*'
            r'<td class="num ours"><b>([\d.]+)</b>',
            lmr,
        )
    }
    assert rows == {
        "all": ("2", "2", "0", "100.0"),
        EVAL: ("1", "1", "0", "100.0"),
        TRAIN: ("1", "1", "0", "100.0"),
    }
    heads = [
        (re.sub("<[^>]+>", "", name), rate)  # the name breakable after its slash (<wbr>)
        for name, rate in re.findall(
            r'<th class="paper"[^>]*>(.*?)<span class="published">([^<]*)</span>', lmr
        )
    ]
    assert ("OpenHands/gpt4o", "published 25.0% of 28") in heads
    assert ("OpenHands/claude3.7", "published 50.0% of 28") in heads
    assert ("BaseAgent/gpt4.1", "published 42.9% of 28") in heads
    assert len(heads) == len(published_totals()) == 5
    # task by task: our outcome, the unit tests' counts, upstream's log verdict, the published
    # runs' verdicts (the demo tasks are ours: no published run scored them)
    tasks = _table(dom, 'id="lmr-tasks"')
    for task_id in LMR_TASKS:
        (row,) = re.findall(rf'<tr class="lmr-row" data-task="{task_id}">(.*?)</tr>', tasks, re.S)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        assert 'class="badge passed">passed' in cells[2], cells
        assert [re.sub("<[^>]+>", "", c) for c in cells[3:7]] == ["1", "0", "0", "PASS"], cells
        assert cells[7:] == ['<span class="missing">not run</span>'] * 5, cells
    # the page's filters act on the run's task list (all 3 tasks), not on the LMR table above it
    # (it has class `tasks` too: the script took the first such table and said "2 of 2 shown")
    assert '<span class="shown" id="shown">3 of 3 shown</span>' in dom, re.findall(
        r'<span class="shown"[^>]*>[^<]*</span>', dom
    )
    # an LMR task's page: the unit tests' counts and verdicts, no SUPER answer or scores
    from pytest_super.html import page_name

    page = (mixed_run / page_name("01-NgramMetrics/1")).read_text()
    assert "<dt>tests run</dt><dd>1</dd>" in page and "<dd>PASS</dd>" in page
    assert "<h2>Answer</h2>" not in page and "<dt>accuracy</dt>" not in page
    assert "<h2>Answer</h2>" in (mixed_run / page_name("adder")).read_text()
    shot = screenshot(mixed_run / "index.html", tmp_path, "report-lmr-mixed", height=1300)
    record_property("screenshot", str(shot))


def test_summary_md_and_the_terminal_report_each_benchmark_apart(mixed_run):
    for text in ((mixed_run / "summary.md").read_text(), (mixed_run / "terminal.txt").read_text()):
        supers, lmr = re.split(r"^\|? ?LMR-Bench\b", text, maxsplit=1, flags=re.M)
        assert re.search(r"^\|? ?expert\b", supers, re.M), text
        assert not re.search(r"^\|? ?(lmr|all)\b", supers, re.M), text  # SUPER's: no LMR task
        all_row = r"^\|? ?all\s*\|?\s*2\s*\|?\s*2\s*\|?\s*0\s*\|?\s*100\.0"
        assert re.search(all_row, lmr, re.M), text


def test_the_report_command_reads_both_benchmarks_from_junit_and_results(mixed_run, capsys):
    for source in (mixed_run.parent.parent / "junit.xml", mixed_run / "results.jsonl"):
        assert cli_main(["report", str(source)]) == 0
        out = capsys.readouterr().out
        lines = [re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.strip()]
        groups = [line[0] for line in lines]
        assert "expert" in groups and "lmr" not in groups, out
        lmr_header = groups.index("LMR-Bench")
        assert lines[lmr_header][:5] == ["LMR-Bench", "tasks", "pass", "err", "pass%"], out
        by_group = {line[0]: line for line in lines[lmr_header + 1 :]}
        assert by_group["all"][1:5] == ["2", "2", "0", "100.0"], out
        assert by_group["Evaluation Metrics"][1:5] == ["1", "1", "0", "100.0"], out


def test_junit_carries_each_lmr_tasks_counts_and_verdicts(mixed_run):
    junit = mixed_run.parent.parent / "junit.xml"
    props = junit_properties(junit)
    for task_id in LMR_TASKS:
        assert props[task_id]["super.set"] == "lmr"
        assert props[task_id]["super.tests_run"] == "1"
        assert props[task_id]["super.upstream_verdict"] == "PASS"
    text = junit.read_text()
    assert re.search(
        r"<system-out>LMR-Bench 01-NgramMetrics/1: passed [^<]*unit_tests=1.0 tests_run=1 "
        r"tests_failed=0 tests_errored=0 upstream_verdict=PASS</system-out>",
        text,
    ), text
    assert "SUPER adder: passed" in text


def test_a_verdict_with_spaces_is_quoted_in_the_system_out_line():
    from pytest_super.junit import summary_line

    line = summary_line(
        "13-DecBound/1",
        "failed",
        {"set": "lmr", "upstream_verdict": "FAIL (found 0 failure lines)"},
    )
    assert line == 'LMR-Bench 13-DecBound/1: failed upstream_verdict="FAIL (found 0 failure lines)"'
