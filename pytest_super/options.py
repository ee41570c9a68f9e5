"""The plugin's settings, read once: every `--super-*` option, its ini key and its environment
variable, resolved into one `SuperRun` (settings.py) at start-up.

Each setting is declared once in `SETTINGS`: its option, its ini key (`super_<name>`), the
environment variables that hold it where one is customary, its default and how its text is read.
A value comes from the option, else the environment, else the ini file, else the default; a bad
one is a usage error naming where it came from. Nothing else in the package reads pytest's options.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_super import timeouts
from pytest_super.environment import AgentOptions
from pytest_super.kernels.base import KernelSettings
from pytest_super.llm import LLMSettings
from pytest_super.prompts import PromptSet, load_prompts
from pytest_super.runner import PASS_METRICS, RunSettings
from pytest_super.settings import SuperRun, new_run_id
from pytest_super.tasks import SETS
from pytest_super.tasks.model import LIMIT_RANGES, Bounds

__all__ = ["RUN_KEY", "SETTINGS", "SuperRun", "add_options", "make_run", "new_run_id", "run_of"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Default --super-disk: SUPER's heaviest setups (torch with CUDA wheels, datasets, checkpoints)
#: write a few GiB; 20 GiB leaves room and still stops a runaway writer long before a disk fills.
DEFAULT_DISK = "20g"
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
#: agents whose code is the task's own (reviewed) solution: they may share the pip cache
TRUSTED_AGENTS = frozenset({"gold"})
#: where the run's settings are kept for every hook and fixture
RUN_KEY = pytest.StashKey[SuperRun]()


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


def _number(bounds: Bounds) -> Callable[[str], Any]:
    """A reader of a number in `bounds`: an int when they are whole, else a finite float."""

    def read(value: str) -> Any:
        try:
            number: float = int(value) if bounds.whole else float(value)
        except ValueError:
            number = math.nan
        if not bounds.accepts(number):
            raise ValueError(f"expected {bounds.text}")
        return number

    return read


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
    """A kernel backend's name (built-in, entry point or module:Class), or `ray`. A built-in name
    is known without importing its backend (every pytest start reads this setting)."""
    from pytest_super import kernels

    if value == "ray" or value in kernels.BACKENDS:
        return value
    kernels.kernel_backend_class(value)  # ValueError naming the known backends
    return value


def _text(value: str) -> str:
    return value


def _registry(value: str) -> str:
    from pytest_super.kernels.docker.registry import registry_address

    return registry_address(value)


def _prompts(value: str) -> PromptSet:
    """`ours`, a folder of prompt templates, or SUPER's prompt.yaml (PromptFileError, a
    ValueError, names the file and field)."""
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

    @property
    def flag(self) -> str:
        return "--super-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "super_" + self.name


SETTINGS: tuple[Setting, ...] = (
    Setting("model", _text, None, "model name for LLM agents"),
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
        "where kernels run: docker (default), local (isolates nothing), ray (each task whole on "
        "a Ray cluster's node), an entry point name or package.module:Class",
    ),
    Setting(
        "ray_address",
        _text,
        "auto",
        "the Ray cluster for --super-backend=ray (also RAY_ADDRESS; default auto)",
        env=("RAY_ADDRESS",),
        metavar="ADDRESS",
    ),
    Setting(
        "ray_concurrency",
        _number(Bounds(1, 100_000, whole=True)),
        None,
        "tasks in flight on the Ray cluster at once (default: what the cluster can place)",
        metavar="K",
    ),
    Setting(
        "progress",
        _choice("auto", "on", "off"),
        "auto",
        "a status line of tasks running, queued and done with an ETA, redrawn on a terminal, "
        "once a minute in a log: auto (Ray and xdist runs; default), on, off",
    ),
    Setting("image", _text, None, "kernel image (default: what `pytest-super image build` makes)"),
    Setting(
        "registry",
        _registry,
        None,
        "a Docker registry the kernel image was pushed to (`pytest-super image push`): an "
        "engine without the image pulls it from there before building it",
        metavar="HOST:PORT",
    ),
    Setting("docker_host", _text, None, "Docker engine address (default DOCKER_HOST)"),
    Setting("mem", memory_size, "4g", "container memory limit (default 4g)"),
    Setting("cpus", _number(CPU_BOUNDS), 2.0, "container CPUs (default 2)"),
    Setting("network", _choice("bridge", "none"), "bridge", "container network (default bridge)"),
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
        300.0,
        "seconds per cell (300)",
    ),
    Setting(
        "compute_limit",
        _number(LIMIT_RANGES["compute_s"]),
        1800.0,
        "seconds of summed cell time per task, prefix cells included (1800)",
    ),
    Setting(
        "pip_cache",
        _text,
        None,
        "docker volume shared by task containers as pip's cache (mounted only for the gold "
        "agent: see docs/security.md)",
    ),
    Setting("tolerance", _number(TOLERANCE_BOUNDS), 0.01, "numeric tolerance (0.01)"),
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
        "token_budget",
        _number(LIMIT_RANGES["token_budget"]),
        None,
        "prompt-token budget per task (default 600k expert/auto, 400k masked)",
    ),
    Setting("steps", _number(LIMIT_RANGES["steps"]), 100, "step limit per episode (100)"),
    Setting("attempts", _number(Bounds(1, 100, whole=True)), 3, "reflexion attempts (3)"),
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
        "the agents' prompts: ours (default), SUPER's agent/prompt.yaml (`pytest-super download "
        "prompts`), or a folder of prompt template files (docs/agents.md)",
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
        "the default under xdist and Ray when any is known) or collection",
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


def add_options(parser: pytest.Parser) -> None:
    """The `--super-*` options (group "super") and their `super_*` ini keys."""
    g = parser.getgroup("super", "SUPER benchmark (pytest-super)")
    g.addoption(
        "--super-agent",
        help="agent to run: gold, react, react-super, swe, reflexion, "
        "replay, an entry point name, or package.module:Class. Without it tasks are skipped.",
    )
    g.addoption(
        "--super-set",
        action="append",
        default=None,
        help="only tasks of these sets (expert, masked, auto; comma-separated or repeated)",
    )
    for s in SETTINGS:
        g.addoption(s.flag, dest=s.dest, metavar=s.metavar, help=s.help)
        if s.ini:
            parser.addini(s.dest, s.help, default=None)
    g.addoption(
        "--super-git-mirror",
        action="append",
        default=[],
        metavar="PREFIX=DIR",
        help="clone PREFIX<name> from DIR/<name> inside kernels (repeatable; ini "
        "super_git_mirrors)",
    )
    for name, _default, ini, text in FLAGS:
        flag = "--super-" + name
        if ini:
            g.addoption(
                flag, dest="super_" + name, action=argparse.BooleanOptionalAction, help=text
            )
            parser.addini("super_" + name, text, default=None)
        else:
            g.addoption(flag, dest="super_" + name, action="store_true", default=None, help=text)
    parser.addini("super_tasks", "folders holding task files", type="paths", default=["tasks"])
    parser.addini("super_git_mirrors", "PREFIX=DIR git mirrors", type="linelist", default=[])


# -- resolution ----------------------------------------------------------------------------------
def _resolve(
    config: pytest.Config,
    name: str,
    read: Callable[[str], Any],
    default: Any,
    *,
    ini: bool,
    env: tuple[str, ...] = (),
) -> tuple[Any, str]:
    """(value, where it came from): the option, else the environment, else the ini, else the
    default. A value that does not read is a usage error naming its source."""
    flag = "--super-" + name.replace("_", "-")
    candidates: list[tuple[Any, str]] = [(config.getoption("super_" + name), flag)]
    candidates += [(os.environ.get(var) or None, f"environment variable {var}") for var in env]
    if ini:
        where = f"ini super_{name}" + (f" ({config.inipath.name})" if config.inipath else "")
        candidates.append((config.getini("super_" + name) or None, where))
    for raw, source in candidates:
        if raw is None:
            continue
        if not isinstance(raw, str):  # an on/off option argparse has read already
            return raw, source
        try:
            return read(raw), source
        except ValueError as exc:
            shown = raw if raw.strip().lstrip("-").replace(".", "", 1).isdigit() else repr(raw)
            raise pytest.UsageError(f"{source} {shown}: {exc}") from None
    return (read(default) if isinstance(default, str) else default), "default"


def _values(config: pytest.Config) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for s in SETTINGS:
        values[s.name], sources[s.name] = _resolve(
            config, s.name, s.read, s.default, ini=s.ini, env=s.env
        )
    for name, default, ini, _help in FLAGS:
        values[name], sources[name] = _resolve(config, name, _boolean, default, ini=ini)
    for name in ("agent",):
        values[name] = config.getoption("super_" + name)
        sources[name] = "--super-agent" if values[name] else "default"
    return values, sources


def _sets(config: pytest.Config) -> tuple[str, ...] | None:
    given = config.getoption("super_set")
    if not given:
        return None
    names = [n.strip() for text in given for n in text.split(",") if n.strip()]
    for n in names:
        if n not in SETS:
            raise pytest.UsageError(f"--super-set: unknown set {n!r}; use one of {', '.join(SETS)}")
    return tuple(names)


def run_of(config: pytest.Config) -> SuperRun:
    """The run's settings, made once in `pytest_configure` (`configure`)."""
    return config.stash[RUN_KEY]


def configure(config: pytest.Config, run_id: str) -> SuperRun:
    """Resolve the settings once, keep them in the config's stash, and set the pytest options a
    benchmark run implies: the ini's task folders when no paths were given, and one broken task
    file never stopping the others."""
    run = config.stash[RUN_KEY] = make_run(config, run_id)
    timeouts.check_user_timeout(config)
    if (run.agent or run.sets) and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(p) for p in run.task_roots]
    if run.agent:
        config.option.continue_on_collection_errors = True
    if run.remote and getattr(config.option, "numprocesses", None):
        raise pytest.UsageError(
            "--super-backend=ray runs many tasks from one pytest process: drop -n (pytest-xdist); "
            "use --super-ray-concurrency K to bound the tasks in flight"
        )
    return run


def collecting_only(config: pytest.Config) -> bool:
    """`--collect-only`: nothing runs, so nothing is checked against an endpoint."""
    return bool(config.option.collectonly)


def continues_after_collection_errors(config: pytest.Config) -> bool:
    """`--continue-on-collection-errors` (set for every benchmark run by `configure`)."""
    return bool(config.option.continue_on_collection_errors)


def make_run(config: pytest.Config, run_id: str) -> SuperRun:
    values, sources = _values(config)
    report_dir = Path(values["report_dir"])
    if not report_dir.is_absolute():
        report_dir = config.rootpath / report_dir
    mirrors = {}
    for spec in [*config.getini("super_git_mirrors"), *config.getoption("super_git_mirror")]:
        prefix, sep, directory = spec.rpartition("=")
        if not sep or not prefix:
            raise pytest.UsageError(f"--super-git-mirror {spec!r}: expected PREFIX=DIR")
        path = Path(directory)
        mirrors[prefix] = str(path if path.is_absolute() else (config.rootpath / path).resolve())
    workerinput = getattr(config, "workerinput", None)
    worker = workerinput["workerid"] if workerinput else "main"
    agent = values["agent"]
    if agent:
        _check_agent(agent)
    backend = values["backend"]
    kernel = KernelSettings(
        backend="docker" if backend == "ray" else backend,
        image=values["image"],
        docker_host=values["docker_host"],
        mem=values["mem"],
        cpus=values["cpus"],
        network=values["network"],
        git_mirrors=mirrors,
        pip_cache=_pip_cache(config, values["pip_cache"], agent),
        disk_bytes=values["disk"],
        run_id=run_id,
        worker=worker,
    )
    settings = RunSettings(
        agent=agent or "",
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
        options=AgentOptions(
            attempts=values["attempts"], replay_path=values["replay"], prompts=values["prompts"]
        ),
    )
    return SuperRun(
        run_id=run_id,
        report_dir=report_dir,
        agent=agent,
        kernel=kernel,
        settings=settings,
        registry=values["registry"],
        llm_settings=_llm_settings(agent, values),
        live=values["live"] or config.getoption("capture") == "no",
        retries=values["retries"],
        backend=backend,
        ray_address=values["ray_address"],
        ray_concurrency=values["ray_concurrency"],
        progress=values["progress"],
        max_containers=values["max_containers"],
        pool=values["pool"],
        sets=_sets(config),
        repeat=values["repeat"],
        resume=values["resume"],
        durations_file=_durations_file(config, values["durations"]),
        order=values["order"],
        task_roots=tuple(Path(config.rootpath, p).resolve() for p in config.getini("super_tasks")),
        sources=sources,
    )


def _durations_file(config: pytest.Config, value: str | None) -> Path | None:
    """--super-durations FILE, relative to where pytest was started (as pytest-split's
    --durations-path)."""
    if not value:
        return None
    return Path(config.invocation_params.dir, value)


def _pip_cache(config: pytest.Config, volume: str | None, agent: str | None) -> str | None:
    """The pip cache volume, shared only by trusted runs: one task must not poison another."""
    if volume and agent and agent not in TRUSTED_AGENTS:
        if not hasattr(config, "workerinput"):
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    f"pip cache volume {volume!r} not mounted: with --super-agent={agent} task "
                    "code is untrusted and could poison what later tasks install; only the gold "
                    "agent shares the cache (docs/security.md)"
                ),
                stacklevel=2,
            )
        return None
    return volume


def _check_agent(spec: str) -> None:
    """Reject an agent name at start-up, not in every task (SUPER's harness accepted names it
    then rejected)."""
    from pytest_super.agents import load_agent

    try:
        load_agent(spec)
    except ValueError as exc:
        raise pytest.UsageError(f"--super-agent: {exc}") from None


def _llm_settings(agent: str | None, values: dict[str, Any]) -> LLMSettings | None:
    from pytest_super.agents import needs_llm

    if not agent or not needs_llm(agent):
        return None
    model = values["model"]
    if not model:
        raise pytest.UsageError(
            f"--super-agent={agent} talks to a model: name it with --super-model"
        )
    price_in, price_out, price_cached = values["price"] or (None, None, None)
    base_url = values["base_url"]
    api_key = _api_key()
    if api_key is None and base_url.rstrip("/") == DEFAULT_BASE_URL:
        raise pytest.UsageError(
            f"--super-agent={agent} asks {DEFAULT_BASE_URL} but no API key is set: export "
            "SUPER_API_KEY (or OPENAI_API_KEY), or point --super-base-url at your own endpoint"
        )
    return LLMSettings(
        model=model,
        base_url=base_url,
        api_key=api_key,
        price_in=price_in,
        price_out=price_out,
        price_cached=price_cached,
        cache_dir=values["llm_cache"],
    )


#: where the API key is read, first first (llm.api_key_from_env)
API_KEY_VARIABLES = ("SUPER_API_KEY", "OPENAI_API_KEY")


def _api_key() -> str | None:
    """The API key (`llm.api_key_from_env`), refused when it holds what an HTTP header cannot
    carry (a non-ASCII letter, a newline or another control character): a usage error naming the
    variable, never showing the key."""
    from pytest_super.llm import api_key_from_env

    variable = next((v for v in API_KEY_VARIABLES if os.environ.get(v)), None)
    key = os.environ[variable] if variable else ""
    if not (key.isascii() and key.isprintable()):
        raise pytest.UsageError(
            f"environment variable {variable} holds a character that is not printable ASCII (a "
            "non-ASCII letter, a newline or another control character), so no request could "
            "carry it: set the key again without it (the value is not shown here)"
        )
    return api_key_from_env()


def report_header(run: SuperRun) -> list[str]:
    """What `pytest_report_header` shows of the run: agent, model, backend, image, run id."""
    if not run.agent:
        return ["pytest-super: no --super-agent (task items are skipped)"]
    backend = run.backend
    if run.remote:
        backend += f" at {run.ray_address} ({run.sources.get('ray_address', 'default')})"
    elif run.kernel.docker_host:
        backend += f" at {run.kernel.docker_host}"
    return [
        f"pytest-super: agent {run.agent}, model {run.settings.model or '-'}, backend {backend}, "
        f"image {run.kernel.image or '(the default kernel image)'}",
        f"pytest-super: run {run.run_id}, reports in {run.run_dir}",
        f"pytest-super: prompts {run.settings.options.prompts.label}",
    ]
