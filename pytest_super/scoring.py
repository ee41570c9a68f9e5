"""SUPER's scores, as pure functions: accuracy of a submitted answer, landmarks, script-executed.

Owns the *intended* SUPER semantics (see /work/shared/SUPER.md), not the reference code's: every gold
key or position is judged (missing ones score 0, extra ones are ignored), the tolerance applies at
every depth, and an absent or empty submission scores 0 instead of crashing. "Submitted" is the
reference's: a submission whose JSON value is empty or false (`null`, `{}`, `[]`, `""`, `0`) is not
one. Landmarks are searched in every step's observation, each regex under a time bound. Also owns
`compare_answer`, the per-leaf table a failure report prints, and the helpers to parse a
submission and to average scores that may be None. No I/O here (a timed-out landmark warns).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import regex

from pytest_super.errors import SuperWarning

if TYPE_CHECKING:
    from pytest_super.trajectory import Step

DEFAULT_TOLERANCE = 0.01
SCRIPT_MIN_DURATION_S = 10.0
SCRIPT_SUFFIXES = (".py", ".sh", ".bash")
#: CPU seconds one landmark regex may take over all of an episode's observations (the `regex`
#: engine counts process CPU time, so wall time stretches on a busy machine). A plain regex over
#: the 10 MB output cap of a cell takes milliseconds here; a catastrophic one (`(a+)+$`) never ends.
LANDMARK_TIMEOUT_S = 5.0


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


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Comparison:
    """One leaf of the gold answer, compared with what was submitted there."""

    path: str  # "accuracy", "results[1].f1", "" for a scalar answer
    expected: Any
    submitted: Any  # MISSING when absent
    score: float  # 0..1 (a leaf scores 0 or 1)


# --- accuracy -----------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _leaf_matches(gold: Any, submitted: Any, tolerance: float) -> bool:
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


def _score(gold: Any, submitted: Any, tolerance: float) -> float:
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


def is_submitted(submission: Any) -> bool:
    """Whether a parsed submission counts as submitted: as the reference decides it, a value that
    is empty or false (`null`, `{}`, `[]`, `""`, `0`, `false`) is not a submission."""
    return submission is not MISSING and bool(submission)


def unmatchable_leaves(gold: Any, path: str = "") -> list[str]:
    """Paths of gold leaves no submission can ever match (NaN, infinity), for a load warning."""
    if isinstance(gold, dict):
        return [p for k, g in gold.items() for p in unmatchable_leaves(g, _key_path(path, k))]
    if isinstance(gold, (list, tuple)):
        return [p for i, g in enumerate(gold) for p in unmatchable_leaves(g, f"{path}[{i}]")]
    if _is_number(gold) and not _is_finite(gold):
        return [path or "(answer)"]
    return []


def score_accuracy(gold: Any, submission: Any, tolerance: float = DEFAULT_TOLERANCE) -> float:
    """The fraction of the gold answer the submission gets right, in 0..1.

    A dict scores the mean over the gold keys, a list the mean over the gold positions, recursively.
    No submission (None or MISSING) scores 0.
    """
    if submission is None or submission is MISSING:
        return 0.0
    return _score(gold, submission, tolerance)


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")


def _key_path(prefix: str, key: Any) -> str:
    if isinstance(key, str) and _PLAIN_KEY.match(key):
        return f"{prefix}.{key}" if prefix else key
    shown = json.dumps(key) if isinstance(key, str) else repr(key)
    return f"{prefix}[{shown}]"


def _compare(
    gold: Any, submitted: Any, path: str, tolerance: float, rows: list[Comparison]
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
    gold: Any, submission: Any, tolerance: float = DEFAULT_TOLERANCE
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

    value: Any
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


def parse_submission(text: str) -> Any:
    """Parse a submitted answer (JSON). Raises ValueError naming the problem and where it is.

    Any text gives a value or a ValueError: a value nested deeper than MAX_SUBMISSION_DEPTH (which
    no gold answer is, and which the reports could not write), or a number with more digits than
    Python converts, is refused like text that is not JSON.
    """
    try:
        value = json.loads(text)
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


def nesting_depth(value: Any, stop_at: int) -> int:
    """How many lists/tuples/dicts stand inside each other in `value` (0 for a scalar), counted
    without recursion; counting stops at `stop_at` (a value may be nested 100,000 deep)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest >= stop_at:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


# --- landmarks ----------------------------------------------------------------------------------


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

    def size(items: Any) -> int:
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


def _compiled(landmark: str) -> Any:
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
) -> tuple[int, Any] | None:
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


# --- script executed (Auto) ---------------------------------------------------------------------


@dataclass(frozen=True)
class ExecutedCell:
    """One cell run in the episode, as the script-executed metric sees it."""

    code: str
    output: str
    duration_s: float


def executed_cells(steps: Iterable[Step]) -> list[ExecutedCell]:
    """The steps that ran code in the kernel, as script-executed sees them (pre-executed cells
    included, as in the reference, whose environment history holds them too)."""
    return [
        ExecutedCell(code=s.code, output=s.output, duration_s=s.duration_s)
        for s in steps
        if s.code is not None
    ]


#: interpreters given the script as their first argument that is not an option
_PYTHON = re.compile(r"(?:python|pypy|ipython)[\d.]*")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "source", "."})
#: launchers given the script as their first argument that is a script file
_LAUNCHERS = frozenset({"torchrun", "deepspeed", "horovodrun"})
_LAUNCHER_MODULES = frozenset(
    {"torch.distributed.launch", "torch.distributed.run", "accelerate.commands.launch"}
)
#: commands that run the command after them (their options and numbers are skipped)
_WRAPPERS = frozenset(
    {"nohup", "time", "env", "exec", "nice", "ionice", "sudo", "timeout", "stdbuf", "command"}
)
_WRAPPER_ARGUMENT = re.compile(r"-.*|[\d.]+[smhd]?")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: a Python line that runs a shell command: os.system, subprocess.*, os.popen, getoutput
_PYTHON_SHELL_CALL = re.compile(
    r"\b(?:system|popen|Popen|run|call|check_call|check_output|getoutput|getstatusoutput)\s*\("
)
_STRING_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'" + r'|"((?:[^"\\]|\\.)*)"')
_SHELL_CELL = re.compile(r"%%(?:bash|sh|shell|script\s+(?:bash|sh))\b")
_SEPARATOR = re.compile(r"[;&|()]+")


def _shell_lines(code: str) -> list[str]:
    """The shell command lines a cell runs: `!` lines (and `x = !cmd`), every line of a
    `%%bash`/`%%sh` cell, `%run` as `python`, and the string arguments of a Python line calling
    os.system, subprocess or os.popen. Comments and other magics (`%cd`) run nothing."""
    lines = code.replace("\\\n", " ").split("\n")
    if lines and _SHELL_CELL.match(lines[0].strip()):
        return lines[1:]
    found = []
    for line in (ln.strip() for ln in lines):
        shell = re.match(r"(?:[\w.]+\s*=\s*)?!+(.*)", line)
        if shell:
            found.append(shell[1])
        elif line.startswith("%run "):
            found.append("python " + line[len("%run ") :])
        elif line and line[0] not in "%#" and _PYTHON_SHELL_CALL.search(line):
            literals = _STRING_LITERAL.findall(line)
            found.append(" ".join(single or double for single, double in literals))
    return found


def _simple_commands(line: str) -> list[list[str]]:
    """A shell line's simple commands (split at `;`, `&&`, `||`, `|`, `&`, parentheses) as
    words, redirections and their targets left out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: the shell would refuse it too; read the words
        tokens = line.split()
    commands: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
        elif "<" in token or ">" in token:
            skip_next = True  # `> log.txt`, `2>&1`: the target is no argument
        elif _SEPARATOR.fullmatch(token):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def _names_file(word: str, name: str) -> bool:
    return os.path.basename(word) == name


def _first_script(args: list[str], name: str) -> bool:
    """A launcher's script: its first argument that is a script file."""
    script = next((a for a in args if not a.startswith("-") and a.endswith(SCRIPT_SUFFIXES)), "")
    return _names_file(script, name)


def _python_runs(args: list[str], name: str, modules: frozenset[str]) -> bool:
    """Does `python <args>` run the script `name` (or its module, with `-m`)?"""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-m"):
            module = arg[2:] or (args[i + 1] if i + 1 < len(args) else "")
            if module in _LAUNCHER_MODULES:
                return _first_script(args[i + 1 :], name)
            return module in modules
        if arg.startswith("-c") or arg == "-":
            return False  # code given on the command line or standard input: not the file
        if not arg.startswith("-"):
            return _names_file(arg, name)
        i += 2 if arg in ("-W", "-X", "-Q") else 1
    return False


def _shell_runs(args: list[str], name: str, modules: frozenset[str], depth: int) -> bool:
    """Does `bash <args>` run the script `name` (or, with `-c`, a command that does)?"""
    for i, arg in enumerate(args):
        if arg == "-c":
            text = args[i + 1] if i + 1 < len(args) else ""
            return depth < 3 and _line_runs(text, name, modules, depth + 1)
        if not arg.startswith(("-", "+")) and args[i - 1 : i] not in (["-o"], ["+o"]):
            return _names_file(arg, name)
    return False


def _command_runs(words: list[str], name: str, modules: frozenset[str], depth: int) -> bool:
    """Does one simple command run the entrypoint: an interpreter or launcher given the file
    (after variable assignments and wrappers such as nohup, env, timeout), or the file itself
    by its path (`./run.sh`)? A reader or editor given the file (cat, sed -n, vim) does not."""
    i = 0
    while i < len(words) and (_ASSIGNMENT.match(words[i]) or words[i] in _WRAPPERS):
        wrapper = words[i] in _WRAPPERS
        i += 1
        while wrapper and i < len(words) and _WRAPPER_ARGUMENT.fullmatch(words[i]):
            i += 1
    if i >= len(words):
        return False
    program, args = os.path.basename(words[i]), words[i + 1 :]
    if _PYTHON.fullmatch(program):
        return _python_runs(args, name, modules)
    if program in _SHELLS:
        return _shell_runs(args, name, modules, depth)
    if program in _LAUNCHERS or (program == "accelerate" and args[:1] == ["launch"]):
        return _first_script(args, name)
    return "/" in words[i] and _names_file(words[i], name)


def _line_runs(line: str, name: str, modules: frozenset[str], depth: int = 0) -> bool:
    return any(_command_runs(c, name, modules, depth) for c in _simple_commands(line))


def runs_entrypoint(entrypoint: str, code: str) -> bool:
    """Whether a cell's code runs the entrypoint, as the paper defines it: an interpreter or
    launcher given the file (`python`, `python -m <module>`, `bash`/`sh`, `accelerate launch`,
    `torchrun`, `deepspeed`, `%run`, `./run.sh`), with or without `cd ... &&`, `nohup`, variable
    assignments or redirections. The file is its name exactly (`train.py.bak`, `train.pyc` and
    `train.py~` are other files); a module is its path or a dotted tail of it (`src.train` or
    `train` for `src/train.py`, as the cell may have changed directory first). Naming the file to
    a reader or editor (`cat`, `head`, `grep`, `sed -n`, `vim`) runs nothing.
    """
    name = os.path.basename(entrypoint)
    modules: frozenset[str] = frozenset()
    if entrypoint.endswith(".py"):
        parts = [p for p in entrypoint[: -len(".py")].split("/") if p not in ("", ".")]
        modules = frozenset(".".join(parts[i:]) for i in range(len(parts)))
    return any(_line_runs(line, name, modules) for line in _shell_lines(code))


def score_script_executed(entrypoint: str | None, cells: Iterable[ExecutedCell]) -> float | None:
    """SUPER's Auto metric: 1.0 if a cell ran the entrypoint for >= 10 s without error, else 0.0.

    A cell "ran the entrypoint" when it runs the file (`runs_entrypoint`: an interpreter or
    launcher given it, not a reader or editor); "without error" means its output has neither
    `Traceback` nor `<file name>: error` (argparse misuse). None when there is no entrypoint or it is not a
    .py, .sh or .bash file.
    """
    if not entrypoint or not entrypoint.endswith(SCRIPT_SUFFIXES):
        return None
    name = os.path.basename(entrypoint)
    for cell in cells:
        if not runs_entrypoint(entrypoint, cell.code):
            continue
        if cell.duration_s < SCRIPT_MIN_DURATION_S:
            continue
        if "Traceback" in cell.output or f"{name}: error" in cell.output:
            continue
        return 1.0
    return 0.0
