"""What one SUPER task is: `Task`, `Cell`, `Limits`, the sets and the categories a task id carries."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from pytest_super.kernels.base import ImageSpec

SETS = ("expert", "masked", "auto")
CATEGORIES = ("dependencies", "cpu", "configuration", "data", "issue", "goal", "other")
# The kernel image profile a task runs in unless it names one (`image:`) or --super-image is
# given: our YAML files keep the small default image; SUPER's own rows need its environment.
YAML_IMAGE = "default"
SUPER_IMAGE = "colab"


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
    #: an edit cell's content as the task gave it, when known (the reference shows it as given,
    #: trailing blank lines included; `format_edit` of the request is canonical)
    source: str = field(default="", compare=False)


@dataclass(frozen=True)
class Bounds:
    """The accepted range of a number: finite, from `low` (above it when `above`) to `high`;
    a whole number when `whole`. `text` says it as an error message does."""

    low: float
    high: float
    unit: str = ""
    above: bool = False
    whole: bool = False

    def accepts(self, value: float) -> bool:
        if not math.isfinite(value) or value > self.high:
            return False
        return value > self.low if self.above else value >= self.low

    @property
    def text(self) -> str:
        kind = "a whole number" if self.whole else "a finite number"
        unit = f" of {self.unit}" if self.unit else ""
        if self.above:
            return f"{kind}{unit} above {_plain(self.low)} and at most {_plain(self.high)}"
        return f"{kind}{unit} from {_plain(self.low)} to {_plain(self.high)}"


def _plain(number: float) -> str:
    """1e9 as 1000000000, 0.5 as 0.5: a bound as a user would type it."""
    return str(int(number)) if float(number).is_integer() else str(number)


#: the longest time limit (a cell's timeout, a task's compute): 30 days, far above SUPER's 1800 s
#: and far below what a timer takes (deadlines.MAX_TIMER_S)
MAX_LIMIT_S = 30 * 24 * 3600
#: the accepted range of each task limit, and of the run's option that sets it by default
#: (--super-compute-limit, --super-token-budget, --super-steps, --super-cell-timeout)
LIMIT_RANGES: dict[str, Bounds] = {
    "compute_s": Bounds(0, MAX_LIMIT_S, "seconds", above=True),
    "token_budget": Bounds(1, 1_000_000_000, "tokens", whole=True),
    "steps": Bounds(1, 10_000, "steps", whole=True),
    "cell_timeout_s": Bounds(0, MAX_LIMIT_S, "seconds", above=True),
}


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
    answer: object = None  # gold values (dict, list, number, string); None for auto tasks
    landmarks: tuple[str, ...] = ()
    entrypoint: str | None = None
    pre_executed: tuple[Cell, ...] = ()
    solution: tuple[Cell, ...] = ()
    limits: Limits = field(default_factory=Limits)
    image: str = YAML_IMAGE  # the kernel image profile (pytest_super.kernels.docker.image.PROFILES)
    #: the image the task's own files describe (an LMR-Bench folder's Dockerfile), made by the
    #: backend when the task runs (`kernels.prepare_task_image`); None: the profile's image
    image_spec: ImageSpec | None = None
    source: str = ""  # the file it came from
    line: int | None = None  # the line, for JSONL
    raw_category: str = ""  # a masked id's category suffix as written (e.g. "customgoal")

    @property
    def category(self) -> str:
        """The category as the data writes it (`super.category`): the id's raw suffix when the
        categories came from it, else the categories joined by commas."""
        return self.raw_category or ",".join(self.categories)


def category_suffix(task_id: str) -> str:
    """The raw category suffix of a masked task id: what follows its last underscore ("" if none)."""
    _, underscore, suffix = task_id.rpartition("_")
    return suffix if underscore else ""


def categories_from_id(task_id: str) -> tuple[str, ...]:
    """The masked categories a task id carries after its last underscore.

    `amrbart_dependencies` -> ("dependencies",); `safetybench_configuration,cpu` ->
    ("configuration", "cpu"). A word that is not one of the paper's categories (the real data has
    `_custom` and `_customgoal`) is "other"; () when the id has no suffix.
    """
    return categories_of(category_suffix(task_id))


def categories_of(label: str) -> tuple[str, ...]:
    """The paper's categories named by a category label such as `configuration,cpu` or
    `customgoal` (a word that is not one of them is "other")."""
    found: list[str] = []
    for word in label.split(","):
        word = word.strip().lower()
        if not word:
            continue
        word = word if word in CATEGORIES else "other"
        if word not in found:
            found.append(word)
    return tuple(found)


def raw_category_of(task_id: str) -> str:
    """The id's suffix as written when it names a category outside the paper's (kept in
    `super.category`, e.g. "customgoal"); "" when the suffix is made of known categories."""
    suffix = category_suffix(task_id)
    words = [w.strip().lower() for w in suffix.split(",") if w.strip()]
    return suffix if any(w not in CATEGORIES for w in words) else ""
