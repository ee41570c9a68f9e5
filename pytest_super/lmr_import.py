"""LMR-Bench's published runs as run folders of ours (`pytest-super import-trajectories` on
LMR-Bench's tree), so that a published run compares with a run of ours task by task
(`pytest-super report --by-task`, `pytest-super html OURS THEIRS`).

Upstream publishes, per agent and model:

- `results/unit_test_evaluation/<agent>/<model>/results.txt`: one verdict a line,
  `<N-name>/unit_test_<k>.log: PASS` or `FAIL (found N failure lines)` (`PASS fail_count: 0` in
  some files; `<path>/<N-name>/<repo>/unit_test/logs is not a directory` where no test ran, which
  it counts as a failure: `FAIL (no logs)` here), then its totals;
- for OpenHands, `results/logs/OpenHands/<model>/NLPBench/CodeActAgent/<run>/output.jsonl`: one
  instance (a task folder, `instance_id` its number) a line, with the instruction, the metrics
  (cost, tokens), the error that ended it, and its `history`: pairs of an action event (`run`,
  `read`, `edit`, `run_ipython`, `think`, `finish`, ...) and its observation.

Each verdict becomes a record of `<out>/lmr-<agent>-<model>/results.jsonl`, its id ours
(`1-DPO/unit_test_1.log` -> `01-DPO/1`), agent `published:<agent>`, outcome passed or failed,
`upstream_verdict` the verdict, the category from the tree's `info.json` where the tree has it.
An OpenHands episode becomes `trajectories/<folder>.json` (the task's query, one step per action,
the observation beside it), named by each of the folder's records with its cost, tokens, steps
and exit status. The files are foreign: each is read through `safe_read`, under a size cap; a
line that cannot be read is named (file and line) and the others are imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_super import safe_read
from pytest_super.errors import ExitStatus
from pytest_super.names import file_stem
from pytest_super.published_runs import PUBLISHED_PREFIX
from pytest_super.report import ResultsWriter, TaskRecord
from pytest_super.tasks.lmr import LMR_SET
from pytest_super.trajectory import Step, Trajectory

RESULTS = Path("results/unit_test_evaluation")
OPENHANDS_LOGS = Path("results/logs/OpenHands")
#: output.jsonl of a run (gpt-4.1's is ~30 MB)
OUTPUT_MAX_BYTES = 256 * 2**20
_VERDICT = re.compile(
    r"(\d+)-([^/\s]+)/unit_test(?:_(\d+))?\.log: (PASS|FAIL.*?)(?: fail_count: \d+)?"
)
_NO_LOGS = re.compile(r".*/(\d+)-([^/\s]+)/[^/]+/unit_test/logs is not a directory")
_TOTALS = ("Total log files:", "Passed files:", "Failed files:", "Overall pass rate:")
#: the text of an action event that is the step's content, by OpenHands's action name
_CONTENT_ARGS = {
    "run": ("command",),
    "run_ipython": ("code",),
    "read": ("path",),
    "edit": ("path", "command", "old_str", "new_str", "file_text", "content"),
    "think": ("thought",),
    "finish": ("final_thought",),
    "message": ("content",),
}


def is_lmr_bench(directory: Path) -> bool:
    """Whether `directory` is LMR-Bench's tree (it holds published unit-test results)."""
    return (directory / RESULTS).is_dir()


@dataclass
class LmrRunImport:
    """What one published run's import wrote, and what it could not read."""

    name: str  # <agent>/<model>
    folder: Path
    tasks: int = 0
    passed: int = 0
    episodes: int = 0
    errors: list[str] = field(default_factory=list)  # each names its file (and line)


def import_lmr_runs(root: Path, out_dir: Path) -> list[LmrRunImport]:
    """Every published run of the tree `root` into `out_dir` (one folder per run)."""
    return [
        import_lmr_run(root, results, out_dir)
        for results in sorted((root / RESULTS).glob("*/*/results.txt"))
    ]


def import_lmr_run(root: Path, results: Path, out_dir: Path) -> LmrRunImport:
    agent, model = results.parent.parent.name, results.parent.name
    done = LmrRunImport(f"{agent}/{model}", out_dir / file_stem(f"lmr-{agent}-{model}"))
    verdicts = read_results_txt(results, done.errors)
    if not verdicts:  # nothing to compare with: no folder (the error names the file)
        return done
    episodes = _episodes(root, agent, model, done)
    done.folder.mkdir(parents=True, exist_ok=True)
    writer = ResultsWriter(done.folder / "results.jsonl")
    try:
        for task_id, verdict in verdicts.items():
            folder = task_id.split("/")[0]
            episode = episodes.get(folder, {})
            record = TaskRecord(
                task_id,
                "passed" if verdict == "PASS" else "failed",
                {
                    "set": LMR_SET,
                    "category": _category(root, task_id),
                    "agent": f"{PUBLISHED_PREFIX}{agent.lower()}",
                    "model": model,
                    "unit_tests": 1.0 if verdict == "PASS" else 0.0,
                    "upstream_verdict": verdict,
                    "source": str(results),
                    **episode,
                },
            )
            writer.write(record)
            done.tasks += 1
            done.passed += verdict == "PASS"
    finally:
        writer.close()
    return done


def read_results_txt(path: Path, errors: list[str]) -> dict[str, str]:
    """Our task id -> upstream's verdict, of one results.txt; a line that is none of its kinds is
    named in `errors` and the others are read."""
    try:
        text = safe_read.read_text_file(path)
    except safe_read.ForeignDataError as exc:
        errors.append(str(exc))
        return {}
    verdicts: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith(_TOTALS):
            continue
        found = _VERDICT.fullmatch(line)
        missing = _NO_LOGS.fullmatch(line)
        if found:
            task_id = f"{int(found[1]):02d}-{found[2]}/{int(found[3] or 1)}"
            verdicts[task_id] = "PASS" if found[4] == "PASS" else found[4]
        elif missing:
            verdicts[f"{int(missing[1]):02d}-{missing[2]}/1"] = "FAIL (no logs)"
        else:
            errors.append(
                f"{path}:{number}: not a verdict line (`<N-name>/unit_test_<k>.log: PASS|FAIL "
                f"...`): {line[:120]!r}"
            )
    return verdicts


def _category(root: Path, task_id: str) -> str:
    """The implementation's category in the tree's info.json ("" where the tree has none)."""
    folder, index = task_id.split("/")
    try:
        info = safe_read.read_json_file(root / "benchmark" / folder / "info.json", 2**20)
        entry = info["implementations"][int(index) - 1]
        return str(entry.get("category") or "")
    except (safe_read.ForeignDataError, OSError, KeyError, IndexError, TypeError, AttributeError):
        return ""


def _episodes(
    root: Path, agent: str, model: str, done: LmrRunImport
) -> dict[str, dict[str, object]]:
    """The OpenHands episodes of the run, each written as a trajectory: task folder -> the
    properties its records carry."""
    found: dict[str, dict[str, object]] = {}
    if agent != "OpenHands":
        return found
    for output in sorted((root / OPENHANDS_LOGS / model).glob("*/*/*/output.jsonl")):
        try:
            text = safe_read.read_regular_file(output, OUTPUT_MAX_BYTES).decode("utf-8", "replace")
        except safe_read.ForeignDataError as exc:
            done.errors.append(str(exc))
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw = safe_read.loads(line, f"{output}:{number}")
                folder = _folder(root, str(raw["instance_id"]))
                found[folder] = _write_episode(raw, folder, model, done.folder, agent)
            except safe_read.ForeignDataError as exc:
                done.errors.append(str(exc))
                continue
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                what = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
                done.errors.append(f"{output}:{number}: not an OpenHands instance ({what})")
                continue
            done.episodes += 1
    return found


def _folder(root: Path, instance_id: str) -> str:
    """The task folder of an OpenHands `instance_id` (its number): the tree's folder of that
    number, else `NN-?`."""
    number = int(instance_id)
    for path in sorted((root / "benchmark").glob(f"{number:02d}-*")):
        return path.name
    return f"{number:02d}-?"


def _write_episode(
    # Any: json.loads (an output.jsonl line: _episodes catches what a wrong shape raises)
    raw: dict[str, Any],
    folder: str,
    model: str,
    run_dir: Path,
    agent: str,
) -> dict[str, object]:
    steps = [_step(pair) for pair in raw["history"] if _is_agent_action(pair)]
    finished = any(s.action == "finish" for s in steps)
    error = raw.get("error")
    status = (
        ExitStatus.LLM_ERROR
        if error and "Error" in str(error)
        else ExitStatus.SUBMITTED
        if finished
        else ExitStatus.NO_SUBMISSION
    )
    path = run_dir / "trajectories" / f"{file_stem(folder)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    trajectory = Trajectory(
        path=path,
        task_id=folder,
        query=str(raw.get("instruction") or ""),
        agent=f"{PUBLISHED_PREFIX}{agent.lower()}",
        model=model,
        steps=steps,
        info={"exit_status": status.value, "error": str(error or "")[:2000]},
    )
    trajectory.save()
    metrics = raw.get("metrics") or {}
    usage = metrics.get("accumulated_token_usage") or {}
    return {
        "trajectory": str(path),
        "exit_status": status.value,
        "steps": len(steps),
        "cost_usd": float(metrics.get("accumulated_cost") or 0.0),
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": int(usage.get("completion_tokens") or 0),
    }


def _is_agent_action(pair: object) -> bool:
    if not isinstance(pair, list) or not pair or not isinstance(pair[0], dict):
        raise ValueError("a history entry is not a list of an action and its observation")
    return pair[0].get("source") == "agent" and bool(pair[0].get("action"))


def _step(pair: list[Any]) -> Step:  # Any: json.loads (a history entry, as _write_episode's raw)
    action: dict[str, Any] = pair[0]  # Any: json.loads (as above)
    seen = pair[1] if len(pair) > 1 and isinstance(pair[1], dict) else {}
    name = str(action["action"])
    args = action.get("args") or {}
    shown = [str(args[k]) for k in _CONTENT_ARGS.get(name, ()) if args.get(k)]
    return Step(
        thought=str(args.get("thought") or ""),
        action=name,
        content="\n".join(shown) or str(action.get("message") or ""),
        observation=str(seen.get("content") or ""),
    )
