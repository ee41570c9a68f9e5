"""SUPER's scores, as pure functions: accuracy of a submitted answer, landmarks, script-executed.

Owns the *intended* SUPER semantics (see /work/shared/SUPER.md), not the reference code's: every gold
key or position is judged (missing ones score 0, extra ones are ignored), the tolerance applies at
every depth, and an absent or empty submission scores 0 instead of crashing. "Submitted" is the
reference's: a submission whose JSON value is empty or false (`null`, `{}`, `[]`, `""`, `0`) is not
one. Landmarks are searched in every step's observation, each regex under a time bound. Also owns
`compare_answer`, the per-leaf table a failure report prints, and the helpers to parse a
submission and to average scores that may be None. No I/O here (a timed-out landmark warns).

One module per score: `answer` (accuracy, the comparison table, reading a submission),
`landmarks`, `script_executed`; every name is importable from `pytest_super.scoring`.
"""

from __future__ import annotations

from pytest_super.scoring.answer import (
    DEFAULT_TOLERANCE,
    MAX_SUBMISSION_DEPTH,
    MISSING,
    Comparison,
    Submission,
    compare_answer,
    is_submitted,
    nesting_depth,
    parse_submission,
    read_submission,
    score_accuracy,
    unmatchable_leaves,
)
from pytest_super.scoring.landmarks import (
    LANDMARK_EXCERPT_CHARS,
    LANDMARK_TIMEOUT_S,
    MAX_LANDMARK_EXPANSION,
    LandmarkMatch,
    check_landmarks,
    match_landmarks,
    missed_landmarks,
    observed_texts,
    regex_expansion,
    score_landmarks,
)
from pytest_super.scoring.script_executed import (
    SCRIPT_MIN_DURATION_S,
    SCRIPT_SUFFIXES,
    ExecutedCell,
    executed_cells,
    runs_entrypoint,
    score_script_executed,
)

__all__ = [
    "Comparison",
    "DEFAULT_TOLERANCE",
    "ExecutedCell",
    "LANDMARK_EXCERPT_CHARS",
    "LANDMARK_TIMEOUT_S",
    "LandmarkMatch",
    "MAX_LANDMARK_EXPANSION",
    "MAX_SUBMISSION_DEPTH",
    "MISSING",
    "SCRIPT_MIN_DURATION_S",
    "SCRIPT_SUFFIXES",
    "Submission",
    "check_landmarks",
    "compare_answer",
    "executed_cells",
    "is_submitted",
    "match_landmarks",
    "missed_landmarks",
    "nesting_depth",
    "observed_texts",
    "parse_submission",
    "read_submission",
    "regex_expansion",
    "runs_entrypoint",
    "score_accuracy",
    "score_landmarks",
    "score_script_executed",
    "unmatchable_leaves",
]
