"""The agents' prompts as one set (`PromptSet`), from our template files or SUPER's prompt.yaml.

`--super-prompts PATH` picks them (`load_prompts`):

- `ours` (the default): the template files shipped in `pytest_super/agents/prompts/`;
- `reference`: the paper's agent in one word: SUPER's own prompt.yaml at the pinned commit, with
  the protocol strings its agent's code holds (`reference`), both downloaded once and cached;
- a folder: template files in the same layout, one file per prompt part (`PARTS`), `{name}`
  placeholders filled by the agent (a brace that is not one of a part's placeholders stays as it
  is), every part present;
- a file: SUPER's own `agent/prompt.yaml` (keys `system_prompt`, `commands`,
  `edit_demonstration`; `{{commands}}` and `{{edit_demonstration}}` replaced as the reference's
  agent replaces them). It holds ReAct's prompt only: the ReAct agents (react, react-super, and
  reflexion's actor) take it, with `Query: <query>` as the task's message, as the reference sends
  it; the SWE-agent and reflexion's reflection prompt keep ours (SUPER's repository has none).

Beside a prompt.yaml, an optional `protocol.yaml` holds the reference's protocol strings, which
its prompt.yaml does not (`PROTOCOL_FIELDS`: the format-error correction, the still-running note
with `{seconds}`, the interrupt's observation, the unknown-action observation's start, the action
name and observation of a submission that is not JSON). With a
prompt.yaml the ReAct agents show the history as the reference's agent does (its reading of a
reply, no step for the automatic interrupt) and, given a protocol.yaml, in its words
(`PromptSet.protocol`); the repository holds no copy of them (the tests rebuild both files from
the published notebooks). A folder may hold a `protocol.yaml` too: the SWE-agent then shows a
cell's output, timeout note and interrupt as the published SWE-agent episodes do.

The set knows where it came from (`label`: `ours`, or the path and its sha256), for the report
header, results.jsonl and the HTML report. A bad file is a `PromptFileError` naming the file, the
field and what to do; `--super-prompts` turns it into a usage error.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from pytest_super import safe_read
from pytest_super.errors import SuperError

if TYPE_CHECKING:
    from importlib.abc import Traversable

#: the value of --super-prompts that names our own templates
OURS = "ours"
#: the value of --super-prompts that names the reference's own prompt.yaml and protocol strings,
#: downloaded at the pinned commit and cached (`reference_files`, `reference_protocol`)
REFERENCE = "reference"
#: the package folder holding our templates
OURS_PACKAGE = "pytest_super.agents.prompts"


@dataclass(frozen=True)
class Part:
    """One prompt part of the folder layout: its file, what it is, the placeholders it must hold."""

    file: str
    what: str
    required: tuple[str, ...] = ()


#: the folder layout: one file per prompt part, by part name
PARTS: dict[str, Part] = {
    p.file.removesuffix(".txt"): p
    for p in (
        Part(
            "react_system.txt",
            "ReAct's system prompt with its demonstrations; placeholders {commands}, {timeout}, "
            "{edit_demonstration}",
            ("{commands}",),
        ),
        Part(
            "react_commands.txt",
            "ReAct's list of actions; placeholders {count}, {edit}, {submit_number}",
        ),
        Part("react_edit_command.txt", "ReAct-SUPER's edit action (the edit-tool description)"),
        Part("react_edit_demonstration.txt", "ReAct-SUPER's edit demonstration"),
        Part("react_instance.txt", "ReAct's task message; placeholder {query}", ("{query}",)),
        Part(
            "swe_system.txt",
            "the SWE-agent's system prompt; placeholders {window}, {command_docs} (a prompt "
            "that lists the commands itself, as the published one, needs neither)",
        ),
        Part(
            "swe_instance.txt",
            "the SWE-agent's task message; placeholders {query}, {cell_timeout}, {interrupt}, "
            "{wait}",
            ("{query}",),
        ),
        Part(
            "swe_edit_command.txt",
            "the SWE-agent's edit command (the edit-tool description); placeholder {end_of_edit}",
        ),
        Part("reflexion_system.txt", "Reflexion's prompt asking for a plan after a failed try"),
    )
}
#: the fields of SUPER's prompt.yaml (super/agent/prompt.yaml upstream)
REFERENCE_FIELDS = ("system_prompt", "commands", "edit_demonstration")
#: the file beside a prompt.yaml with the reference's protocol strings, and its fields
PROTOCOL_FILE = "protocol.yaml"
PROTOCOL_FIELDS = (
    "format_error",
    "timeout",
    "interrupted",
    "invalid_action",
    "invalid_submission_action",
    "invalid_submission",
)


class PromptFileError(SuperError, ValueError):
    """A prompt file or folder that cannot be used: names the file, the field and what to do."""


def fill(template: str, **values: str) -> str:
    """`template` with each `{name}` of `values` replaced; other braces stay as they are."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g}-minute" if seconds >= 60 else f"{seconds:g}-second"


@dataclass(frozen=True)
class PromptSet:
    """The prompt text of every agent, and where it came from."""

    #: "ours", or the resolved path of the file or folder
    source: str
    #: of the file; of a folder (and ours): of its part files, in name order
    sha256: str
    #: our template parts by name (`PARTS`): from the folder, or ours
    templates: Mapping[str, str] = field(repr=False)
    #: SUPER's prompt.yaml fields when the set came from one: they replace ReAct's parts
    reference: Mapping[str, str] | None = field(default=None, repr=False)
    #: the reference's protocol strings (`PROTOCOL_FIELDS`), from a protocol.yaml beside it
    protocol: Mapping[str, str] | None = field(default=None, repr=False)
    #: the reference's commit when the set is its own files downloaded (`--super-prompts
    #: reference`), else None
    pinned: str | None = None

    @property
    def label(self) -> str:
        """`ours`, or `<path> (sha256 <hex>)`: what the report header shows."""
        return OURS if self.source == OURS else f"{self.source} (sha256 {self.sha256})"

    def properties(self) -> dict[str, str]:
        """What a task's record says of the prompts: `prompts` (ours, or the path) and, for a
        file or folder, `prompts_sha256`."""
        if self.source == OURS:
            return {"prompts": OURS}
        return {"prompts": self.source, "prompts_sha256": self.sha256}

    # -- ReAct, ReAct-SUPER, Reflexion's actor -------------------------------------------------
    def react_system(self, *, with_edit: bool, cell_timeout_s: float) -> str:
        """ReAct's system prompt: the edit action and demonstration for react-super only; a
        prompt.yaml's text as the reference builds it (the same for both: its prompt does not
        change with the edit tool)."""
        if self.reference is not None:
            text = self.reference["system_prompt"]
            text = text.replace("{{commands}}", self.reference["commands"])
            return text.replace("{{edit_demonstration}}", self.reference["edit_demonstration"])
        t = self.templates
        commands = fill(
            t["react_commands"],
            count="three" if with_edit else "two",
            edit=t["react_edit_command"] if with_edit else "",
            submit_number="3" if with_edit else "2",
        ).rstrip("\n")
        demonstration = t["react_edit_demonstration"] if with_edit else ""
        return fill(
            t["react_system"],
            commands=commands,
            timeout=f"a {_duration(cell_timeout_s)} timeout",
            edit_demonstration=demonstration.rstrip("\n"),
        ).rstrip("\n")

    def react_query(self, query: str) -> str:
        """ReAct's task message."""
        if self.reference is not None:
            return f"Query: {query}"
        return fill(self.templates["react_instance"].rstrip("\n"), query=query)

    # -- SWE-agent --------------------------------------------------------------------------
    def swe_system(self, *, window: int, command_docs: str) -> str:
        return fill(self.templates["swe_system"], window=str(window), command_docs=command_docs)

    def swe_instance(self, *, query: str, cell_timeout: str, interrupt: str, wait: str) -> str:
        return fill(
            self.templates["swe_instance"],
            query=query,
            cell_timeout=cell_timeout,
            interrupt=interrupt,
            wait=wait,
        )

    def swe_edit_doc(self, *, end_of_edit: str) -> str:
        return fill(self.templates["swe_edit_command"].rstrip("\n"), end_of_edit=end_of_edit)

    # -- Reflexion --------------------------------------------------------------------------
    def reflection(self) -> str:
        return self.templates["reflexion_system"].rstrip("\n")


def load_prompts(path: str | Path) -> PromptSet:
    """The prompt set `path` names: `ours`, a folder of template files, or SUPER's prompt.yaml."""
    if str(path) == OURS:
        return ours()
    if str(path) == REFERENCE:
        return reference()
    where = Path(path).expanduser()
    if where.is_dir():
        templates, digest = _read_folder(where, shown=str(where))
        protocol = _read_protocol(where / PROTOCOL_FILE)  # the SWE-agent's notes, if there
        return PromptSet(str(where.resolve()), digest, templates, protocol=protocol)
    if where.exists():  # a file, or a FIFO or device the reader names
        return _read_reference(where)
    raise PromptFileError(
        f"{where}: no such file or folder; give SUPER's agent/prompt.yaml (`pytest-super download "
        f"prompts` fetches it), a folder of template files laid out as {_ours_folder()}, or ours"
    )


@functools.lru_cache(maxsize=1)
def ours() -> PromptSet:
    """Our own prompts, shipped in the package."""
    templates, digest = _read_folder(resources.files(OURS_PACKAGE), shown=_ours_folder())
    return PromptSet(OURS, digest, templates)


def reference() -> PromptSet:
    """The paper's agent in one word: the reference's prompt.yaml at the pinned commit, with the
    protocol strings its agent's code holds, downloaded once into the cache (a download that
    fails, or a file with another hash, is a PromptFileError saying what to do)."""
    from pytest_super.reference_files import PROMPTS_COMMIT, DownloadError, download_reference
    from pytest_super.reference_protocol import ProtocolSourceError, protocol_of

    try:
        target = download_reference()
        protocol = protocol_of(target.parent)
    except (DownloadError, ProtocolSourceError) as exc:
        raise PromptFileError(
            f"{REFERENCE}: the reference's files could not be had: {exc}; or give the path of a "
            "prompt.yaml (`pytest-super download prompts`)"
        ) from None
    return dataclasses.replace(_read_reference(target, protocol), pinned=PROMPTS_COMMIT)


def _ours_folder() -> str:
    return str(resources.files(OURS_PACKAGE))


def _read_folder(folder: Traversable | Path, *, shown: str) -> tuple[dict[str, str], str]:
    """Every part file of `folder`, checked; and the sha256 of them all, in name order."""
    known = {p.file for p in PARTS.values()}
    strays = sorted(
        e.name for e in folder.iterdir() if e.name.endswith(".txt") and e.name not in known
    )
    if strays:
        raise PromptFileError(
            f"{shown}: {', '.join(strays)} is not a prompt part; the part files are "
            f"{', '.join(sorted(known))}: rename it to one of them or remove it"
        )
    digest = hashlib.sha256()
    templates: dict[str, str] = {}
    for name, part in sorted(PARTS.items()):
        entry = folder.joinpath(part.file)
        if not (entry.is_file() or isinstance(entry, Path) and entry.exists()):
            raise PromptFileError(
                f"{shown}: file {part.file} is missing ({part.what}); copy it from "
                f"{_ours_folder()} and edit it"
            )
        data = _read_bytes(entry) if isinstance(entry, Path) else entry.read_bytes()  # ours
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PromptFileError(
                f"{shown}/{part.file}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
            ) from None
        for placeholder in part.required:
            if placeholder not in text:
                raise PromptFileError(
                    f"{shown}/{part.file}: the placeholder {placeholder} is missing ({part.what});"
                    f" put it where the agent's text goes"
                )
        digest.update(part.file.encode() + b"\0" + data + b"\0")
        templates[name] = text
    return templates, digest.hexdigest()


def _read_bytes(path: Path) -> bytes:
    """A user's prompt file, through the safe reader (a FIFO or gigabytes: a PromptFileError)."""
    try:
        return safe_read.read_regular_file(path, safe_read.SMALL_MAX_BYTES)
    except safe_read.ForeignDataError as exc:
        hint = safe_read.replace_hint(safe_read.SMALL_MAX_BYTES)
        raise PromptFileError(f"{exc}; {hint}") from None


def _read_reference(path: Path, protocol: dict[str, str] | None = None) -> PromptSet:
    """SUPER's prompt.yaml: its three fields, checked; ReAct's parts come from it. `protocol`:
    the protocol strings (default: a protocol.yaml beside it, if any)."""
    data = _read_bytes(path)
    fix = (
        f"give SUPER's agent/prompt.yaml with the fields {', '.join(REFERENCE_FIELDS)} (`pytest-"
        "super download prompts` fetches it), or a folder of template files"
    )
    try:
        loaded = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        reason = " ".join(str(exc).split())
        raise PromptFileError(f"{path}: not a YAML file ({reason}); {fix}") from None
    if not isinstance(loaded, dict):
        raise PromptFileError(f"{path}: not a YAML mapping of prompt fields; {fix}")
    for key in loaded:
        if key not in REFERENCE_FIELDS:
            raise PromptFileError(
                f"{path}: field {key!r} is not one of SUPER's prompt.yaml fields "
                f"({', '.join(REFERENCE_FIELDS)}); remove it (other prompts: use a folder of "
                "template files)"
            )
    _check_text_fields(path, loaded, REFERENCE_FIELDS, fix)
    if protocol is None:
        protocol = _read_protocol(path.parent / PROTOCOL_FILE)
    return PromptSet(
        str(path.resolve()),
        hashlib.sha256(data).hexdigest(),
        ours().templates,
        {key: loaded[key] for key in REFERENCE_FIELDS},
        protocol,
    )


def _check_text_fields(
    path: Path, loaded: dict[object, object], keys: tuple[str, ...], fix: str
) -> None:
    for key in keys:
        if key not in loaded:
            raise PromptFileError(f"{path}: field {key!r} is missing; {fix}")
        if not isinstance(loaded[key], str):
            raise PromptFileError(
                f"{path}: field {key!r} is {type(loaded[key]).__name__}, not text; write it as "
                f"a YAML text block ({key}: |)"
            )


def _read_protocol(path: Path) -> dict[str, str] | None:
    """The reference's protocol strings beside a prompt.yaml, if that file is there."""
    if not path.is_file():
        return None
    fix = f"give the fields {', '.join(PROTOCOL_FIELDS)} as text, or remove the file"
    try:
        loaded = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = " ".join(str(exc).split())
        raise PromptFileError(f"{path}: not a YAML file ({reason}); {fix}") from None
    if not isinstance(loaded, dict):
        raise PromptFileError(f"{path}: not a YAML mapping of protocol strings; {fix}")
    _check_text_fields(path, loaded, PROTOCOL_FIELDS, fix)
    return {key: loaded[key] for key in PROTOCOL_FIELDS}
