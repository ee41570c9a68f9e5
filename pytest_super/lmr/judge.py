"""LMR-Bench's LLM-as-judge (`--super-judge-model`): after an LMR task's unit test, one chat call
asks a model to grade the agent's function against the golden one with upstream's rubric.

Upstream's judge is `evaluation/llm_as_a_judge_evaluation.py` at LMR_COMMIT: its prompt is one
f-string (`prompt = (...)`) that states the rubric and fills in the implementation's instruction,
the golden file's and goal file's names and their contents; the model (gpt-4.1 there, at
temperature 0) answers in JSON, read with `json.loads` after `strip()`; its `category` "1"
(incorrect logic), "2" (logic correct but subtle errors) or "3" (completely correct) is the
grade, anything else an error upstream lists. That script is fetched at the pinned commit
(`reference_files.pinned_file`: sha256 JUDGE_SHA256, cached under
`$XDG_CACHE_HOME/pytest-super/lmr-bench/<commit>/`, `SUPER_PROMPTS_BASE_URL` for a mirror), never
run: the prompt's expression is read from its syntax tree (`rubric`). The golden function and the
agent's function (`golden.function_text`) fill it where upstream puts the two whole files.

The judge never decides the task (its unit test does): a failed call, a reply that is not
upstream's JSON or a category outside 1-3 is recorded as the judge's error on the task.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_super.errors import SuperError
from pytest_super.lmr import LMR_COMMIT, LMR_REPO
from pytest_super.lmr.golden import function_text
from pytest_super.reference_files import cache_root, pinned_file
from pytest_super.tasks.lmr import LmrTask

JUDGE_FILE = "evaluation/llm_as_a_judge_evaluation.py"
#: sha256 of JUDGE_FILE at LMR_COMMIT: a download with another is refused
JUDGE_SHA256 = "8ed0905de90e5e529948d45a87cf0a04558d6c6b8d8fd1852e48abd56dbd088c"
#: upstream's sampling: temperature 0, nothing else set
JUDGE_TEMPERATURE = 0.0
#: upstream's categories, its score
CATEGORIES = {
    1: "incorrect logic",
    2: "logic correct but subtle errors",
    3: "completely correct",
}
#: the names upstream's prompt fills in
FIELDS = frozenset({"instruction", "golden_file", "golden_content", "goal_file", "goal_content"})

#: the rubric: literal text and the names of the fields between it, in order
Rubric = tuple[tuple[str, bool], ...]
#: one chat call: the messages in, the reply's text out
Complete = Callable[[list[dict[str, str]]], str]


class JudgeError(SuperError):
    """The judge's rubric could not be had or read, or its reply is not upstream's JSON."""


@dataclass
class JudgeOutcome:
    """The judge's grade of one task's function (`score`: upstream's category), or its error."""

    model: str
    score: int | None = None
    rationale: list[str] = field(default_factory=list)
    error: str = ""

    def properties(self) -> dict[str, object]:
        """The `super.judge_*` JUnit properties (and results.jsonl fields)."""
        found: dict[str, object] = {
            "super.judge_model": self.model,
            "super.judge_score": self.score,
        }
        if self.error:
            found["super.judge_error"] = self.error
        return found

    def line(self) -> str:
        """The judge's verdict in one line, for a failure's text."""
        if self.error:
            return f"judge ({self.model}): error: {self.error}"
        assert self.score is not None
        return f"judge ({self.model}): category {self.score}, {CATEGORIES[self.score]}"


def rubric_path() -> Path:
    """Upstream's judge script at LMR_COMMIT, fetched once (DownloadError if it cannot be had)."""
    out = cache_root() / "lmr-bench" / LMR_COMMIT
    return pinned_file(LMR_REPO, LMR_COMMIT, JUDGE_FILE, JUDGE_SHA256, out)


def rubric(source: str, where: str = JUDGE_FILE) -> Rubric:
    """The f-string assigned to `prompt` in upstream's judge script, as text and field names."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise JudgeError(f"{where}: not valid Python ({exc})") from None
    found = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["prompt"]
        and isinstance(node.value, ast.JoinedStr)
    ]
    if len(found) != 1:
        raise JudgeError(f"{where}: {len(found)} f-strings assigned to `prompt`, expected 1")
    parts: list[tuple[str, bool]] = []
    for value in found[0].values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append((value.value, False))
        elif (
            isinstance(value, ast.FormattedValue)
            and isinstance(value.value, ast.Name)
            and value.conversion == -1
            and value.format_spec is None
        ):
            parts.append((value.value.id, True))
        else:
            raise JudgeError(f"{where}:{value.lineno}: the prompt holds an expression, not a name")
    names = {text for text, is_field in parts if is_field}
    if names != FIELDS:
        raise JudgeError(f"{where}: the prompt fills {sorted(names)}, expected {sorted(FIELDS)}")
    return tuple(parts)


def judge_prompt(template: Rubric, values: dict[str, str]) -> str:
    """The rubric with its fields filled in."""
    return "".join(values[text] if is_field else text for text, is_field in template)


def parse_reply(reply: str) -> tuple[int, list[str]]:
    """Upstream's reading of the judge's reply: JSON with `category` 1, 2 or 3 (as a string or
    number) and `rationale`; JudgeError otherwise."""
    try:
        answer = json.loads(reply.strip())
    except ValueError as exc:
        raise JudgeError(f"the reply is not JSON ({exc}): {reply[:200]!r}") from None
    if not isinstance(answer, dict) or "category" not in answer:
        raise JudgeError(f"the reply has no `category`: {reply[:200]!r}")
    category = str(answer["category"]).strip()
    if category not in ("1", "2", "3"):
        raise JudgeError(f"unexpected category {category!r} (expected 1, 2 or 3)")
    rationale = answer.get("rationale", [])
    items = rationale if isinstance(rationale, list) else [rationale]
    return int(category), [str(item) for item in items]


def judge_task(task: LmrTask, goal_source: str, complete: Complete, model: str) -> JudgeOutcome:
    """Grade the agent's function in `goal_source` (the goal file as the episode left it)
    against the golden one; any fault is the outcome's error, never raised."""
    outcome = JudgeOutcome(model=model)
    try:
        golden_path = Path(task.folder) / task.golden_file
        golden = function_text(
            golden_path.read_text(encoding="utf-8"),
            task.goal_function,
            task.class_name,
            task.golden_file,
        )
        agents = function_text(goal_source, task.goal_function, task.class_name, task.goal_file)
        template = rubric(rubric_path().read_text(encoding="utf-8"))
        prompt = judge_prompt(
            template,
            {
                "instruction": task.instruction.strip(),
                "golden_file": task.golden_file,
                "golden_content": golden,
                "goal_file": task.goal_file,
                "goal_content": agents,
            },
        )
        reply = complete([{"role": "user", "content": prompt}])
        outcome.score, outcome.rationale = parse_reply(reply)
    except Exception as exc:  # the judge's fault is recorded, never the task's
        outcome.error = f"{type(exc).__name__}: {exc}"[:500]
    return outcome
