"""LMR-Bench's summary (issue 46, item 6): pass rate overall and per category with 95%
intervals, upstream's published pass rates beside them over the same tasks, and a mixed run's
SUPER tasks left to SUPER's table."""

from __future__ import annotations

import json
import re

from pytest_super.lmr_report import PUBLISHED, lmr_table, published_runs
from pytest_super.report import TaskRecord

EVAL = "Evaluation Metrics"
TRAIN = "Training Objectives & Optimization Techniques"


def _record(task_id: str, outcome: str, category: str, set_name: str = "lmr") -> TaskRecord:
    return TaskRecord(task_id, outcome, {"set": set_name, "category": category})


def test_published_rates_are_upstreams_results_txt_totals():
    data = json.loads(PUBLISHED.read_text())
    assert "MIT" in data["_license"] and "da757c9" in data["_source"]
    for name, run in data["runs"].items():
        tests = run["tests"]
        assert len(tests) == 28, name
        assert (
            abs(sum(v == "PASS" for v in tests.values()) / 28 - run["published_pass_rate"]) < 1e-3
        )
    # the paper's headline: OpenHands with gpt-4o passes 25%
    assert data["runs"]["OpenHands/gpt4o"]["published_pass_rate"] == 0.25
    assert published_runs()["OpenHands/gpt4o"]["13-DecBound/1"] == "PASS"


def test_the_table_has_overall_and_per_category_rates_with_intervals_and_upstream_beside():
    records = [
        _record("16-KnowProb/4", "passed", "Information Extraction & Knowledge Integration"),
        _record("07-bertscore/1", "passed", EVAL),
        _record("14-EmojiCrypt/1", "failed", EVAL),
        _record("15-EmpathyBias/1", "error", EVAL),
        _record("01-DPO/1", "failed", TRAIN),
        _record("tabular-mlp", "passed", "", set_name="expert"),  # SUPER's, not in this table
        _record("23-SimCLR/1", "skipped", TRAIN),
    ]
    lines = [re.split(r"\s{2,}", ln.strip()) for ln in lmr_table(records).splitlines()]
    header, rows = lines[0], {row[0]: dict(zip(lines[0], row, strict=True)) for row in lines[1:]}
    assert header[:5] == ["LMR-Bench", "tasks", "pass", "err", "pass%"]
    assert set(rows) == {"all", EVAL, TRAIN, "Information Extraction & Knowledge Integration"}
    # all: five tasks, the error left out of the rate: 2 of 4 passed, with its interval
    assert [rows["all"][k] for k in ("tasks", "pass", "err")] == ["5", "2", "1"]
    assert rows["all"]["pass%"] == "50.0 [0.0-100.0]"
    assert rows[TRAIN]["pass%"] == "0.0" and rows[EVAL]["pass%"] == "50.0 [0.0-100.0]"
    # upstream's runs over the same tasks: OpenHands/gpt4o passed 16-KnowProb/4 of the five,
    # claude-3.7 also 01-DPO/1
    assert rows["all"]["OpenHands/gpt4o%"] == "20.0 (n=5)"
    assert rows[TRAIN]["OpenHands/claude3.7%"] == "100.0 (n=1)"
    assert rows[EVAL]["BaseAgent/gpt4.1%"] == "0.0 (n=3)"
    assert lmr_table([_record("tabular-mlp", "passed", "", set_name="expert")]) == ""


def test_the_markdown_table_for_summary_md():
    table = lmr_table([_record("07-bertscore/1", "passed", EVAL)], markdown=True)
    assert table.splitlines()[0].startswith("| LMR-Bench | tasks | pass | err | pass% |")
    assert table.splitlines()[1].startswith("|---|")


def test_a_mixed_run_keeps_supers_scores_to_super_tasks():
    """SUPER's table of a mixed run: the LMR tasks under `lmr`, with no SUPER score of their own
    (before: `sub%` 0.0, as if each had failed to submit), the `all` row's scores SUPER's."""
    from pytest_super.report import summarize

    records = [
        TaskRecord("tabular-mlp", "passed", {"set": "expert", "accuracy": 1.0, "submitted": True}),
        TaskRecord(
            "07-bertscore/1", "passed", {"set": "lmr", "category": EVAL, "submitted": False}
        ),
    ]
    rows = {row.group: row for row in summarize(records)}
    assert set(rows) == {"expert", "lmr", "all"}
    assert (rows["lmr"].tasks, rows["lmr"].passed, rows["lmr"].submitted) == (1, 1, None)
    assert (rows["all"].tasks, rows["all"].submitted, rows["all"].accuracy) == (2, 1.0, 1.0)
