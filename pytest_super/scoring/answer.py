"""The accuracy of a submitted answer, as SUPER intends it: every gold key or position is judged
(missing ones score 0, extra ones are ignored), the tolerance applies at every depth, and an absent
or empty submission scores 0. Also `compare_answer` (the per-leaf table a failure report prints)
and reading a submitted text (`read_submission`, `parse_submission`)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeGuard

from pytest_super.strictjson import JSON

DEFAULT_TOLERANCE = 0.01


class _Missing:
    """The type of `MISSING`: a gold key or position the submission does not have."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


@dataclass(frozen=True)
class Comparison:
    """One leaf of the gold answer, compared with what was submitted there."""

    path: str  # "accuracy", "results[1].f1", "" for a scalar answer
    expected: object  # a gold answer read from YAML: JSON's values, keys of any type
    submitted: object  # MISSING when absent
    score: float  # 0..1 (a leaf scores 0 or 1)


# --- accuracy -----------------------------------------------------------------------------------


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _leaf_matches(gold: object, submitted: object, tolerance: float) -> bool:
    """Whether one non-container gold value is matched by the submitted value."""
    if submitted is MISSING:
        return False
    if isinstance(gold, bool) or isinstance(submitted, bool):
        return isinstance(gold, bool) and isinstance(submitted, bool) and gold == submitted
    if _is_number(gold):
        return _is_number(submitted) and _numbers_close(gold, submitted, tolerance)
    if isinstance(gold, str):
        return isinstance(submitted, str) and submitted.strip() == gold.strip()
    if gold is None:
        return submitted is None
    return type(gold) is type(submitted) and gold == submitted


def _is_finite(number: int | float) -> bool:
    """Whether a number is finite; an int always is (`math.isfinite` of a 400-digit int raises
    OverflowError)."""
    return isinstance(number, int) or math.isfinite(number)


def _numbers_close(gold: int | float, submitted: int | float, tolerance: float) -> bool:
    """`|submitted - gold| < tolerance`, for any two numbers: NaN and infinity never match, and
    an int too large for a float (which `int - float` cannot subtract) is farther from a float
    than any tolerance."""
    if not (_is_finite(gold) and _is_finite(submitted)):
        return False
    try:
        return abs(submitted - gold) < tolerance
    except OverflowError:
        return False


def _lookup(mapping: Mapping[object, object], key: object) -> object:
    """The submitted value under a gold key; a YAML int key also finds its JSON string form."""
    if key in mapping:
        return mapping[key]
    if not isinstance(key, str) and str(key) in mapping:
        return mapping[str(key)]
    return MISSING


def _score(gold: object, submitted: object, tolerance: float) -> float:
    if isinstance(gold, dict):
        if not isinstance(submitted, dict):
            return 0.0
        if not gold:
            return float(not submitted)
        return sum(_score(g, _lookup(submitted, k), tolerance) for k, g in gold.items()) / len(gold)
    if isinstance(gold, (list, tuple)):
        if not isinstance(submitted, (list, tuple)):
            return 0.0
        if not gold:
            return float(not submitted)
        total = 0.0
        for i, g in enumerate(gold):
            total += _score(g, submitted[i] if i < len(submitted) else MISSING, tolerance)
        return total / len(gold)
    return float(_leaf_matches(gold, submitted, tolerance))


def is_submitted(submission: object) -> bool:
    """Whether a parsed submission counts as submitted: as the reference decides it, a value that
    is empty or false (`null`, `{}`, `[]`, `""`, `0`, `false`) is not a submission."""
    return submission is not MISSING and bool(submission)


def unmatchable_leaves(gold: object, path: str = "") -> list[str]:
    """Paths of gold leaves no submission can ever match (NaN, infinity), for a load warning."""
    if isinstance(gold, dict):
        return [p for k, g in gold.items() for p in unmatchable_leaves(g, _key_path(path, k))]
    if isinstance(gold, (list, tuple)):
        return [p for i, g in enumerate(gold) for p in unmatchable_leaves(g, f"{path}[{i}]")]
    if _is_number(gold) and not _is_finite(gold):
        return [path or "(answer)"]
    return []


def score_accuracy(gold: object, submission: object, tolerance: float = DEFAULT_TOLERANCE) -> float:
    """The fraction of the gold answer the submission gets right, in 0..1.

    A dict scores the mean over the gold keys, a list the mean over the gold positions, recursively.
    No submission (None or MISSING) scores 0.
    """
    if submission is None or submission is MISSING:
        return 0.0
    return _score(gold, submission, tolerance)


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")


def _key_path(prefix: str, key: object) -> str:
    if isinstance(key, str) and _PLAIN_KEY.match(key):
        return f"{prefix}.{key}" if prefix else key
    shown = json.dumps(key) if isinstance(key, str) else repr(key)
    return f"{prefix}[{shown}]"


def _compare(
    gold: object, submitted: object, path: str, tolerance: float, rows: list[Comparison]
) -> None:
    container = isinstance(gold, (dict, list, tuple))
    if container and (submitted is MISSING or not gold):
        rows.append(Comparison(path, gold, submitted, _score(gold, submitted, tolerance)))
        return
    if isinstance(gold, dict):
        if not isinstance(submitted, dict):
            rows.append(Comparison(path, gold, submitted, 0.0))
            return
        for key, g in gold.items():
            _compare(g, _lookup(submitted, key), _key_path(path, key), tolerance, rows)
        return
    if isinstance(gold, (list, tuple)):
        if not isinstance(submitted, (list, tuple)):
            rows.append(Comparison(path, gold, submitted, 0.0))
            return
        for i, g in enumerate(gold):
            sub = submitted[i] if i < len(submitted) else MISSING
            _compare(g, sub, f"{path}[{i}]", tolerance, rows)
        return
    rows.append(Comparison(path, gold, submitted, float(_leaf_matches(gold, submitted, tolerance))))


def compare_answer(
    gold: object, submission: object, tolerance: float = DEFAULT_TOLERANCE
) -> list[Comparison]:
    """One `Comparison` per gold leaf, in gold order, for a failure report.

    A gold subtree the submission lacks (or has with another type) gives one row for the whole
    subtree. No submission at all gives one row for the whole answer, with `submitted` MISSING.
    """
    if submission is None or submission is MISSING:
        return [Comparison("", gold, MISSING, 0.0)]
    rows: list[Comparison] = []
    _compare(gold, submission, "", tolerance, rows)
    return rows


@dataclass(frozen=True)
class Submission:
    """What a submitted text amounts to: its value (None unless JSON), whether it counts as
    submitted, and why it scores nothing when it is not JSON."""

    value: JSON
    submitted: bool
    problem: str = ""


def read_submission(text: str) -> Submission:
    """A submitted text as scoring sees it: JSON is parsed (an empty value is not submitted); text
    that is not JSON (SWE-agent's `submit` takes any text) is submitted when it is not blank, and
    scores nothing."""
    try:
        value = parse_submission(text)
    except ValueError as exc:
        return Submission(None, bool(str(text).strip()), f"{exc}; it scores 0")
    return Submission(value, is_submitted(value))


def parse_submission(text: str) -> JSON:
    """Parse a submitted answer (JSON). Raises ValueError naming the problem and where it is.

    Any text gives a value or a ValueError: a value nested deeper than MAX_SUBMISSION_DEPTH (which
    no gold answer is, and which the reports could not write), or a number with more digits than
    Python converts, is refused like text that is not JSON.
    """
    try:
        value: JSON = json.loads(text)
    except json.JSONDecodeError as exc:
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise ValueError(
            f"submission is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            f' in {shown!r}; submit a JSON value such as {{"accuracy": 0.5}}'
        ) from None
    except RecursionError:
        raise ValueError(_too_deep_message(f"more than {MAX_SUBMISSION_DEPTH}")) from None
    except (TypeError, ValueError) as exc:  # not a str; an integer of more than 4300 digits
        raise ValueError(f"submission is not valid JSON: {exc}") from None
    depth = nesting_depth(value, MAX_SUBMISSION_DEPTH + 1)
    if depth > MAX_SUBMISSION_DEPTH:
        raise ValueError(_too_deep_message(f"more than {MAX_SUBMISSION_DEPTH}"))
    return value


#: deepest submission scored (a list or object counts one level): SUPER's answers are one or two
#: levels deep; a deeper one cannot match and could not be written to the reports.
MAX_SUBMISSION_DEPTH = 100


def _too_deep_message(depth: str) -> str:
    return (
        f"submission is nested {depth} levels deep (lists or objects inside each other); "
        f'submit a JSON value such as {{"accuracy": 0.5}}'
    )


def nesting_depth(value: object, stop_at: int) -> int:
    """How many lists/tuples/dicts stand inside each other in `value` (0 for a scalar), counted
    without recursion; counting stops at `stop_at` (a value may be nested 100,000 deep)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest >= stop_at:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest
