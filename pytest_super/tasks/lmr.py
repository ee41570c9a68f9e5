"""LMR-Bench's task folders: `benchmark/NN-name/info.json`, one task per implementation.

A folder holds `info.json` (the paper, the repository's folder name and a list of
`implementations`), the repository with each goal function masked, `golden_files/` beside it and
the unit tests inside the repository (`unit_test/`). Each implementation is an `LmrTask` with the
id `<folder>/<index>` (`13-DecBound/1`). The published tree is not clean: a folder without its
repository, a unit-test file that does not exist, a null category, a retrieval key written both
ways: each is an error of that implementation alone (`load_lmr_folder` returns it in place of
the task), the others still load. A file that is not an LMR `info.json` at all is one error.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_super.errors import TaskFileError
from pytest_super.kernels.base import ImageSpec
from pytest_super.paths import shown_path
from pytest_super.tasks.model import Task

LMR_SET = "lmr"
INFO_FILE = "info.json"
#: a category left empty ("" upstream, which its published results still score)
UNCATEGORIZED = "uncategorized"
_MAX_INFO_BYTES = 1024 * 1024
_FOLDER_KEYS = frozenset(
    {"instance_id", "folder_name", "repo_folder_name", "paper_name", "paper_url", "year"}
    | {"repo_url", "implementations"}
)
_RETRIEVAL_KEYS = ("retrieval_context", "retrieval_content")  # upstream spells it both ways
_IMPLEMENTATION_KEYS = frozenset(
    {"instruction", "index", "category", "goal_file", "goal_function", "class_name"}
    | {"golden_file", "unit_test_file", *_RETRIEVAL_KEYS}
)


@dataclass(frozen=True)
class LmrTask(Task):
    """One LMR-Bench implementation: a masked function (or method of `class_name`) to write.

    Paths: `folder` is the task folder (absolute); `goal_file` and `unit_test_file` are relative
    to the repository (`folder/repo_folder`); `golden_file` is relative to the folder."""

    folder: str = ""
    repo_folder: str = ""
    index: int = 0
    goal_file: str = ""
    goal_function: str = ""
    class_name: str | None = None
    golden_file: str = ""
    unit_test_file: str = ""
    paper_name: str = ""
    paper_url: str = ""
    retrieval: tuple[str, ...] = ()
    instruction: str = ""  # the implementation's instruction as info.json gives it

    @property
    def repo_path(self) -> Path:
        return Path(self.folder) / self.repo_folder

    @property
    def dockerfile(self) -> Path | None:
        """The folder's Dockerfile, if it has one (else the default kernel image)."""
        path = Path(self.folder) / "Dockerfile"
        return path if path.is_file() else None


#: the build args upstream's Dockerfiles declare: the user the image makes (its `useradd`; our
#: kernel runs as root in the box and mounts nothing of the host, so a fixed id serves: upstream's
#: host ids would fail there as root's, `groupadd -g 0`), and `DIR`, the repository's folder
BUILD_UID = "1000"
BUILD_GID = "1000"
#: what of the folder never goes into the build context (upstream's `COPY . .` would copy it)
NOT_IN_IMAGE = ("golden_files",)


def folder_image(folder: Path, repo_folder: str) -> ImageSpec | None:
    """The image a task folder's Dockerfile builds (None without one: the default image)."""
    if not (folder / "Dockerfile").is_file():
        return None
    return ImageSpec(
        context=str(folder.resolve()),
        dockerfile="Dockerfile",
        build_args=(("UID", BUILD_UID), ("GID", BUILD_GID), ("DIR", repo_folder)),
        exclude=NOT_IN_IMAGE,
    )


#: (task id, the task or the error that names its broken part)
LmrEntry = tuple[str, "LmrTask | TaskFileError"]


#: the paper's text shown in the task prompt, at most (the rest: paper.json in the repository)
PAPER_CHARS = 60_000


@dataclass(frozen=True)
class Goal:
    """What an implementation asks for: a function (a method of `class_name`) in a file."""

    file: str
    function: str
    class_name: str | None
    unit_test: str

    @property
    def text(self) -> str:
        owner = f"the method `{self.function}` of class `{self.class_name}`"
        return owner if self.class_name else f"the function `{self.function}`"


def task_prompt(instruction: str, goal: Goal, data: Mapping[str, object], paper: str | None) -> str:
    """The task's query: the instruction, the goal file and function, and the paper's text."""
    parts = [
        instruction.strip(),
        f"The repository is your working folder. The goal is {goal.text} in `{goal.file}`: its "
        "body was removed (its signature, docstring and return statement are kept). Implement "
        f"it; the unit test `{goal.unit_test}` decides whether it is right.",
    ]
    title = f"{data.get('paper_name') or 'the paper'} ({data.get('paper_url') or 'no URL'})"
    if paper is None:
        parts.append(f"The paper: {title}. Its text is not in the repository.")
    else:
        cut = paper[:PAPER_CHARS]
        more = (
            ""
            if cut == paper
            else f"\n[... cut at {PAPER_CHARS} characters: paper.json has the rest]"
        )
        parts.append(f"The paper: {title}. Its text (paper.json):\n{cut}{more}")
    return "\n\n".join(parts)


def paper_text(info: Path, repo: Path) -> str | None:
    """The text of the repository's paper.json (pages joined in order), None without one."""
    path = repo / "paper.json"
    if not path.is_file():
        return None
    try:
        pages = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise TaskFileError(
            shown_path(path), f"is not readable JSON ({exc})", hint="fix or remove paper.json"
        ) from None
    if not isinstance(pages, dict) or not all(isinstance(v, str) for v in pages.values()):
        raise TaskFileError(
            shown_path(path), "must map page numbers to their text", value=type(pages).__name__
        )
    order = sorted(pages, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
    return "\n\n".join(pages[k] for k in order)


def category_marker(label: str) -> str:
    """A category as a marker name: "Training Objectives & Optimization Techniques" ->
    "training_objectives_optimization_techniques"; "" -> "uncategorized"."""
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or UNCATEGORIZED


def is_lmr_info(path: Path) -> bool:
    """Whether `path` is an LMR-Bench `info.json`: named so, holding `implementations`, or
    unreadable beside a `golden_files/` folder (then loading it says what is wrong)."""
    if path.name != INFO_FILE or not path.is_file():
        return False
    try:
        data = json.loads(path.read_bytes()[:_MAX_INFO_BYTES])
    except (OSError, ValueError):
        return (path.parent / "golden_files").is_dir()
    return isinstance(data, dict) and "implementations" in data


def inside_lmr_folder(path: Path) -> bool:
    """Whether `path` is a part of an LMR task folder other than its info.json (the repository,
    golden files, unit tests: never pytest's to collect)."""
    return path.name != INFO_FILE and is_lmr_info(path.parent / INFO_FILE)


def load_lmr_folder(info: Path) -> list[LmrEntry]:
    """The implementations of an LMR task folder, each a task or the error of its broken part.

    Raises `TaskFileError` when `info.json` itself cannot be read as LMR-Bench's."""
    data = _read_info(info)
    folder = info.parent
    items = data["implementations"]
    assert isinstance(items, list)  # _read_info checked it
    repo_error = _repository_error(info, data)
    entries: list[LmrEntry] = []
    seen: set[int] = set()
    for position, entry in enumerate(items):
        where = f"implementations[{position}]"
        index = entry.get("index") if isinstance(entry, dict) else None
        good_index = isinstance(index, int) and not isinstance(index, bool) and index >= 1
        task_id = f"{folder.name}/{index if good_index else position + 1}"
        try:
            if repo_error is not None:
                raise repo_error
            task = _implementation(info, data, entry, where)
            if task.index in seen:
                raise TaskFileError(
                    shown_path(info),
                    "duplicate implementation index",
                    field=f"{where}.index",
                    value=task.index,
                    hint="each implementation of a folder needs its own index",
                )
            seen.add(task.index)
            entries.append((task_id, task))
        except TaskFileError as exc:
            entries.append((task_id, exc))
    return entries


def lmr_tasks(info: Path) -> list[LmrTask]:
    """The tasks of an LMR folder; the first broken part raises (as `load_tasks` does)."""
    tasks: list[LmrTask] = []
    for _, entry in load_lmr_folder(info):
        if isinstance(entry, TaskFileError):
            raise entry
        tasks.append(entry)
    return tasks


def _read_info(info: Path) -> dict[str, object]:
    try:
        raw = info.read_bytes()
    except OSError as exc:
        raise TaskFileError(shown_path(info), f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > _MAX_INFO_BYTES:
        raise TaskFileError(
            shown_path(info), f"is over {_MAX_INFO_BYTES} bytes: not an LMR info.json"
        )
    try:
        data = json.loads(raw, object_pairs_hook=_no_duplicate_keys(info))
    except ValueError as exc:
        if isinstance(exc, TaskFileError):
            raise
        raise TaskFileError(
            shown_path(info), f"is not valid JSON ({exc})", hint="fix the JSON syntax"
        ) from None
    if not isinstance(data, dict):
        raise TaskFileError(shown_path(info), "must hold a JSON object", value=type(data).__name__)
    _check_keys(info, data, _FOLDER_KEYS, "", "an LMR info.json")
    implementations = data.get("implementations")
    if not isinstance(implementations, list) or not implementations:
        raise TaskFileError(
            shown_path(info),
            "needs a non-empty list of implementations",
            field="implementations",
            value=implementations,
            hint="list the masked functions, one object each",
        )
    return data


def _check_keys(
    info: Path, mapping: Mapping[str, object], known: frozenset[str], where: str, what: str
) -> None:
    unknown = sorted(set(mapping) - known)
    if unknown:
        raise TaskFileError(
            shown_path(info),
            "unknown key",
            field=f"{where}{unknown[0]}",
            value=mapping[unknown[0]],
            hint=f"{what} has the keys {', '.join(sorted(known))}",
        )


def _no_duplicate_keys(info: Path) -> Callable[[list[tuple[str, object]]], dict[str, object]]:
    def hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        result: dict[str, object] = {}
        for key, value in pairs:
            if key in result:
                raise TaskFileError(
                    shown_path(info),
                    "duplicate key",
                    field=key,
                    value=value,
                    hint="a key may appear once per object",
                )
            result[key] = value
        return result

    return hook


def _repository_error(info: Path, data: Mapping[str, object]) -> TaskFileError | None:
    """The folder's repository is missing or empty (upstream's empty submodules): every
    implementation of the folder is broken by it."""
    name = data.get("repo_folder_name")
    if not isinstance(name, str) or not name or _escapes(info.parent, name):
        return TaskFileError(
            shown_path(info),
            "needs the repository's folder name",
            field="repo_folder_name",
            value=name,
            hint="name the repository's folder inside the task folder",
        )
    repo = info.parent / name
    if not repo.is_dir() or not any(repo.iterdir()):
        state = "is empty" if repo.is_dir() else "does not exist"
        return TaskFileError(
            shown_path(info),
            f"no repository: {shown_path(repo)} {state}",
            field="repo_folder_name",
            value=name,
            hint="put the paper's repository (with the goal functions masked) in that folder; "
            "upstream's tree has empty submodules there",
        )
    return None


def _implementation(info: Path, data: dict[str, object], entry: object, where: str) -> LmrTask:
    if not isinstance(entry, dict):
        raise TaskFileError(shown_path(info), "must be a JSON object", field=where, value=entry)
    _check_keys(info, entry, _IMPLEMENTATION_KEYS, f"{where}.", "an implementation")
    text = _TextFields(info, entry, where)
    folder = info.parent
    repo_folder = data["repo_folder_name"]
    assert isinstance(repo_folder, str)  # _repository_error checked it, before any implementation
    repo = folder / repo_folder
    index = entry.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 1:
        raise TaskFileError(
            shown_path(info), "needs a whole number from 1", field=f"{where}.index", value=index
        )
    category = _category(info, entry, where)
    goal_file = text.path("goal_file", repo)
    unit_test = text.path("unit_test_file", repo, hint=_unit_tests_hint(repo))
    goal = Goal(goal_file, text.required("goal_function"), text.optional("class_name"), unit_test)
    instruction = text.required("instruction")
    return LmrTask(
        id=f"{folder.name}/{index}",
        set=LMR_SET,
        query=task_prompt(instruction, goal, data, paper_text(info, repo)),
        instruction=instruction,
        categories=(category_marker(category),),
        raw_category=category or UNCATEGORIZED,
        source=str(info),
        folder=str(folder.resolve()),
        repo_folder=repo_folder,
        index=index,
        goal_file=goal_file,
        goal_function=goal.function,
        class_name=goal.class_name,
        golden_file=text.path("golden_file", folder),
        unit_test_file=unit_test,
        paper_name=str(data.get("paper_name") or ""),
        paper_url=str(data.get("paper_url") or ""),
        retrieval=_retrieval(info, entry, where),
        image_spec=folder_image(folder, repo_folder),
    )


@dataclass(frozen=True)
class _TextFields:
    """An implementation's string fields, each checked with its name in the error."""

    info: Path
    entry: dict[str, object]
    where: str

    def required(self, key: str) -> str:
        value = self.entry.get(key)
        if not isinstance(value, str) or not value.strip():
            raise TaskFileError(
                shown_path(self.info),
                "needs a non-empty string",
                field=f"{self.where}.{key}",
                value=value,
                hint=f"write the implementation's {key.replace('_', ' ')}",
            )
        return value

    def optional(self, key: str) -> str | None:
        value = self.entry.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise TaskFileError(
                shown_path(self.info), "must be a string", field=f"{self.where}.{key}", value=value
            )
        return value

    def path(self, key: str, base: Path, hint: str = "") -> str:
        """A file named relative to `base` that must exist inside it."""
        value = self.required(key)
        if _escapes(base, value):
            raise TaskFileError(
                shown_path(self.info),
                f"must name a file inside {shown_path(base)}",
                field=f"{self.where}.{key}",
                value=value,
                hint="give a relative path without '..'",
            )
        if not (base / value).is_file():
            raise TaskFileError(
                shown_path(self.info),
                f"names a file that does not exist: {shown_path(base / value)}",
                field=f"{self.where}.{key}",
                value=value,
                hint=hint or "correct the path or add the file",
            )
        return value


def _category(info: Path, entry: Mapping[str, object], where: str) -> str:
    category = entry.get("category")
    if category is None:
        raise TaskFileError(
            shown_path(info),
            "category is null",
            field=f"{where}.category",
            value=None,
            hint="give the implementation a category; upstream's published results leave "
            "the implementations of null category out",
        )
    if not isinstance(category, str):
        raise TaskFileError(
            shown_path(info), "must be a string", field=f"{where}.category", value=category
        )
    return category.strip()


def _retrieval(info: Path, entry: Mapping[str, object], where: str) -> tuple[str, ...]:
    present = [k for k in _RETRIEVAL_KEYS if k in entry]
    if len(present) > 1:
        raise TaskFileError(
            shown_path(info),
            "retrieval written twice",
            field=f"{where}.{present[1]}",
            value=entry[present[1]],
            hint=f"keep one of {' and '.join(_RETRIEVAL_KEYS)}",
        )
    value = entry.get(present[0]) if present else []
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskFileError(
            shown_path(info),
            "must be a list of strings",
            field=f"{where}.{present[0]}",
            value=value,
        )
    return tuple(value)


def _unit_tests_hint(repo: Path) -> str:
    found = sorted(p.name for p in (repo / "unit_test").glob("*.py"))
    if not found:
        return "add the unit test to the repository's unit_test/ folder"
    return f"the repository's unit_test/ folder has {', '.join(found)}: name one of them"


def _escapes(base: Path, relative: str) -> bool:
    """Whether `relative` leaves `base` (absolute, `..`, or a link out of it)."""
    if os.path.isabs(relative):
        return True
    target = (base / relative).resolve()
    root = base.resolve()
    return target != root and root not in target.parents
