"""The task model: what one SUPER task is, loaded from our YAML files or SUPER's own JSON lines.

Owns: `Task`, `Cell`, `Limits`, loading and validation against `task.schema.json`, and the
conversion of SUPER's JSONL rows (import).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

SETS = ("expert", "masked", "auto")
CATEGORIES = ("dependencies", "cpu", "configuration", "data", "issue", "goal", "other")
PRE_EXECUTED_THOUGHT = "[pre-executed by the user]"


@dataclass(frozen=True)
class Cell:
    """One notebook cell of a prefix or a solution.

    An execute cell has `code`. An edit cell replaces the lines `before` of `file` with `after`,
    in SUPER's edit semantics (the lines must match exactly; `context`, if given, are lines that
    stand just before them in the file).
    """

    kind: Literal["execute", "edit"]
    code: str = ""
    file: str = ""
    before: str = ""
    after: str = ""
    context: str = ""


@dataclass(frozen=True)
class Limits:
    """Per-task limits; None means the run's default (set by options)."""

    compute_s: float | None = None
    token_budget: int | None = None
    steps: int | None = None
    cell_timeout_s: float | None = None


@dataclass(frozen=True)
class Task:
    """One SUPER task."""

    id: str
    set: str  # one of SETS
    query: str
    categories: tuple[str, ...] = ()
    repository: str | None = None
    commit: str | None = None
    answer: Any = None  # gold values (dict, list, number, string); None for auto tasks
    landmarks: tuple[str, ...] = ()
    entrypoint: str | None = None
    pre_executed: tuple[Cell, ...] = ()
    solution: tuple[Cell, ...] = ()
    limits: Limits = field(default_factory=Limits)
    source: str = ""  # the file it came from
    line: int | None = None  # the line, for JSONL
