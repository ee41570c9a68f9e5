#!/usr/bin/env python3
"""Our script-executed rule beside the paper's own metric, on every published episode.

    .venv/bin/python scripts/script-executed-agreement.py RUN_FOLDER... [--out FILE]

RUN_FOLDER: published run folders (`trajectories/<run>` of an upstream checkout of
allenai/super-benchmark, the sample runs, or the unpacked archives of tests/data/super-reference).
The paper's metric is the `entrypoint` field of each episode's `metrics.json` (upstream's
`evaluate_dataset.py`, from the task's `entrypoint`, which the published runs do not hold). Ours
is `scoring.score_script_executed` of the script the query asks to run
(`published_runs.entrypoint_from_query`) over the episode's executed cells, as `pytest-super
replay-run` scores it.

Writes one JSON line per episode with a notebook and a published `entrypoint` score, sorted by run
and task: `run`, `task`, `published`, `entrypoint` (ours, from the query; null: the query names
no script, ours is not computed) and `ours`. Prints the agreement: of the episodes where ours is
computed, how many agree with the paper's. Default FILE:
tests/data/super-reference/script-executed.jsonl (deterministic; tests/test_published_episodes.py
regenerates it from the shipped runs and compares).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_super import scoring  # noqa: E402
from pytest_super.published_runs import entrypoint_from_query, read_run  # noqa: E402

DEFAULT_OUT = ROOT / "tests" / "data" / "super-reference" / "script-executed.jsonl"


def rows(run_dirs: list[Path]) -> list[dict[str, Any]]:
    """One row per episode with a notebook and a published script-executed score."""
    found = []
    for run_dir in run_dirs:
        for episode in read_run(run_dir):
            published = episode.metrics.get("entrypoint")
            if published is None or not episode.has_notebook:
                continue
            entrypoint = entrypoint_from_query(episode.query)
            cells = scoring.executed_cells(episode.steps)
            ours = scoring.score_script_executed(entrypoint, cells) if entrypoint else None
            found.append(
                {
                    "run": run_dir.name,
                    "task": episode.task_id,
                    "published": float(published),
                    "entrypoint": entrypoint,
                    "ours": ours,
                }
            )
    return sorted(found, key=lambda r: (r["run"], r["task"]))


def summary(found: list[dict[str, Any]]) -> str:
    computed = [r for r in found if r["ours"] is not None]
    agree = sum(r["ours"] == r["published"] for r in computed)
    return (
        f"{len(found)} episodes with a published script-executed score; ours computed on "
        f"{len(computed)} (the query names the script): {agree} of {len(computed)} agree"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="published run folders")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    found = rows(args.runs)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in found), encoding="utf-8")
    print(summary(found))
    for r in found:
        if r["ours"] is not None and r["ours"] != r["published"]:
            print(f"  differs: {r['run']}/{r['task']}: ours {r['ours']}, paper {r['published']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
