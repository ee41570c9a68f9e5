"""The run's settings: one table (`SETTINGS`), one resolution, one plain record (`SuperRun`).

Each setting is declared once in `SETTINGS`: its option `--super-<name>`, its ini key
`super_<name>`, the environment variables that hold it where one is customary, its default and how
its text is read. A value comes from the option (or a keyword of `SuperRun.resolve`), else the
environment, else the ini file, else the default; a bad one is a `SettingError` naming where it
came from (`--super-mem`, `environment variable RAY_ADDRESS`, `ini super_mem (pytest.ini)`).
`run.sources` says where each value came from.

Under pytest, options.py hands `resolve_run` what pytest parsed (the same code path); a script
resolves the settings of a folder as a pytest run there would:

    run = SuperRun.resolve(rootdir=Path("bench"), agent="gold", mem="3g")

and `SuperRun(...)` built directly holds the same defaults as a pytest run. Nothing here imports
pytest: the ini file is found and read by `find_ini`, which follows pytest's own search
(`_pytest.config.findpaths.locate_config`, pytest 9: the first of pytest.toml, .pytest.toml,
pytest.ini, .pytest.ini, pyproject.toml with a [tool.pytest] table, tox.ini with [pytest],
setup.cfg with [tool:pytest] in the folder or an ancestor) with the `iniconfig` parser pytest uses.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import secrets
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_super import defaults, safe_read
from pytest_super.environment import AgentOptions
from pytest_super.executors import EXECUTORS as _EXECUTOR_NAMES
from pytest_super.kernels.base import KernelSettings
from pytest_super.llm import LLMSettings
from pytest_super.llm.breaker import ENDPOINT_DOWN_FILE
from pytest_super.netfaults import NETWORK_FAULT_CHOICES
from pytest_super.prompts import PromptSet, load_prompts
from pytest_super.runner import PASS_METRICS, RunSettings
from pytest_super.scoring import DEFAULT_TOLERANCE
from pytest_super.tasks import SETS
from pytest_super.tasks.model import LIMIT_RANGES, Bounds

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_DISK = defaults.DISK
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
#: agents whose code is the task's own (reviewed) solution: they may share the pip cache
TRUSTED_AGENTS = frozenset({"gold"})
#: where the API key is read, first first (llm.api_key_from_env)
API_KEY_VARIABLES = ("SUPER_API_KEY", "OPENAI_API_KEY")


class SettingError(ValueError):
    """A setting that does not read or does not fit the run; the message names its source and
    what to do. Under pytest it becomes a usage error with the same message."""


def new_run_id() -> str:
    """A run id: the start time, for sorting, and 64 random bits, so that runs started in the same
    second on many machines (a CI matrix, shards) never share a report folder or container label."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(8)


# -- how a text value is read ------------------------------------------------------------------
#: the accepted range of each number a setting holds (a task's limits: tasks.model.LIMIT_RANGES)
DISK_BOUNDS = Bounds(2**20, 2**50)  # 1m .. 1024t
#: Docker's least memory limit is 6m; 16384g is more than any machine has
MEMORY_BOUNDS = Bounds(6 * 2**20, 16384 * 2**30)
#: the engine refuses fewer than 0.01 CPUs (and below 1e-9 nano_cpus rounds to 0: no limit at all)
CPU_BOUNDS = Bounds(0.01, 1024, "CPUs")
TOLERANCE_BOUNDS = Bounds(0, 1e9)
THRESHOLD_BOUNDS = Bounds(0, 1)
PRICE_BOUNDS = Bounds(0, 1_000_000, "USD per million tokens")
REPEAT_BOUNDS = Bounds(1, 1000, whole=True)
_MEMORY_UNITS = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30}


def _disk_size(value: str) -> int | None:
    """SIZE in bytes (binary units k, m, g, t; b optional), from 1m to 1024t; "none": no bound."""
    text = value.strip().lower().removesuffix("b").removesuffix("i")
    if text == "none":
        return None
    number, unit = text.rstrip("kmgt"), text[len(text.rstrip("kmgt")) :]
    try:
        size = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        size = math.nan
    if not DISK_BOUNDS.accepts(size):
        raise ValueError(
            "expected a size from 1m to 1024t such as 20g or 500m, or none for no bound"
        )
    return int(size)


def memory_size(value: str) -> str:
    """--super-mem, read by the rules of the Docker SDK's `parse_bytes` (which the engine's
    client applies to it later): units b, k, m, g (any case, a `b` after a unit allowed), no unit
    for bytes; from 6m, Docker's least, to 16384g. The text is kept as given."""
    text = value
    if text[-2:-1].isalpha() and text[-1:] in ("b", "B"):
        text = text[:-1]
    suffix = text[-1:].lower()
    digits, unit = (text, "b") if suffix.isdigit() else (text[:-1], suffix)
    try:
        size = float(digits) * _MEMORY_UNITS[unit]
    except (ValueError, KeyError):
        size = math.nan
    if not MEMORY_BOUNDS.accepts(size):
        raise ValueError(
            "expected a memory size from 6m to 16384g in Docker's units b, k, m, g, e.g. 4g"
        )
    return value


def number_reader(bounds: Bounds) -> Callable[[str], Any]:
    """A reader of a number in `bounds`: an int when they are whole, else a finite float (for
    the settings an executor declares, too)."""

    def read(value: str) -> Any:
        try:
            number: float = int(value) if bounds.whole else float(value)
        except ValueError:
            number = math.nan
        if not bounds.accepts(number):
            raise ValueError(f"expected {bounds.text}")
        return number

    return read


_number = number_reader


def _runs_per_task(value: str) -> int:
    try:
        return int(_number(REPEAT_BOUNDS)(value))
    except ValueError:
        raise ValueError("give 1 or more runs per task (at most 1000)") from None


def _prices(value: str) -> tuple[float, float, float | None]:
    """IN,OUT[,CACHED]: USD per million prompt, completion (and cached prompt) tokens."""
    try:
        prices = [float(part) for part in value.split(",")]
    except ValueError:
        prices = []
    if len(prices) not in (2, 3) or not all(PRICE_BOUNDS.accepts(p) for p in prices):
        raise ValueError(f"expected IN,OUT[,CACHED], each {PRICE_BOUNDS.text}, e.g. 2.5,10,1.25")
    return prices[0], prices[1], (prices[2] if len(prices) == 3 else None)


def _choice(*names: str) -> Callable[[str], str]:
    def read(value: str) -> str:
        if value not in names:
            raise ValueError(f"expected one of {', '.join(names)}")
        return value

    return read


def _boolean(value: str) -> bool:
    text = value.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _backend(value: str) -> str:
    """A kernel backend's name (built-in, entry point or module:Class), or a deprecated alias of
    an executor (executors.BACKEND_ALIASES). A built-in name is known without importing its backend
    (every pytest start reads this setting)."""
    from pytest_super import executors, kernels

    if value in executors.BACKEND_ALIASES or value in kernels.BACKENDS:
        return value
    kernels.kernel_backend_class(value)  # ValueError naming the known backends
    return value


def _executor(value: str) -> str:
    """An executor's name (built-in, entry point or module:Class), known without importing it."""
    from pytest_super import executors

    return executors.check_executor_name(value)


def _text(value: str) -> str:
    return value


def _registry(value: str) -> str:
    from pytest_super.kernels.docker.registry import registry_address

    return registry_address(value)


def _prompts(value: str) -> PromptSet:
    """`ours`, `reference`, a folder of prompt templates, or SUPER's prompt.yaml
    (PromptFileError, a ValueError, names the file and field)."""
    return load_prompts(value)


@dataclass(frozen=True)
class Setting:
    """One setting: `--super-<name>`, ini `super_<name>` (when `ini`), environment variables."""

    name: str  # "mem": --super-mem, ini super_mem, SuperRun/KernelSettings field by `resolve`
    read: Callable[[str], Any]
    default: Any
    help: str
    ini: bool = True
    env: tuple[str, ...] = ()
    metavar: str | None = None
    #: an executor's setting naming its cluster: also `--<name>` of `pytest-super image build`
    #: and `cleanup`, which act on that cluster's nodes when it is given (or in `env`)
    cluster_address: bool = False

    @property
    def flag(self) -> str:
        return "--super-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "super_" + self.name


SETTINGS: tuple[Setting, ...] = (
    Setting("model", _text, None, "model name for LLM agents"),
    Setting(
        "judge_model",
        _text,
        None,
        "LMR tasks: also ask this model (same endpoint) to grade the agent's function against "
        "the golden one with LMR-Bench's judge rubric (default: no judge)",
    ),
    Setting(
        "base_url",
        _text,
        DEFAULT_BASE_URL,
        "OpenAI-compatible endpoint (also SUPER_BASE_URL, OPENAI_BASE_URL); key from "
        "SUPER_API_KEY or OPENAI_API_KEY",
        env=("SUPER_BASE_URL", "OPENAI_BASE_URL"),
    ),
    Setting(
        "backend",
        _backend,
        "docker",
        "what holds each task's kernel: docker (default), local (isolates nothing), an entry "
        "point name or package.module:Class",
    ),
    Setting(
        "executor",
        _executor,
        "local",
        "where each task runs: local (this process or an xdist worker; default), "
        + ", ".join(n for n in _EXECUTOR_NAMES if n != "local")
        + " (each task whole on a cluster's node), an entry point name or package.module:Class",
    ),
    Setting(
        "progress",
        _choice("auto", "on", "off"),
        "auto",
        "a status line of tasks running, queued and done with an ETA, redrawn on a terminal, "
        "once a minute in a log: auto (runs whose tasks go to several slots: xdist, an executor "
        "that runs them elsewhere; default), on, off",
    ),
    Setting("image", _text, None, "kernel image (default: what `pytest-super image build` makes)"),
    Setting(
        "registry",
        _registry,
        None,
        "a Docker registry the kernel image was pushed to (`pytest-super image push --registry "
        "HOST:PORT`): an "
        "engine without the image pulls it from there before building it",
        metavar="HOST:PORT",
    ),
    Setting("docker_host", _text, None, "Docker engine address (default DOCKER_HOST)"),
    Setting("mem", memory_size, defaults.MEM, f"container memory limit (default {defaults.MEM})"),
    Setting(
        "cpus", _number(CPU_BOUNDS), defaults.CPUS, f"container CPUs (default {defaults.CPUS:g})"
    ),
    Setting(
        "network",
        _choice("bridge", "none"),
        defaults.NETWORK,
        f"container network (default {defaults.NETWORK})",
    ),
    Setting(
        "disk",
        _disk_size,
        DEFAULT_DISK,
        f"what one task may write, e.g. 20g, 500m, or none (default {DEFAULT_DISK}); a task "
        "over it ends with exit status disk_limit",
        metavar="SIZE",
    ),
    Setting(
        "cell_timeout",
        _number(LIMIT_RANGES["cell_timeout_s"]),
        defaults.CELL_TIMEOUT_S,
        f"seconds per cell ({defaults.CELL_TIMEOUT_S:g})",
    ),
    Setting(
        "compute_limit",
        _number(LIMIT_RANGES["compute_s"]),
        defaults.COMPUTE_LIMIT_S,
        f"seconds of summed cell time per task, prefix cells included ({defaults.COMPUTE_LIMIT_S:g})",
    ),
    Setting(
        "pip_cache",
        _text,
        None,
        "docker volume shared by task containers as pip's cache (mounted only for the gold "
        "agent: see docs/security.md)",
    ),
    Setting(
        "tolerance",
        _number(TOLERANCE_BOUNDS),
        DEFAULT_TOLERANCE,
        f"numeric tolerance ({DEFAULT_TOLERANCE:g})",
    ),
    Setting(
        "pass_metric",
        _choice(*PASS_METRICS),
        None,
        "metric deciding pass (default accuracy; script-executed for auto)",
    ),
    Setting("pass_threshold", _number(THRESHOLD_BOUNDS), 1.0, "pass if metric >= this (1)"),
    Setting("report_dir", _text, "reports", "where runs write reports (default reports)"),
    Setting(
        "price",
        _prices,
        None,
        "USD per million prompt, completion (and cached prompt) tokens",
        metavar="IN,OUT[,CACHED]",
    ),
    Setting("llm_cache", _text, None, "cache model responses on disk", metavar="DIR"),
    Setting(
        "network_faults",
        _choice(*NETWORK_FAULT_CHOICES),
        NETWORK_FAULT_CHOICES[0],
        "an LLM agent's episode that failed where the network or an outside service failed "
        "inside the task: score (as SUPER's paper did, docs/results.md; default) or error (a "
        "pytest error, run again by --super-retries); under the gold agent any miss is an error",
    ),
    Setting(
        "llm_breaker",
        _number(Bounds(0, 1000, whole=True)),
        5,
        "the circuit breaker: after N model calls in a row get no answer or a 5xx, across the "
        "run's tasks, the endpoint is checked once; if it is down no new task starts and the "
        "run ends with the --super-resume command (5; 0: never)",
        metavar="N",
    ),
    Setting(
        "llm_breaker_check",
        _number(Bounds(1, 600)),
        10.0,
        "seconds the circuit breaker's check of the endpoint waits for an answer (10)",
        metavar="SECONDS",
    ),
    Setting(
        "token_budget",
        _number(LIMIT_RANGES["token_budget"]),
        None,
        "prompt-token budget per task (default 600k expert/auto, 400k masked)",
    ),
    Setting(
        "steps",
        _number(LIMIT_RANGES["steps"]),
        defaults.STEPS,
        f"step limit per episode ({defaults.STEPS})",
    ),
    Setting(
        "attempts",
        _number(Bounds(1, 100, whole=True)),
        defaults.ATTEMPTS,
        f"reflexion attempts ({defaults.ATTEMPTS})",
    ),
    Setting(
        "format_errors",
        _number(Bounds(1, 10_000, whole=True)),
        None,
        "end an episode after N malformed replies in a row (default: no cap, as SUPER)",
        metavar="N",
    ),
    Setting(
        "replay",
        _text,
        None,
        "trajectory file or folder for the replay agent",
        ini=False,
        metavar="PATH",
    ),
    Setting(
        "prompts",
        _prompts,
        "ours",
        "the agents' prompts: ours (default), reference (the paper's agent: the reference's files "
        "at the pinned commit, downloaded once), SUPER's agent/prompt.yaml (`pytest-super "
        "download prompts`), or a folder of prompt template files (docs/agents.md)",
        metavar="PATH",
    ),
    Setting(
        "max_containers",
        _number(Bounds(1, 10_000, whole=True)),
        None,
        "at most this many task containers at once, across all xdist workers",
    ),
    Setting(
        "retries",
        _number(Bounds(0, 100, whole=True)),
        0,
        "run a task again after an infrastructure error, up to N times (0)",
    ),
    Setting(
        "durations",
        _text,
        None,
        "known task durations: JSON of test id to seconds, pytest-split's .test_durations "
        "format (default: the latest earlier run in the report folder, else the shipped table "
        "of SUPER's tasks)",
        metavar="FILE",
    ),
    Setting(
        "order",
        _choice("longest", "collection"),
        None,
        "the order tasks start in: longest (known durations longest first, unknown ones first; "
        "the default under xdist and executors that run tasks elsewhere when any is known) or "
        "collection",
    ),
    Setting(
        "repeat",
        _runs_per_task,
        1,
        "run each task N times, each in a fresh container, as items <id>[repeat1].. (the "
        "summary adds pass@k and pass^k, k = N)",
        metavar="N",
    ),
)
#: the on/off settings: --super-<name> (and --no-super-pool), ini only where `ini`
FLAGS: tuple[tuple[str, bool, bool, str], ...] = (  # name, default, ini, help
    ("keep", False, False, "keep the container of a failing task and print how to get in"),
    ("live", False, False, "print each step as it happens"),
    (
        "resume",
        False,
        False,
        "skip tasks that already have a final result for this agent and model in the report "
        "folder; their results are carried into this run's reports",
    ),
    (
        "pool",
        True,
        True,
        "make each task's kernel while the task before it runs, and remove finished tasks' "
        "containers in the background (default on; see docs/pool.md)",
    ),
)


# -- the executors' own settings ----------------------------------------------------------------
@functools.cache
def executors_settings() -> dict[str, tuple[Setting, ...]]:
    """The settings each known executor declares (its class's `settings`), by executor: read once
    per process, without importing any cluster's client library. A name that is already a
    setting (the table's or another executor's) is refused: one option would mean two things."""
    from pytest_super import executors

    taken = {s.name: "pytest-super" for s in SETTINGS} | {
        name: "pytest-super" for name, *_ in FLAGS
    }
    declared: dict[str, tuple[Setting, ...]] = {}
    for executor, table in executors.declared_settings().items():
        for s in table:
            if not isinstance(s, Setting):
                raise SettingError(
                    f"executor {executor!r}: its `settings` hold {s!r}, not a "
                    "pytest_super.settings.Setting"
                )
            if s.name in taken:
                raise SettingError(
                    f"executor {executor!r} declares the setting {s.name!r}, which is "
                    f"{taken[s.name]}'s already: rename it (e.g. {executor}_{s.name})"
                )
            taken[s.name] = f"executor {executor!r}"
        declared[executor] = tuple(table)
    return declared


def all_settings() -> tuple[Setting, ...]:
    """The table's settings, then every executor's: the `--super-*` options, ini keys and
    `SuperRun.resolve` keywords there are."""
    return SETTINGS + tuple(s for table in executors_settings().values() for s in table)


def setting_named(name: str) -> Setting:
    """The setting `name`, the table's or an executor's; KeyError if there is none."""
    found = {s.name: s for s in all_settings()}
    return found[name]


def cluster_addresses() -> dict[str, Setting]:
    """Each executor's setting that names its cluster (`cluster_address`), by executor."""
    return {
        executor: s
        for executor, table in executors_settings().items()
        for s in table
        if s.cluster_address
    }


# -- the ini file, found as pytest finds it -----------------------------------------------------
#: pytest's config files in the order it tries them in each folder, and the table each is read
#: from (None: the file counts even without one)
_INI_FILES = (
    ("pytest.toml", "pytest"),
    (".pytest.toml", "pytest"),
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", "tool.pytest"),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)


@dataclass(frozen=True)
class IniFile:
    """The ini file a pytest run in a folder reads (`path` None: none found) and its values."""

    path: Path | None
    values: Mapping[str, Any]


def _toml_section(path: Path, table: str) -> dict[str, Any] | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # as pytest reads TOML before Python 3.11
        import tomli as tomllib  # type: ignore[import-not-found]

    try:
        document = tomllib.loads(safe_read.read_text_file(path))
    except safe_read.ForeignDataError as exc:
        raise SettingError(f"{exc}") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise SettingError(f"{path}: not TOML ({exc})") from None
    if table == "pytest":
        return _checked_values(path, "[pytest]", _table(path, document, "pytest") or {})
    tool = _table(path, document, "tool")
    pytest_table = _table(path, tool or {}, "tool.pytest")
    if pytest_table is None:
        return None
    native = {k: v for k, v in pytest_table.items() if k != "ini_options"}
    if native:
        return _checked_values(path, "[tool.pytest]", native)
    options = _table(path, pytest_table, "tool.pytest.ini_options") or {}
    return _checked_values(path, "[tool.pytest.ini_options]", options)


def _table(path: Path, parent: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The TOML table `name` (dotted, its last part a key of `parent`); None if absent."""
    value = parent.get(name.rpartition(".")[2])
    if value is None or isinstance(value, dict):
        return value
    raise SettingError(
        f"{path}: {name} is {type(value).__name__} {value!r:.60}, not a table; write it as "
        f"[{name}] with its keys below it, or remove it"
    )


#: ini keys of ours whose value is a list (pytest's `paths` and `linelist`)
_LIST_KEYS = ("super_tasks", "super_git_mirrors")


def _checked_values(path: Path, table: str, values: dict[str, Any]) -> dict[str, Any]:
    """Our keys' values as the settings read them: text, a number or true/false; a list of text
    for the list keys. Anything else is a SettingError naming the file and key."""
    for key, value in values.items():
        if not key.startswith("super_"):
            continue
        if key in _LIST_KEYS:
            ok = isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
            )
        else:
            ok = isinstance(value, str | int | float | bool)
        if not ok:
            wanted = "a text or a list of texts" if key in _LIST_KEYS else 'a text such as "2g"'
            raise SettingError(
                f"{path}: {table} {key} = {value!r:.60} is a {type(value).__name__}, not "
                f'{wanted}; write it as {key} = "..."'
            )
    return values


def _ini_section(path: Path, section: str | None) -> dict[str, Any] | None:
    import iniconfig

    try:
        parsed = iniconfig.IniConfig(str(path), data=safe_read.read_text_file(path))
    except safe_read.ForeignDataError as exc:
        raise SettingError(f"{exc}") from None
    except iniconfig.ParseError as exc:
        raise SettingError(str(exc)) from None
    name = section or "pytest"
    if name in parsed:
        return dict(parsed[name].items())
    return {} if section is None else None


def find_ini(rootdir: Path) -> IniFile:
    """The config file pytest started in `rootdir` reads: the first of `_INI_FILES` with pytest's
    table in `rootdir` or its nearest ancestor (pytest.ini always counts)."""
    for base in (rootdir, *rootdir.parents):
        for name, table in _INI_FILES:
            path = base / name
            if not path.is_file():
                continue
            if name.endswith(".toml"):
                values = _toml_section(path, table or "pytest")
            else:
                values = _ini_section(path, table)
            if values is not None:
                return IniFile(path, values)
    return IniFile(None, {})


def rootdir_without_ini(start: Path) -> Path:
    """The rootdir pytest started in `start` without arguments takes when it finds no config file
    (`_pytest.config.findpaths.determine_setup`, pytest 9): the folder of the nearest
    pyproject.toml, even one without a [tool.pytest] table, else of the nearest setup.py, else
    `start` itself."""
    for name in ("pyproject.toml", "setup.py"):
        for base in (start, *start.parents):
            if (base / name).is_file():
                return base
    return start


def ini_lines(value: Any) -> list[str]:
    """An ini `linelist` as pytest reads it: one entry per non-empty line, or a TOML list."""
    if isinstance(value, str):
        return [line.strip() for line in value.split("\n") if line.strip()]
    return [str(v) for v in value]


def ini_paths(value: Any, base: Path) -> list[Path]:
    """An ini `paths` value as pytest reads it: shell words, relative to the ini file's folder."""
    words = shlex.split(value) if isinstance(value, str) else [str(v) for v in value]
    return [base / w for w in words]


# -- resolution: one code path for pytest and scripts -------------------------------------------
@dataclass(frozen=True)
class Inputs:
    """What a run's settings are resolved from. `given(name)` is the value given for a setting
    (a pytest option, a keyword of `SuperRun.resolve`; None: not given) and `given_source(name)`
    says so ("--super-mem"); `ini(key)` the ini file's value (None: absent), `ini_label` names it;
    relative paths are taken from `rootpath` (report folder, mirrors) and `invocation_dir`
    (--super-durations)."""

    given: Callable[[str], Any]
    given_source: Callable[[str], str]
    ini: Callable[[str], Any]
    ini_label: str
    rootpath: Path
    invocation_dir: Path
    task_roots: tuple[Path, ...]
    worker: str = "main"
    capture_no: bool = False
    warn: Callable[[str], None] = lambda message: warnings.warn(message, stacklevel=3)


def _shown(raw: str) -> str:
    return raw if raw.strip().lstrip("-").replace(".", "", 1).isdigit() else repr(raw)


def resolve_one(
    inputs: Inputs,
    name: str,
    read: Callable[[str], Any],
    default: Any,
    *,
    ini: bool,
    env: tuple[str, ...] = (),
) -> tuple[Any, str]:
    """(value, where it came from): given, else the environment, else the ini, else the default.
    A value that does not read is a `SettingError` naming its source."""
    candidates: list[tuple[Any, str]] = [(inputs.given(name), inputs.given_source(name))]
    candidates += [(os.environ.get(var) or None, f"environment variable {var}") for var in env]
    if ini:
        candidates.append(
            (inputs.ini("super_" + name) or None, f"ini super_{name}{inputs.ini_label}")
        )
    for raw, source in candidates:
        if raw is None:
            continue
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            raw = str(raw)  # a number given in Python reads as its text would
        if not isinstance(raw, str):  # an on/off option, or a value given in Python already read
            return raw, source
        try:
            return read(raw), source
        except ValueError as exc:
            raise SettingError(f"{source} {_shown(raw)}: {exc}") from None
    return (read(default) if isinstance(default, str) else default), "default"


def resolve_values(inputs: Inputs) -> tuple[dict[str, Any], dict[str, str]]:
    """Every setting of the table and the flags, with its source."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for s in all_settings():
        values[s.name], sources[s.name] = resolve_one(
            inputs, s.name, s.read, s.default, ini=s.ini, env=s.env
        )
    for name, default, ini, _help in FLAGS:
        values[name], sources[name] = resolve_one(inputs, name, _boolean, default, ini=ini)
    values["agent"] = inputs.given("agent")
    sources["agent"] = inputs.given_source("agent") if values["agent"] else "default"
    return values, sources


def _sets(given: Any) -> tuple[str, ...] | None:
    if not given:
        return None
    texts = [given] if isinstance(given, str) else list(given)
    names = [n.strip() for text in texts for n in text.split(",") if n.strip()]
    for n in names:
        if n not in SETS:
            raise SettingError(f"--super-set: unknown set {n!r}; use one of {', '.join(SETS)}")
    return tuple(names)


def _git_mirrors(inputs: Inputs, sources: dict[str, str]) -> dict[str, str]:
    """PREFIX=DIR mirrors of the ini's super_git_mirrors, then those given; DIR relative to the
    root folder."""
    in_ini = ini_lines(inputs.ini("super_git_mirrors") or [])
    given = inputs.given("git_mirror") or []
    given = [given] if isinstance(given, str) else list(given)
    mirrors: dict[str, str] = {}
    for spec, source in [(s, "ini super_git_mirrors" + inputs.ini_label) for s in in_ini] + [
        (s, inputs.given_source("git_mirror")) for s in given
    ]:
        prefix, sep, directory = spec.rpartition("=")
        if not sep or not prefix:
            raise SettingError(f"--super-git-mirror {spec!r}: expected PREFIX=DIR")
        path = Path(directory)
        mirrors[prefix] = str(path if path.is_absolute() else (inputs.rootpath / path).resolve())
        sources["git_mirror " + prefix] = source
    return mirrors


def resolve_run(inputs: Inputs, run_id: str) -> SuperRun:
    """The run's settings resolved from `inputs`: what a pytest run builds in `pytest_configure`
    (options.py) and `SuperRun.resolve` builds for a script. Raises `SettingError`."""
    values, sources = resolve_values(inputs)
    _executor_alias(values, sources)
    report_dir = Path(values["report_dir"])
    if not report_dir.is_absolute():
        report_dir = inputs.rootpath / report_dir
    agent = values["agent"]
    if agent:
        _check_agent(agent)
    kernel = _kernel_settings(values, inputs, sources, run_id)
    return SuperRun(
        run_id=run_id,
        report_dir=report_dir,
        agent=agent,
        kernel=kernel,
        settings=_run_settings(values),
        registry=values["registry"],
        llm_settings=_llm_settings(agent, values, report_dir / run_id),
        judge_settings=_judge_settings(values) if agent else None,
        live=values["live"] or inputs.capture_no,
        retries=values["retries"],
        backend=values["backend"],
        executor=values["executor"],
        executor_settings={
            s.name: values[s.name] for table in executors_settings().values() for s in table
        },
        progress=values["progress"],
        max_containers=values["max_containers"],
        pool=values["pool"],
        sets=_sets(inputs.given("set")),
        repeat=values["repeat"],
        resume=values["resume"],
        durations_file=Path(inputs.invocation_dir, values["durations"])
        if values["durations"]
        else None,
        order=values["order"],
        task_roots=inputs.task_roots,
        sources=sources,
    )


def _executor_alias(values: dict[str, Any], sources: dict[str, str]) -> None:
    """`--super-backend=<alias>` (deprecated): the executor it names, tasks with the kernel backend
    the alias stands for there; warned once per process."""
    from pytest_super import executors

    alias = executors.BACKEND_ALIASES.get(values["backend"])
    if alias is None:
        return
    message = executors.deprecated_backend_message(values["backend"])
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, FutureWarning, stacklevel=2)
    values["executor"], values["backend"] = alias
    sources["executor"] = sources.get("backend", "default")


#: deprecation messages this process has shown
_WARNED: set[str] = set()


def _kernel_settings(
    values: dict[str, Any], inputs: Inputs, sources: dict[str, str], run_id: str
) -> KernelSettings:
    return KernelSettings(
        backend=values["backend"],
        image=values["image"],
        docker_host=values["docker_host"],
        mem=values["mem"],
        cpus=values["cpus"],
        network=values["network"],
        git_mirrors=_git_mirrors(inputs, sources),
        pip_cache=_pip_cache(
            inputs, values["pip_cache"], values["agent"], sources.get("pip_cache", "")
        ),
        disk_bytes=values["disk"],
        run_id=run_id,
        worker=inputs.worker,
    )


def _run_settings(values: dict[str, Any]) -> RunSettings:
    return RunSettings(
        agent=values["agent"] or "",
        model=values["model"],
        tolerance=values["tolerance"],
        pass_metric=values["pass_metric"],
        pass_threshold=values["pass_threshold"],
        token_budget=values["token_budget"],
        compute_limit_s=values["compute_limit"],
        cell_timeout_s=values["cell_timeout"],
        steps=values["steps"],
        format_errors=values["format_errors"],
        keep_failed=values["keep"],
        network_faults=values["network_faults"],
        options=AgentOptions(
            attempts=values["attempts"], replay_path=values["replay"], prompts=values["prompts"]
        ),
    )


def _pip_cache(
    inputs: Inputs, volume: str | None, agent: str | None, source: str = ""
) -> str | None:
    """The pip cache volume, shared only by trusted runs: one task must not poison another.
    Not mounting it is said when the run asked for it (the command line, the environment), not
    when it is the ini file's setting for every run of the project (issue 44: every non-gold
    run of this repository warned about its own pyproject.toml)."""
    if volume and agent and agent not in TRUSTED_AGENTS:
        if inputs.worker == "main" and not source.startswith("ini "):
            inputs.warn(
                f"pip cache volume {volume!r} not mounted: with --super-agent={agent} task "
                "code is untrusted and could poison what later tasks install; only the gold "
                "agent shares the cache (docs/security.md)"
            )
        return None
    return volume


def _check_agent(spec: str, source: str = "--super-agent") -> None:
    """Reject an agent name at start-up, not in every task (SUPER's harness accepted names it
    then rejected)."""
    from pytest_super.agents import load_agent

    try:
        load_agent(spec)
    except ValueError as exc:
        raise SettingError(f"{source}: {exc}") from None


#: the fields of `SuperRun` that are settings of the table: a `SuperRun` built directly has them
#: read as the option's text would be (`_check_fields`)
_CHECKED_FIELDS = (
    "retries",
    "repeat",
    "max_containers",
    "progress",
    "order",
    "backend",
    "executor",
)


def _check_fields(run: SuperRun) -> None:
    """The option path's `SettingError` for a field of a directly built `SuperRun` that the
    option would refuse, its source `SuperRun(<name>=...)` in the place of `--super-<name>`:
    `SuperRun(retries=-5)` is "SuperRun(retries=...) -5: expected a whole number from 0 to
    100", as `--super-retries=-5` is "--super-retries -5: ...". A value of another type than
    the setting holds (`retries="3"`) is refused too."""
    for name in _CHECKED_FIELDS:
        value, s = getattr(run, name), _BY_NAME[name]
        if value is None and s.default is None:
            continue
        source = f"SuperRun({name}=...)"
        raw = value if isinstance(value, str) else str(value)
        try:
            read = s.read(raw)
        except ValueError as exc:
            raise SettingError(f"{source} {_shown(raw)}: {exc}") from None
        if read != value or type(read) is not type(value):
            raise SettingError(
                f"{source} {value!r}: a {type(value).__name__}, where the setting holds a "
                f"{type(read).__name__} ({read!r})"
            )
    if run.agent:
        _check_agent(run.agent, "SuperRun(agent=...)")


def _llm_settings(agent: str | None, values: dict[str, Any], run_dir: Path) -> LLMSettings | None:
    from pytest_super.agents import needs_llm

    if not agent or not needs_llm(agent):
        return None
    model = values["model"]
    if not model:
        raise SettingError(f"--super-agent={agent} talks to a model: name it with --super-model")
    price_in, price_out, price_cached = values["price"] or (None, None, None)
    base_url = values["base_url"]
    api_key = _endpoint_key(base_url, f"--super-agent={agent}")
    return LLMSettings(
        model=model,
        base_url=base_url,
        api_key=api_key,
        price_in=price_in,
        price_out=price_out,
        price_cached=price_cached,
        cache_dir=values["llm_cache"],
        breaker_threshold=values["llm_breaker"],
        breaker_check_s=values["llm_breaker_check"],
        down_flag=str(run_dir / ENDPOINT_DOWN_FILE),
    )


def _judge_settings(values: dict[str, Any]) -> LLMSettings | None:
    """The LMR judge's endpoint (`--super-judge-model`): the run's base URL and key, upstream's
    sampling (temperature 0; top_p and the token cap the API's defaults), no circuit breaker
    (a judge's failure is the task's judge error, never the run's)."""
    from pytest_super.lmr.judge import JUDGE_TEMPERATURE

    model = values["judge_model"]
    if not model:
        return None
    base_url = values["base_url"]
    return LLMSettings(
        model=model,
        base_url=base_url,
        api_key=_endpoint_key(base_url, f"--super-judge-model={model}"),
        temperature=JUDGE_TEMPERATURE,
        top_p=1.0,
        max_tokens=4096,
        cache_dir=values["llm_cache"],
        breaker_threshold=0,
    )


def _endpoint_key(base_url: str, who: str) -> str | None:
    """The API key for `who` (an option that asks the endpoint), refused when none is set and
    the endpoint is the default one."""
    api_key = _api_key()
    if api_key is None and base_url.rstrip("/") == DEFAULT_BASE_URL:
        raise SettingError(
            f"{who} asks {DEFAULT_BASE_URL} but no API key is set: export "
            "SUPER_API_KEY (or OPENAI_API_KEY), or point --super-base-url at your own endpoint"
        )
    return api_key


def _api_key() -> str | None:
    """The API key (`llm.api_key_from_env`), refused when it holds what an HTTP header cannot
    carry (a non-ASCII letter, a newline or another control character): an error naming the
    variable, never showing the key."""
    from pytest_super.llm import api_key_from_env

    variable = next((v for v in API_KEY_VARIABLES if os.environ.get(v)), None)
    key = os.environ[variable] if variable else ""
    if not (key.isascii() and key.isprintable()):
        raise SettingError(
            f"environment variable {variable} holds a character that is not printable ASCII (a "
            "non-ASCII letter, a newline or another control character), so no request could "
            "carry it: set the key again without it (the value is not shown here)"
        )
    return api_key_from_env()


#: the keywords of `SuperRun.resolve` beyond the table's settings and flags
_OTHER_KEYWORDS = ("agent", "set", "git_mirror")


def _script_inputs(rootdir: Path, overrides: dict[str, Any]) -> Inputs:
    known = {s.name for s in all_settings()} | {f[0] for f in FLAGS} | set(_OTHER_KEYWORDS)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(
            f"SuperRun.resolve() got unknown settings {', '.join(unknown)}; known: "
            + ", ".join(sorted(known))
        )
    ini = find_ini(rootdir)
    base = ini.path.parent if ini.path else rootdir_without_ini(rootdir)
    roots = (
        ini_paths(ini.values["super_tasks"], base)
        if "super_tasks" in ini.values
        else [Path("tasks")]
    )
    return Inputs(
        given=lambda name: overrides.get(name),
        given_source=lambda name: f"SuperRun.resolve({name}=...)",
        ini=lambda key: ini.values.get(key),
        ini_label=f" ({ini.path.name})" if ini.path else "",
        rootpath=base,
        invocation_dir=Path.cwd(),
        task_roots=tuple(Path(base, p).resolve() for p in roots),
    )


def _default_kernel() -> KernelSettings:
    """The kernel settings of a pytest run given no option, ini or environment variable."""
    by_name = {s.name: s for s in SETTINGS}

    def default(name: str) -> Any:
        s = by_name[name]
        return s.read(s.default) if isinstance(s.default, str) else s.default

    return KernelSettings(
        mem=default("mem"),
        cpus=default("cpus"),
        network=default("network"),
        disk_bytes=default("disk"),
    )


def default_of(name: str) -> Any:
    """A setting's default as a pytest run holds it (read as its text would be)."""
    s = _BY_NAME[name]
    return s.read(s.default) if isinstance(s.default, str) else s.default


_BY_NAME = {s.name: s for s in SETTINGS}
_FLAG_DEFAULTS = {name: default for name, default, _ini, _help in FLAGS}


def _default_executor_settings() -> dict[str, Any]:
    """Every executor's settings as a pytest run given none holds them."""
    return {
        s.name: s.read(s.default) if isinstance(s.default, str) else s.default
        for table in executors_settings().values()
        for s in table
    }


def _default_run_settings() -> RunSettings:
    values = {s.name: default_of(s.name) for s in SETTINGS if s.name not in ("backend",)}
    values.update({name: default for name, default, _ini, _help in FLAGS})
    values["agent"] = None
    return _run_settings(values)


@dataclass(frozen=True)
class SuperRun:
    """The run-wide settings: the run id, the report folder, the kernel, agent and model settings,
    and how tasks are scheduled (retries, the pool, where tasks run). Every default is the
    default of the matching `--super-*` setting in `SETTINGS`."""

    agent: str | None = None
    run_id: str = field(default_factory=new_run_id)
    report_dir: Path = Path(default_of("report_dir"))
    kernel: KernelSettings = field(default_factory=_default_kernel)
    settings: RunSettings = field(default_factory=_default_run_settings)
    llm_settings: LLMSettings | None = None
    #: --super-judge-model: the LMR judge's endpoint (lmr/judge.py); None: no judge
    judge_settings: LLMSettings | None = None
    live: bool = _FLAG_DEFAULTS["live"]
    #: --super-retries: attempts after a retryable infrastructure error
    retries: int = default_of("retries")
    #: --super-backend: the kernel backend's name (a deprecated executor alias already resolved)
    backend: str = _BY_NAME["backend"].default
    #: --super-executor: where each task runs (executors/): `local` or one that runs them elsewhere
    executor: str = _BY_NAME["executor"].default
    #: the settings the executors declare (`--super-<name>`), by name: the executor's own code
    #: reads them (e.g. executors/ray/settings.py)
    executor_settings: Mapping[str, Any] = field(default_factory=_default_executor_settings)
    #: --super-progress: the status line with an ETA (progress.py): auto, on or off
    progress: str = default_of("progress")
    #: --super-registry HOST:PORT: an engine without the kernel image pulls it from there first
    registry: str | None = None
    #: scheduling on this machine: --super-max-containers, --super-pool
    max_containers: int | None = default_of("max_containers")
    pool: bool = _FLAG_DEFAULTS["pool"]
    #: selection: --super-set (None: every set), --super-repeat, --super-resume
    sets: tuple[str, ...] | None = None
    repeat: int = default_of("repeat")
    resume: bool = _FLAG_DEFAULTS["resume"]
    #: --super-durations FILE (None: the earlier run, else the shipped table) and --super-order
    #: (None: longest when any duration is known and tasks go to several slots; ordering.py)
    durations_file: Path | None = None
    order: str | None = default_of("order")
    #: the folders of task files (ini super_tasks), resolved
    task_roots: tuple[Path, ...] = ()
    #: where each setting's value came from ("--super-mem", "environment variable X", "ini
    #: super_mem (pytest.ini)", "default"), for the report header and error messages
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    #: --super-prompts: the agents' prompts (None: those of `settings.options`, ours by default);
    #: given here, they are the agents' (`settings.options.prompts`)
    prompts: PromptSet | None = None

    def __post_init__(self) -> None:
        _check_fields(self)  # built directly, it is refused what the options refuse
        if self.prompts is None:
            object.__setattr__(self, "prompts", self.settings.options.prompts)
        elif self.settings.options.prompts != self.prompts:
            options = dataclasses.replace(self.settings.options, prompts=self.prompts)
            settings = dataclasses.replace(self.settings, options=options)
            object.__setattr__(self, "settings", settings)
        if self.kernel.run_id == KernelSettings.run_id:  # made in Python: label with this run
            object.__setattr__(self, "kernel", dataclasses.replace(self.kernel, run_id=self.run_id))

    @classmethod
    def resolve(
        cls, rootdir: Path | str | None = None, *, run_id: str | None = None, **overrides: Any
    ) -> SuperRun:
        """The settings a pytest run in `rootdir` (default: the working folder) would hold, with
        `overrides` in the place of options: `SuperRun.resolve(agent="gold", mem="3g")`. Each
        keyword is a setting's name (`mem`, `cell_timeout`, `git_mirror`, `set`, `keep`, ...),
        given as text (read as the option's text is) or as a value. Raises `SettingError` naming
        the source of a bad value, `TypeError` for an unknown keyword."""
        root = Path(rootdir if rootdir is not None else Path.cwd()).resolve()
        return resolve_run(_script_inputs(root, overrides), run_id or new_run_id())

    @property
    def run_dir(self) -> Path:
        return self.report_dir / self.run_id

    @property
    def remote(self) -> bool:
        """Whether tasks run elsewhere (another executor than `local`) rather than in this process
        or its xdist workers."""
        return self.executor != "local"


# -- the command line's shared options -------------------------------------------------------------
def add_shared_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """`--<name>` of a `pytest-super` subcommand, declared from the setting `name` of the table
    (its help and metavar: `--docker-host` says what `--super-docker-host` says), the table's
    or an executor's."""
    s = setting_named(name)
    parser.add_argument("--" + name.replace("_", "-"), default=None, metavar=s.metavar, help=s.help)


def resolve_setting(name: str, given: str | None) -> Any:
    """A subcommand's shared option as a pytest run resolves its setting: the option, else the
    setting's environment variables, else its default (no ini file: the commands take none)."""
    return resolve_setting_source(name, given)[0]


def resolve_setting_source(name: str, given: str | None) -> tuple[Any, str]:
    """`resolve_setting`'s value and where it came from (`--ray-address`, `environment variable
    RAY_ADDRESS`, `default`)."""
    flag = "--" + name.replace("_", "-")
    s = setting_named(name)
    inputs = Inputs(
        given=lambda _name: given,
        given_source=lambda _name: flag,
        ini=lambda _key: None,
        ini_label="",
        rootpath=Path.cwd(),
        invocation_dir=Path.cwd(),
        task_roots=(),
    )
    return resolve_one(inputs, name, s.read, s.default, ini=False, env=s.env)
