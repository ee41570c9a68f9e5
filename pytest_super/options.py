"""The run's settings, read once from pytest's options and ini values into plain records.

Owns the plugin's command-line options (`add_options`), the `SuperRun` record every hook and
fixture reads, and its construction (`make_run`), which rejects bad values at start-up.
"""

from __future__ import annotations

import argparse
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_super.kernels.base import KernelSettings
from pytest_super.llm import LLMSettings
from pytest_super.runner import PASS_METRICS, RunSettings
from pytest_super.tasks import SETS

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def add_options(parser: pytest.Parser) -> None:
    """The `--super-*` options (group "super") and the `super_*` ini values."""
    g = parser.getgroup("super", "SUPER benchmark (pytest-super)")
    g.addoption(
        "--super-agent",
        help="agent to run: gold, react, react-super, swe, reflexion, "
        "replay, an entry point name, or package.module:Class. Without it tasks are skipped.",
    )
    g.addoption(
        "--super-set",
        action="append",
        type=_split_sets,
        default=None,
        help="only tasks of these sets (expert, masked, auto; comma-separated or repeated)",
    )
    g.addoption(
        "--super-backend",
        choices=("docker", "local"),
        default="docker",
        help="where kernels run (default docker; local isolates nothing)",
    )
    g.addoption(
        "--super-image", help="kernel image (default: what `pytest-super image build` makes)"
    )
    g.addoption("--super-docker-host", help="Docker engine address (default DOCKER_HOST)")
    g.addoption("--super-mem", default="4g", help="container memory limit (default 4g)")
    g.addoption("--super-cpus", type=float, default=2.0, help="container CPUs (default 2)")
    g.addoption(
        "--super-network",
        choices=("bridge", "none"),
        default="bridge",
        help="container network (default bridge)",
    )
    g.addoption(
        "--super-disk",
        metavar="SIZE",
        type=_disk_size,
        default=DEFAULT_DISK,
        help=f"what one task may write, e.g. 20g, 500m, or none (default {DEFAULT_DISK}); "
        "a task over it ends with exit status disk_limit",
    )
    g.addoption(
        "--super-keep",
        action="store_true",
        help="keep the container of a failing task and print how to get in",
    )
    g.addoption("--super-cell-timeout", type=float, default=300.0, help="seconds per cell (300)")
    g.addoption(
        "--super-compute-limit",
        type=float,
        default=1800.0,
        help="seconds of summed cell time per task, prefix cells included (1800)",
    )
    g.addoption(
        "--super-git-mirror",
        action="append",
        default=[],
        metavar="PREFIX=DIR",
        help="clone PREFIX<name> from DIR/<name> inside kernels (repeatable)",
    )
    g.addoption(
        "--super-pip-cache",
        help="docker volume shared by task containers as pip's cache "
        "(mounted only for the gold agent: see docs/security.md)",
    )
    g.addoption("--super-tolerance", type=float, default=0.01, help="numeric tolerance (0.01)")
    g.addoption(
        "--super-pass-metric",
        choices=PASS_METRICS,
        help="metric deciding pass (default accuracy; script-executed for auto)",
    )
    g.addoption(
        "--super-pass-threshold", type=float, default=1.0, help="pass if metric >= this (1)"
    )
    g.addoption("--super-report-dir", help="where runs write reports (default: ini or `reports`)")
    g.addoption("--super-model", help="model name for LLM agents")
    g.addoption(
        "--super-base-url",
        default=DEFAULT_BASE_URL,
        help="OpenAI-compatible endpoint; key from SUPER_API_KEY or OPENAI_API_KEY",
    )
    g.addoption(
        "--super-price",
        metavar="IN,OUT[,CACHED]",
        help="USD per million prompt, completion (and cached prompt) tokens",
    )
    g.addoption("--super-llm-cache", metavar="DIR", help="cache model responses on disk")
    g.addoption(
        "--super-token-budget",
        type=int,
        help="prompt-token budget per task (default 600k expert/auto, 400k masked)",
    )
    g.addoption("--super-steps", type=int, default=100, help="step limit per episode (100)")
    g.addoption("--super-attempts", type=int, default=3, help="reflexion attempts (3)")
    g.addoption(
        "--super-format-errors",
        type=int,
        metavar="N",
        help="end an episode after N malformed replies in a row (default: no cap, as SUPER)",
    )
    g.addoption(
        "--super-replay", metavar="PATH", help="trajectory file or folder for the replay agent"
    )
    g.addoption("--super-live", action="store_true", help="print each step as it happens")
    g.addoption(
        "--super-max-containers",
        type=int,
        help="at most this many task containers at once, across all xdist workers",
    )
    g.addoption(
        "--super-pool",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="make each task's kernel while the task before it runs, and remove finished "
        "tasks' containers in the background (default on; see docs/pool.md)",
    )
    g.addoption(
        "--super-retries",
        type=int,
        default=0,
        help="run a task again after an infrastructure error, up to N times (0)",
    )
    g.addoption(
        "--super-resume",
        action="store_true",
        help="skip tasks that already have a final result for this agent and model in the "
        "report folder; their results are carried into this run's reports",
    )
    g.addoption(
        "--super-repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each task N times, each in a fresh container, as items <id>[repeat1].. "
        "(the summary adds pass@k and pass^k, k = N)",
    )
    parser.addini("super_tasks", "folders holding task files", type="paths", default=["tasks"])
    parser.addini("super_git_mirrors", "PREFIX=DIR git mirrors", type="linelist", default=[])
    parser.addini("super_report_dir", "where runs write reports", default="reports")
    parser.addini("super_pip_cache", "docker volume for pip's cache in task containers", default="")


#: Default --super-disk: SUPER's heaviest setups (torch with CUDA wheels, datasets, checkpoints)
#: write a few GiB; 20 GiB leaves room and still stops a runaway writer long before a disk fills.
DEFAULT_DISK = "20g"
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
#: agents whose code is the task's own (reviewed) solution: they may share the pip cache
TRUSTED_AGENTS = frozenset({"gold"})


def _disk_size(value: str) -> int | None:
    """`--super-disk` SIZE in bytes (binary units k, m, g, t; b optional); "none": no bound."""
    text = value.strip().lower().removesuffix("b").removesuffix("i")
    if text == "none":
        return None
    number, unit = text.rstrip("kmgt"), text[len(text.rstrip("kmgt")) :]
    try:
        size = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        size = 0
    if size < 2**20:
        raise pytest.UsageError(
            f"--super-disk {value!r}: expected a size of at least 1m such as 20g or 500m, "
            "or none for no bound"
        )
    return int(size)


def _pip_cache(config: pytest.Config, agent: str | None) -> str | None:
    """The pip cache volume, shared only by trusted runs: one task must not poison another."""
    volume = config.getoption("super_pip_cache") or config.getini("super_pip_cache") or None
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


def _split_sets(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    for n in names:
        if n not in SETS:
            raise pytest.UsageError(f"--super-set: unknown set {n!r}; use one of {', '.join(SETS)}")
    return names


@dataclass
class SuperRun:
    """The run-wide settings: the run id, the report folder, the kernel, agent and model settings."""

    run_id: str
    report_dir: Path
    agent: str | None
    kernel: KernelSettings
    settings: RunSettings
    llm_settings: LLMSettings | None = None
    live: bool = False

    @property
    def run_dir(self) -> Path:
        return self.report_dir / self.run_id


def new_run_id() -> str:
    """A run id: the start time, for sorting, and 64 random bits, so that runs started in the same
    second on many machines (a CI matrix, shards) never share a report folder or container label."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(8)


def make_run(config: pytest.Config, run_id: str) -> SuperRun:
    opt = config.getoption
    report_dir = Path(opt("super_report_dir") or config.getini("super_report_dir"))
    if not report_dir.is_absolute():
        report_dir = config.rootpath / report_dir
    mirrors = {}
    for spec in [*config.getini("super_git_mirrors"), *opt("super_git_mirror")]:
        prefix, sep, directory = spec.rpartition("=")
        if not sep or not prefix:
            raise pytest.UsageError(f"--super-git-mirror {spec!r}: expected PREFIX=DIR")
        path = Path(directory)
        mirrors[prefix] = str(path if path.is_absolute() else (config.rootpath / path).resolve())
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    kernel = KernelSettings(
        backend=opt("super_backend"),
        image=opt("super_image"),
        docker_host=opt("super_docker_host"),
        mem=opt("super_mem"),
        cpus=opt("super_cpus"),
        network=opt("super_network"),
        git_mirrors=mirrors,
        pip_cache=_pip_cache(config, opt("super_agent")),
        disk_bytes=opt("super_disk"),
        run_id=run_id,
        worker=worker,
    )
    if opt("super_repeat") < 1:
        raise pytest.UsageError(
            f"--super-repeat {opt('super_repeat')}: give 1 or more runs per task"
        )
    agent = opt("super_agent")
    if agent:
        _check_agent(agent)
    settings = RunSettings(
        agent=agent or "",
        model=opt("super_model"),
        tolerance=opt("super_tolerance"),
        pass_metric=opt("super_pass_metric"),
        pass_threshold=opt("super_pass_threshold"),
        token_budget=opt("super_token_budget"),
        compute_limit_s=opt("super_compute_limit"),
        cell_timeout_s=opt("super_cell_timeout"),
        steps=opt("super_steps"),
        format_errors=opt("super_format_errors"),
        keep_failed=opt("super_keep"),
        options={"attempts": opt("super_attempts"), "replay_path": opt("super_replay")},
    )
    live = opt("super_live") or opt("capture") == "no"
    return SuperRun(
        run_id=run_id,
        report_dir=report_dir,
        agent=agent,
        kernel=kernel,
        settings=settings,
        llm_settings=_llm_settings(config),
        live=live,
    )


def _check_agent(spec: str) -> None:
    """Reject an agent name at start-up, not in every task (SUPER's harness accepted names it
    then rejected)."""
    from pytest_super.agents import load_agent

    try:
        load_agent(spec)
    except ValueError as exc:
        raise pytest.UsageError(f"--super-agent: {exc}") from None


def _llm_settings(config: pytest.Config) -> LLMSettings | None:
    from pytest_super.agents import needs_llm
    from pytest_super.llm import api_key_from_env

    agent = config.getoption("super_agent")
    if not agent or not needs_llm(agent):
        return None
    model = config.getoption("super_model")
    if not model:
        raise pytest.UsageError(
            f"--super-agent={agent} talks to a model: name it with --super-model"
        )
    price_in = price_out = price_cached = None
    if config.getoption("super_price"):
        try:
            prices = [float(x) for x in config.getoption("super_price").split(",")]
            if len(prices) not in (2, 3):
                raise ValueError
        except ValueError:
            raise pytest.UsageError(
                "--super-price takes IN,OUT[,CACHED] in USD per million tokens, e.g. 2.5,10,1.25"
            ) from None
        price_in, price_out = prices[:2]
        price_cached = prices[2] if len(prices) == 3 else None
    base_url = config.getoption("super_base_url")
    api_key = api_key_from_env()
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
        cache_dir=config.getoption("super_llm_cache"),
    )
