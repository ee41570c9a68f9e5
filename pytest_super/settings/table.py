"""The table of the run's settings: `Setting` (one option, its ini key, environment variables,
default and reader) and `SETTINGS`, every setting of pytest-super itself, the on/off ones among
them (`Setting.boolean`). The settings a provider (an executor, a kernel backend) declares for
itself are found by providers.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypedDict

from pytest_super import defaults
from pytest_super.executors import EXECUTORS as _EXECUTOR_NAMES
from pytest_super.netfaults import NETWORK_FAULT_CHOICES
from pytest_super.prompts import PromptSet
from pytest_super.runner import PASS_METRICS
from pytest_super.scoring import DEFAULT_TOLERANCE
from pytest_super.settings.readers import (
    CPU_BOUNDS,
    THRESHOLD_BOUNDS,
    TOLERANCE_BOUNDS,
    choice,
    memory_size,
    number_reader,
    read_backend,
    read_boolean,
    read_disk_size,
    read_executor,
    read_prices,
    read_prompts,
    read_runs_per_task,
    read_text,
)
from pytest_super.tasks.model import LIMIT_RANGES, Bounds

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_DISK = defaults.DISK


@dataclass(frozen=True)
class Setting:
    """One setting: `--super-<name>`, ini `super_<name>` (when `ini`), environment variables."""

    name: str  # "mem": --super-mem, ini super_mem, SuperRun/KernelSettings field by `resolve`
    read: Callable[[str], object]
    default: object
    help: str
    ini: bool = True
    env: tuple[str, ...] = ()
    metavar: str | None = None
    #: an executor's setting naming its cluster: also `--<name>` of `pytest-super image build`
    #: and `cleanup`, which act on that cluster's nodes when it is given (or in `env`)
    cluster_address: bool = False
    #: an on/off setting: `--super-<name>` takes no value (`--no-super-<name>` too when it has an
    #: ini key); its ini key and environment variables are read by `read_boolean`
    boolean: bool = False
    #: a kernel backend's setting naming its engine (`kernels.base.BackendSetting.engine_address`)
    engine_address: bool = False
    #: a kernel backend's setting dropped for an untrusted agent, with this message
    #: (`kernels.base.BackendSetting.untrusted`)
    untrusted: str = ""

    @property
    def flag(self) -> str:
        return "--super-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "super_" + self.name


def on_off(name: str, default: bool, help: str, *, ini: bool = False) -> Setting:
    """An on/off setting (`Setting.boolean`)."""
    return Setting(name, read_boolean, default, help, ini=ini, boolean=True)


SETTINGS: tuple[Setting, ...] = (
    Setting("model", read_text, None, "model name for LLM agents"),
    Setting(
        "judge_model",
        read_text,
        None,
        "LMR tasks: also ask this model (same endpoint) to grade the agent's function against "
        "the golden one with LMR-Bench's judge rubric (default: no judge)",
    ),
    Setting(
        "base_url",
        read_text,
        DEFAULT_BASE_URL,
        "OpenAI-compatible endpoint (also SUPER_BASE_URL, OPENAI_BASE_URL); key from "
        "SUPER_API_KEY or OPENAI_API_KEY",
        env=("SUPER_BASE_URL", "OPENAI_BASE_URL"),
    ),
    Setting(
        "backend",
        read_backend,
        "docker",
        "what holds each task's kernel: docker (default), local (isolates nothing), an entry "
        "point name or package.module:Class",
    ),
    Setting(
        "executor",
        read_executor,
        "local",
        "where each task runs: local (this process or an xdist worker; default), "
        + ", ".join(n for n in _EXECUTOR_NAMES if n != "local")
        + " (each task whole on a cluster's node), an entry point name or package.module:Class",
    ),
    Setting(
        "progress",
        choice("auto", "on", "off"),
        "auto",
        "a status line of tasks running, queued and done with an ETA, redrawn on a terminal, "
        "once a minute in a log: auto (runs whose tasks go to several slots: xdist, an executor "
        "that runs them elsewhere; default), on, off",
    ),
    Setting(
        "image", read_text, None, "kernel image (default: what `pytest-super image build` makes)"
    ),
    Setting("mem", memory_size, defaults.MEM, f"container memory limit (default {defaults.MEM})"),
    Setting(
        "cpus",
        number_reader(CPU_BOUNDS),
        defaults.CPUS,
        f"container CPUs (default {defaults.CPUS:g})",
    ),
    Setting(
        "network",
        choice("bridge", "none"),
        defaults.NETWORK,
        f"container network (default {defaults.NETWORK})",
    ),
    Setting(
        "disk",
        read_disk_size,
        DEFAULT_DISK,
        f"what one task may write, e.g. 20g, 500m, or none (default {DEFAULT_DISK}); a task "
        "over it ends with exit status disk_limit",
        metavar="SIZE",
    ),
    Setting(
        "cell_timeout",
        number_reader(LIMIT_RANGES["cell_timeout_s"]),
        defaults.CELL_TIMEOUT_S,
        f"seconds per cell ({defaults.CELL_TIMEOUT_S:g})",
    ),
    Setting(
        "compute_limit",
        number_reader(LIMIT_RANGES["compute_s"]),
        defaults.COMPUTE_LIMIT_S,
        f"seconds of summed cell time per task, prefix cells included ({defaults.COMPUTE_LIMIT_S:g})",
    ),
    Setting(
        "tolerance",
        number_reader(TOLERANCE_BOUNDS),
        DEFAULT_TOLERANCE,
        f"numeric tolerance ({DEFAULT_TOLERANCE:g})",
    ),
    Setting(
        "pass_metric",
        choice(*PASS_METRICS),
        None,
        "metric deciding pass (default accuracy; script-executed for auto)",
    ),
    Setting("pass_threshold", number_reader(THRESHOLD_BOUNDS), 1.0, "pass if metric >= this (1)"),
    Setting("report_dir", read_text, "reports", "where runs write reports (default reports)"),
    Setting(
        "price",
        read_prices,
        None,
        "USD per million prompt, completion (and cached prompt) tokens",
        metavar="IN,OUT[,CACHED]",
    ),
    Setting("llm_cache", read_text, None, "cache model responses on disk", metavar="DIR"),
    Setting(
        "network_faults",
        choice(*NETWORK_FAULT_CHOICES),
        NETWORK_FAULT_CHOICES[0],
        "an LLM agent's episode that failed where the network or an outside service failed "
        "inside the task: score (as SUPER's paper did, docs/results.md; default) or error (a "
        "pytest error, run again by --super-retries); under the gold agent any miss is an error",
    ),
    Setting(
        "llm_breaker",
        number_reader(Bounds(0, 1000, whole=True)),
        5,
        "the circuit breaker: after N model calls in a row get no answer or a 5xx, across the "
        "run's tasks, the endpoint is checked once; if it is down no new task starts and the "
        "run ends with the --super-resume command (5; 0: never)",
        metavar="N",
    ),
    Setting(
        "llm_breaker_check",
        number_reader(Bounds(1, 600)),
        10.0,
        "seconds the circuit breaker's check of the endpoint waits for an answer (10)",
        metavar="SECONDS",
    ),
    Setting(
        "token_budget",
        number_reader(LIMIT_RANGES["token_budget"]),
        None,
        "prompt-token budget per task (default 600k expert/auto, 400k masked)",
    ),
    Setting(
        "steps",
        number_reader(LIMIT_RANGES["steps"]),
        defaults.STEPS,
        f"step limit per episode ({defaults.STEPS})",
    ),
    Setting(
        "attempts",
        number_reader(Bounds(1, 100, whole=True)),
        defaults.ATTEMPTS,
        f"reflexion attempts ({defaults.ATTEMPTS})",
    ),
    Setting(
        "format_errors",
        number_reader(Bounds(1, 10_000, whole=True)),
        None,
        "end an episode after N malformed replies in a row (default: no cap, as SUPER)",
        metavar="N",
    ),
    Setting(
        "replay",
        read_text,
        None,
        "trajectory file or folder for the replay agent",
        ini=False,
        metavar="PATH",
    ),
    Setting(
        "prompts",
        read_prompts,
        "ours",
        "the agents' prompts: ours (default), reference (the paper's agent: the reference's files "
        "at the pinned commit, downloaded once), SUPER's agent/prompt.yaml (`pytest-super "
        "download prompts`), or a folder of prompt template files (docs/agents.md)",
        metavar="PATH",
    ),
    Setting(
        "max_containers",
        number_reader(Bounds(1, 10_000, whole=True)),
        None,
        "at most this many task containers at once, across all xdist workers",
    ),
    Setting(
        "retries",
        number_reader(Bounds(0, 100, whole=True)),
        0,
        "run a task again after an infrastructure error, up to N times (0)",
    ),
    Setting(
        "durations",
        read_text,
        None,
        "known task durations: JSON of test id to seconds, pytest-split's .test_durations "
        "format (default: the latest earlier run in the report folder, else the shipped table "
        "of SUPER's tasks)",
        metavar="FILE",
    ),
    Setting(
        "order",
        choice("longest", "collection"),
        None,
        "the order tasks start in: longest (known durations longest first, unknown ones first; "
        "the default under xdist and executors that run tasks elsewhere when any is known) or "
        "collection",
    ),
    Setting(
        "repeat",
        read_runs_per_task,
        1,
        "run each task N times, each in a fresh container, as items <id>[repeat1].. (the "
        "summary adds pass@k and pass^k, k = N)",
        metavar="N",
    ),
    # the on/off settings: --super-<name> (and --no-super-pool), ini only where `ini`
    on_off("keep", False, "keep the container of a failing task and print how to get in"),
    on_off("live", False, "print each step as it happens"),
    on_off(
        "resume",
        False,
        "skip tasks that already have a final result for this agent and model in the report "
        "folder; their results are carried into this run's reports",
    ),
    on_off(
        "pool",
        True,
        "make each task's kernel while the task before it runs, and remove finished tasks' "
        "containers in the background (default on; see docs/pool.md)",
        ini=True,
    ),
)


class SettingValues(TypedDict):
    """The resolved value of each setting of the table (as its reader makes it, or as given in
    Python), and the agent's name (`settings.resolve.resolve_values`); the providers' settings
    are there too, by their names, read by the provider's own code (`Mapping[str, object]`)."""

    model: str | None
    judge_model: str | None
    base_url: str
    backend: str
    executor: str
    progress: str
    image: str | None
    mem: str
    cpus: float
    network: Literal["bridge", "none"]
    disk: int | None
    cell_timeout: float
    compute_limit: float
    tolerance: float
    pass_metric: str | None
    pass_threshold: float
    report_dir: str
    price: tuple[float, float, float | None] | None
    llm_cache: str | None
    network_faults: str
    llm_breaker: int
    llm_breaker_check: float
    token_budget: int | None
    steps: int
    attempts: int
    format_errors: int | None
    replay: str | None
    prompts: PromptSet
    max_containers: int | None
    retries: int
    durations: str | None
    order: str | None
    repeat: int
    keep: bool
    live: bool
    resume: bool
    pool: bool
    agent: str | None
    #: the Docker backend's (kernels/docker/settings.py), read by `resolve_run` for `SuperRun`
    registry: str | None


#: the table's settings by name
BY_NAME = {s.name: s for s in SETTINGS}


def default_of(name: str) -> object:
    """A setting's default as a pytest run holds it (read as its text would be)."""
    s = BY_NAME[name]
    return s.read(s.default) if isinstance(s.default, str) else s.default
