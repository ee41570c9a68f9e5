"""Write tests/data/lmr-bench/results/: a compact copy of LMR-Bench's published results for the
tests of `pytest-super import-trajectories` (issue 46). MIT, as LMR-Bench's README states it
(tests/data/lmr-bench/LICENSE.md).

    python scripts/lmr_published_sample.py ROOT [OUT]

ROOT is LMR-Bench's tree at da757c9 (`pytest-super download lmr-bench`, or a clone:
`git archive da757c9 results/unit_test_evaluation results/logs/OpenHands/gpt4o | tar -x -C ROOT`);
OUT defaults to tests/data/lmr-bench. Every `results.txt` is copied whole (a few KB); of the
OpenHands gpt-4o run's output.jsonl, three instances are kept (13: passed, 16: five
implementations, 9: ended by an API error), each with its first six action/observation pairs and
its last, the long texts cut and the model responses dropped.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

RUN = "results/logs/OpenHands/gpt4o/NLPBench/CodeActAgent/gpt-4o-2024-08-06_maxiter_50_N_v0.33.0"
INSTANCES = ("13", "16", "9")
PAIRS = 6
ARGS = (
    "command",
    "code",
    "path",
    "thought",
    "content",
    "file_text",
    "old_str",
    "new_str",
    "final_thought",
)


def clip(value: Any, chars: int) -> Any:
    return value[:chars] + "[...cut]" if isinstance(value, str) and len(value) > chars else value


def event(raw: dict[str, Any]) -> dict[str, Any]:
    kept = {k: raw[k] for k in ("id", "timestamp", "source", "action", "observation") if k in raw}
    kept["message"] = clip(raw.get("message", ""), 300)
    if isinstance(raw.get("args"), dict):
        kept["args"] = {k: clip(v, 1000) for k, v in raw["args"].items() if k in ARGS}
    if "content" in raw:
        kept["content"] = clip(raw["content"], 1500)
    return kept


def instance(raw: dict[str, Any]) -> dict[str, Any]:
    history = raw["history"]
    pairs = history[:PAIRS] + (history[-1:] if len(history) > PAIRS else [])
    usage = raw["metrics"]["accumulated_token_usage"]
    return {
        "instance_id": raw["instance_id"],
        "instruction": clip(raw["instruction"], 3000),
        "metadata": {
            "agent_class": raw["metadata"]["agent_class"],
            "llm_config": {"model": raw["metadata"]["llm_config"]["model"]},
        },
        "metrics": {
            "accumulated_cost": raw["metrics"]["accumulated_cost"],
            "accumulated_token_usage": {
                k: usage[k] for k in ("prompt_tokens", "completion_tokens")
            },
        },
        "error": clip(raw["error"], 300),
        "history": [[event(e) for e in pair] for pair in pairs],
    }


def main(root: Path, out: Path) -> None:
    for results in sorted((root / "results/unit_test_evaluation").glob("*/*/results.txt")):
        target = out / results.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(results, target)
    lines = (root / RUN / "output.jsonl").read_text().splitlines()
    kept = [
        instance(json.loads(line)) for line in lines if json.loads(line)["instance_id"] in INSTANCES
    ]
    target = out / RUN / "output.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(k, ensure_ascii=False) + "\n" for k in kept))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "tests/data/lmr-bench"))
