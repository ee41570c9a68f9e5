"""SUPER's landmarks: regexes searched in every step's observation, each under a time bound (a
timed-out or oversized one warns and counts as not hit)."""

from __future__ import annotations

import re
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import regex

from pytest_super.errors import SuperWarning

if TYPE_CHECKING:
    from pytest_super.trajectory import Step

#: CPU seconds one landmark regex may take over all of an episode's observations (the `regex`
#: engine counts process CPU time, so wall time stretches on a busy machine). A plain regex over
#: the 10 MB output cap of a cell takes milliseconds here; a catastrophic one (`(a+)+$`) never ends.
LANDMARK_TIMEOUT_S = 5.0


def observed_texts(steps: Iterable[Step]) -> list[str]:
    """What each step put in front of the agent, as the reference's landmarks and script-executed
    see it: a cell's raw output; for any other step (edit feedback, file viewers, ...) its
    observation."""
    return [s.output if (s.code is not None or s.output) else s.observation for s in steps]


if sys.version_info >= (3, 11):  # the parser of `re` (3.11 moved it, deprecating sre_parse)
    from re import _parser as sre_parse
else:
    import sre_parse

#: the most a landmark's counted repeats may stand for, nested ones multiplied: the `regex`
#: module expands them when it compiles. Measured here: `(?:a{1000}){1000}` (1,000,000) took
#: 274 MB, `(?:a{2000}){2000}` 1 GB, and the 19 characters `(?:a{5000}){5000}` 6.7 GB and 26 s;
#: 100,000 stays near the interpreter's own size. SUPER's landmarks repeat a few characters.
MAX_LANDMARK_EXPANSION = 100_000


def regex_expansion(pattern: str) -> int:
    """How many pattern items `pattern` stands for once its counted repeats (`x{n}`, `x{m,n}`)
    are expanded, nested ones multiplied (capped just past MAX_LANDMARK_EXPANSION). Open repeats
    (`*`, `+`, `{m,}`) count their minimum: matchers loop over them instead of expanding them.
    Raises re.error for a pattern `re` cannot parse."""
    cap = MAX_LANDMARK_EXPANSION + 1

    def size(items: Any) -> int:  # Any: sre_parse's SubPattern and its items, untyped in typeshed
        total = 0
        for op, arg in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                low, high, sub = arg
                times = max(low, 1) if high == sre_parse.MAXREPEAT else high
                total += times * size(sub)
            elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
                total += size(arg[-1])
            elif name == "BRANCH":
                total += sum(size(branch) for branch in arg[1])
            elif name in ("ASSERT", "ASSERT_NOT"):
                total += size(arg[1])
            else:
                total += 1
            if total >= cap:
                return cap
        return total

    return size(sre_parse.parse(pattern))


def _compiled(landmark: str) -> regex.Pattern[str] | re.Pattern[str] | None:
    """The landmark for `regex` (same syntax as `re`, but with a timeout); `re` for the rare
    pattern only `re` accepts. None for a pattern whose counted repeats stand for more than
    MAX_LANDMARK_EXPANSION items (compiling it would take gigabytes)."""
    try:
        if regex_expansion(landmark) > MAX_LANDMARK_EXPANSION:
            warnings.warn(
                SuperWarning(
                    f"landmark {landmark!r} repeats more than {MAX_LANDMARK_EXPANSION:,} times "
                    "once its nested counts are multiplied and counts as not hit; use + or * "
                    "instead of large nested counts"
                ),
                stacklevel=4,
            )
            return None
    except re.error:
        pass  # `regex` may still read it (its syntax is wider)
    try:
        return regex.compile(landmark)
    except regex.error:
        return re.compile(landmark)


def _landmark_hit(landmark: str, texts: Sequence[str], timeout_s: float) -> bool:
    return _landmark_search(landmark, texts, timeout_s) is not None


def _landmark_search(
    landmark: str, texts: Sequence[str], timeout_s: float
) -> tuple[int, regex.Match[str] | re.Match[str]] | None:
    """The first text `landmark` matches, as (index, match); None if none (or time ran out)."""
    pattern = _compiled(landmark)
    if pattern is None:
        return None
    deadline = time.monotonic() + timeout_s
    for index, text in enumerate(texts):
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            found = (
                pattern.search(text, timeout=remaining)
                if isinstance(pattern, regex.Pattern)
                else pattern.search(text)
            )
        except TimeoutError:
            warnings.warn(
                SuperWarning(
                    f"landmark {landmark!r} took more than {timeout_s:g} s to search the "
                    "episode's output and counts as not hit; simplify the regex (nested "
                    "repetition such as (a+)+ backtracks without end)"
                ),
                stacklevel=3,
            )
            return None
        if found:
            return index, found
    return None


def _landmark_hits(
    landmarks: Sequence[str], outputs: Iterable[str], timeout_s: float
) -> list[bool]:
    flat = [output.replace("\n", " ") for output in outputs]
    return [_landmark_hit(landmark, flat, timeout_s) for landmark in landmarks]


@dataclass(frozen=True)
class LandmarkMatch:
    """One landmark regex and where it was found: the step index and an excerpt around the match
    (None and "" when no output matches)."""

    regex: str
    step: int | None
    excerpt: str


#: Characters of output shown either side of a landmark's match in the reports.
LANDMARK_EXCERPT_CHARS = 120


def match_landmarks(
    landmarks: Sequence[str], outputs: Sequence[str], timeout_s: float = LANDMARK_TIMEOUT_S
) -> list[LandmarkMatch]:
    """For each landmark, the first output it matches (as `score_landmarks` searches) and an
    excerpt of that output around the match, with its line breaks."""
    matches = []
    flat = [output.replace("\n", " ") for output in outputs]
    for landmark in landmarks:
        found = LandmarkMatch(landmark, None, "")
        hit = _landmark_search(landmark, flat, timeout_s)
        if hit is not None:
            index, m = hit
            start = max(0, m.start() - LANDMARK_EXCERPT_CHARS)
            end = m.end() + LANDMARK_EXCERPT_CHARS
            # the same span of the output as it was (flattening keeps every position)
            found = LandmarkMatch(landmark, index, outputs[index][start:end])
        matches.append(found)
    return matches


def score_landmarks(
    landmarks: Sequence[str], outputs: Iterable[str], timeout_s: float = LANDMARK_TIMEOUT_S
) -> float | None:
    """Fraction of landmark regexes found (`re.search`) in some observation; None if no landmarks.

    Newlines in outputs are replaced by spaces first, as in SUPER. An invalid regex raises re.error.
    A regex that takes longer than `timeout_s` counts as not hit, with a `SuperWarning`.
    """
    if not landmarks:
        return None
    hits = _landmark_hits(landmarks, outputs, timeout_s)
    return sum(hits) / len(hits)


def check_landmarks(
    landmarks: Sequence[str], outputs: Iterable[str], timeout_s: float = LANDMARK_TIMEOUT_S
) -> tuple[float | None, list[str]]:
    """`score_landmarks` and `missed_landmarks` in one search (each regex runs once)."""
    if not landmarks:
        return None, []
    hits = _landmark_hits(landmarks, outputs, timeout_s)
    missed = [lm for lm, hit in zip(landmarks, hits, strict=True) if not hit]
    return sum(hits) / len(hits), missed


def missed_landmarks(
    landmarks: Sequence[str], outputs: Iterable[str], timeout_s: float = LANDMARK_TIMEOUT_S
) -> list[str]:
    """The landmark regexes no observation matches, in task order."""
    if not landmarks:
        return []
    hits = _landmark_hits(landmarks, outputs, timeout_s)
    return [lm for lm, hit in zip(landmarks, hits, strict=True) if not hit]
