"""Round four of attacks (issue 29, cause 1): published episodes imported with `pytest-super
import-trajectories`. A metrics.json or history.ipynb may be a FIFO, nested 100,000 deep or
mistyped (scores that are text, lists, NaN, Infinity, 1e400, -1, 5; cells and outputs that are not
objects): that episode is named with its file and reason and left out, the others are imported.
The command runs in a subprocess with a timeout, so a hang is a failure, not a stuck suite.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.attack_runs import DEEP, cli
from tests.support.published_data import sample_runs

RUN_NAME = "gpt-4o-2024-08-06_swe-agent_masked"


# -- cause 1: import-trajectories ------------------------------------------------------------------
def _good_episode() -> Path:
    return sample_runs() / RUN_NAME / "acqsurvey_issue"


def _notebook(*cells: object) -> str:
    return json.dumps({"cells": [{"cell_type": "markdown", "source": "### Step 1"}, *cells]})


#: episode folder -> (file, its content; None for a FIFO), the other file copied from a good one
BAD_EPISODES: dict[str, tuple[str, str | None]] = {
    "metrics_deep": ("metrics.json", DEEP),
    "metrics_string": ("metrics.json", '{"output_match": "high"}'),
    "metrics_list": ("metrics.json", '{"checkpoints": [1]}'),
    "metrics_nan": ("metrics.json", '{"output_match": NaN}'),
    "metrics_infinity": ("metrics.json", '{"output_match": Infinity}'),
    "metrics_1e400": ("metrics.json", '{"entrypoint": 1e400}'),
    "metrics_minus_one": ("metrics.json", '{"output_match": -1}'),
    "metrics_five": ("metrics.json", '{"output_match": 5}'),
    "metrics_quoted_one": ("metrics.json", '{"output_match": "1"}'),
    "metrics_submitted_text": ("metrics.json", '{"submitted": "false"}'),
    "metrics_fifo": ("metrics.json", None),
    "notebook_fifo": ("history.ipynb", None),
    "notebook_deep": ("history.ipynb", '{"cells": ' + DEEP + "}"),
    "cells_not_objects": ("history.ipynb", _notebook(1, "x", [2])),
    "outputs_not_objects": (
        "history.ipynb",
        _notebook({"cell_type": "code", "source": "print(1)", "outputs": [1, "x"]}),
    ),
    "output_data_list": (
        "history.ipynb",
        _notebook({"cell_type": "code", "source": "print(1)", "outputs": [{"data": ["1"]}]}),
    ),
    "source_number": ("history.ipynb", _notebook({"cell_type": "code", "source": 5})),
}


def _published_run(root: Path) -> Path:
    run = root / "published" / RUN_NAME
    good = _good_episode()
    for name in ("a_good", "z_good", *BAD_EPISODES):
        shutil.copytree(good, run / name)
    for name, (file, content) in BAD_EPISODES.items():
        path = run / name / file
        path.unlink()
        if content is None:
            os.mkfifo(path)
        else:
            path.write_text(content)
    return run


@pytest.mark.timeout(120)
def test_import_reads_every_episode_on_its_own(tmp_path: Path) -> None:
    """Red on eb4ffc2: the deep metrics.json was a RecursionError, a string or list score a
    float() error, a cell or output that is not an object an AttributeError, each ending the
    whole import; a FIFO hung it; NaN, Infinity, 1e400, -1, 5 and "1" were imported."""
    run = _published_run(tmp_path)
    done = cli("import-trajectories", str(run), "--out", str(tmp_path / "reports"), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"imported 2 episodes of {RUN_NAME}" in done.stdout, done.stdout + done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error: not imported:")]
    assert len(errors) == len(BAD_EPISODES), done.stderr
    for name, (file, _) in BAD_EPISODES.items():
        named = [ln for ln in errors if f"{run / name / file}" in ln]
        assert len(named) == 1, (name, done.stderr)
    for name, reason in {
        "metrics_deep": "nested deeper",
        "metrics_string": "output_match",
        "metrics_list": "checkpoints",
        "metrics_nan": "finite",
        "metrics_infinity": "finite",
        "metrics_1e400": "finite",
        "metrics_minus_one": "outside [0, 1]",
        "metrics_five": "outside [0, 1]",
        "metrics_quoted_one": "not a number",
        "metrics_fifo": "FIFO",
        "notebook_fifo": "FIFO",
        "cells_not_objects": "cell 2",
        "outputs_not_objects": "output 1",
        "output_data_list": "data",
    }.items():
        assert any(f"/{name}/" in ln and reason in ln for ln in errors), (name, reason, errors)
    lines = (tmp_path / "reports" / RUN_NAME / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(ln)["task_id"] for ln in lines) == ["a_good", "z_good"]
    # and the report of what was imported has finite means
    shown = cli("report", str(tmp_path / "reports" / RUN_NAME / "results.jsonl"), cwd=tmp_path)
    assert shown.returncode == 0 and "nan" not in shown.stdout.lower(), shown.stdout + shown.stderr
