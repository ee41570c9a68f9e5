"""The run's settings as one plain record (`SuperRun`), with nothing of pytest in it.

`options.py` builds it once from the command line, the environment and the ini file; a script that
runs a task without pytest (`execute.run_one_task`) builds it directly:

    SuperRun(agent="gold", report_dir=Path("reports"))

Every default here is the default of the matching `--super-*` option.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_super.kernels.base import KernelSettings
from pytest_super.llm import LLMSettings
from pytest_super.prompts import PromptSet
from pytest_super.runner import RunSettings


def new_run_id() -> str:
    """A run id: the start time, for sorting, and 64 random bits, so that runs started in the same
    second on many machines (a CI matrix, shards) never share a report folder or container label."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(8)


@dataclass(frozen=True)
class SuperRun:
    """The run-wide settings: the run id, the report folder, the kernel, agent and model settings,
    and how tasks are scheduled (retries, the pool, where tasks run)."""

    agent: str | None = None
    run_id: str = field(default_factory=new_run_id)
    report_dir: Path = Path("reports")
    kernel: KernelSettings = field(default_factory=KernelSettings)
    settings: RunSettings = field(default_factory=RunSettings)
    llm_settings: LLMSettings | None = None
    live: bool = False
    #: --super-retries: attempts after a retryable infrastructure error
    retries: int = 0
    #: --super-backend as given: a kernel backend's name, or `ray` (tasks run whole on a Ray
    #: cluster's nodes, each with a docker kernel there)
    backend: str = "docker"
    #: --super-ray-address (else RAY_ADDRESS, else "auto") and --super-ray-concurrency
    ray_address: str | None = None
    ray_concurrency: int | None = None
    #: --super-progress: the status line with an ETA (progress.py): auto, on or off
    progress: str = "auto"
    #: --super-registry HOST:PORT: an engine without the kernel image pulls it from there first
    registry: str | None = None
    #: scheduling on this machine: --super-max-containers, --super-pool
    max_containers: int | None = None
    pool: bool = True
    #: selection: --super-set (None: every set), --super-repeat, --super-resume
    sets: tuple[str, ...] | None = None
    repeat: int = 1
    resume: bool = False
    #: --super-durations FILE (None: the earlier run, else the shipped table) and --super-order
    #: (None: longest when any duration is known and tasks go to several slots; ordering.py)
    durations_file: Path | None = None
    order: str | None = None
    #: the folders of task files (ini super_tasks), resolved
    task_roots: tuple[Path, ...] = ()
    #: where each setting's value came from ("--super-mem", "environment variable X", "ini
    #: super_mem", "default"), for the report header and error messages
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    #: --super-prompts: the agents' prompts (None: those of `settings.options`, ours by default);
    #: given here, they are the agents' (`settings.options.prompts`)
    prompts: PromptSet | None = None

    def __post_init__(self) -> None:
        if self.prompts is None:
            object.__setattr__(self, "prompts", self.settings.options.prompts)
        elif self.settings.options.prompts != self.prompts:
            options = dataclasses.replace(self.settings.options, prompts=self.prompts)
            settings = dataclasses.replace(self.settings, options=options)
            object.__setattr__(self, "settings", settings)
        if self.kernel.run_id == KernelSettings.run_id:  # made in Python: label with this run
            object.__setattr__(self, "kernel", dataclasses.replace(self.kernel, run_id=self.run_id))

    @property
    def run_dir(self) -> Path:
        return self.report_dir / self.run_id

    @property
    def remote(self) -> bool:
        """Whether tasks run on other machines (a Ray cluster) rather than in this process."""
        return self.backend == "ray"
