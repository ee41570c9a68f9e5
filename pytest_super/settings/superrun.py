"""The run's settings as one plain record: `SuperRun`, its run id (`new_run_id`), the defaults it
holds when built directly (a pytest run's given no option), the checks that refuse there what the
options refuse, and `resolve_run`, which builds it from resolved values.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

from pytest_super.environment import AgentOptions
from pytest_super.kernels.base import KernelSettings
from pytest_super.llm import LLMSettings
from pytest_super.prompts import PromptSet
from pytest_super.runner import EpisodeSettings
from pytest_super.settings.endpoint import judge_settings, model_settings
from pytest_super.settings.providers import (
    PROVIDER_KINDS,
    ProviderKind,
    provider_defaults,
    provider_settings,
    provider_values,
)
from pytest_super.settings.readers import SettingError, shown
from pytest_super.settings.resolve import (
    Inputs,
    check_agent,
    executor_alias,
    kernel_settings,
    resolve_values,
    run_sets,
    script_inputs,
)
from pytest_super.settings.table import BY_NAME, SETTINGS, Setting, SettingValues, default_of


def new_run_id() -> str:
    """A run id: the start time, for sorting, and 64 random bits, so that runs started in the same
    second on many machines (a CI matrix, shards) never share a report folder or container label."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(8)


def _episode_settings(values: SettingValues) -> EpisodeSettings:
    """The episode's settings (runner.py) of the resolved `values`."""
    return EpisodeSettings(
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
    the setting holds (`retries="3"`) is refused too. So are the providers' settings
    (`executor_settings`, `backend_settings`): a value their option would refuse, or a name no
    provider declares."""
    for name in _CHECKED_FIELDS:
        _check_value(f"SuperRun({name}=...)", getattr(run, name), BY_NAME[name])
    for kind in PROVIDER_KINDS:
        _check_provider_values(kind, getattr(run, f"{kind}_settings"))
    if run.agent:
        check_agent(run.agent, "SuperRun(agent=...)")


def _check_provider_values(kind: ProviderKind, given: Mapping[str, object]) -> None:
    """`SuperRun(<kind>_settings={...})` checked against what the providers of `kind` declare."""
    declared = {s.name: s for table in provider_settings(kind).values() for s in table}
    for name, value in given.items():
        source = f"SuperRun({kind}_settings={{{name!r}: ...}})"
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise SettingError(
                f"{source}: no {PROVIDER_KINDS[kind]} declares the setting {name!r} "
                f"(known: {known})"
            )
        if isinstance(value, (str, int, float)) or value is None:  # bool is an int
            _check_value(source, value, declared[name])
        # a value of another kind (a provider's reader may make one) has no text to read back


def _check_value(source: str, value: object, s: Setting) -> None:
    """`SettingError` naming `source` if `value` is not what setting `s` reads its text as."""
    if value is None and s.default is None:
        return
    raw = value if isinstance(value, str) else str(value)
    try:
        read = s.read(raw)
    except ValueError as exc:
        raise SettingError(f"{source} {shown(raw)}: {exc}") from None
    if read != value or type(read) is not type(value):
        raise SettingError(
            f"{source} {value!r}: a {type(value).__name__}, where the setting holds a "
            f"{type(read).__name__} ({read!r})"
        )


def _default_kernel() -> KernelSettings:
    """The kernel settings of a pytest run given no option, ini or environment variable."""
    return KernelSettings(
        mem=cast(str, default_of("mem")),
        cpus=cast(float, default_of("cpus")),
        network=cast('Literal["bridge", "none"]', default_of("network")),
        disk_bytes=cast("int | None", default_of("disk")),
    )


def _default_episode_settings() -> EpisodeSettings:
    values = {s.name: default_of(s.name) for s in SETTINGS if s.name not in ("backend",)}
    values["agent"] = None
    return _episode_settings(cast(SettingValues, values))


@dataclass(frozen=True)
class SuperRun:
    """The run-wide settings: the run id, the report folder, the kernel, agent and model settings,
    and how tasks are scheduled (retries, the pool, where tasks run). Every default is the
    default of the matching `--super-*` setting in `SETTINGS`."""

    agent: str | None = None
    run_id: str = field(default_factory=new_run_id)
    report_dir: Path = Path(cast(str, default_of("report_dir")))
    kernel: KernelSettings = field(default_factory=_default_kernel)
    settings: EpisodeSettings = field(default_factory=_default_episode_settings)
    llm_settings: LLMSettings | None = None
    #: --super-judge-model: the LMR judge's endpoint (lmr/judge.py); None: no judge
    judge_settings: LLMSettings | None = None
    live: bool = cast(bool, default_of("live"))
    #: --super-retries: attempts after a retryable infrastructure error
    retries: int = cast(int, default_of("retries"))
    #: --super-backend: the kernel backend's name (a deprecated executor alias already resolved)
    backend: str = cast(str, BY_NAME["backend"].default)
    #: --super-executor: where each task runs (executors/): `local` or one that runs them elsewhere
    executor: str = cast(str, BY_NAME["executor"].default)
    #: the settings the executors declare (`--super-<name>`), by name: the executor's own code
    #: reads them (e.g. executors/ray/settings.py)
    executor_settings: Mapping[str, object] = field(
        default_factory=lambda: provider_defaults("executor")
    )
    #: the settings the kernel backends declare (`--super-<name>`, settings/providers.py), by
    #: name: the backend's own code reads them
    backend_settings: Mapping[str, object] = field(
        default_factory=lambda: provider_defaults("backend")
    )
    #: --super-progress: the status line with an ETA (progress.py): auto, on or off
    progress: str = cast(str, default_of("progress"))
    #: --super-registry HOST:PORT: an engine without the kernel image pulls it from there first
    registry: str | None = None
    #: scheduling on this machine: --super-max-containers, --super-pool
    max_containers: int | None = cast("int | None", default_of("max_containers"))
    pool: bool = cast(bool, default_of("pool"))
    #: selection: --super-set (None: every set), --super-repeat, --super-resume
    sets: tuple[str, ...] | None = None
    repeat: int = cast(int, default_of("repeat"))
    resume: bool = cast(bool, default_of("resume"))
    #: --super-durations FILE (None: the earlier run, else the shipped table) and --super-order
    #: (None: longest when any duration is known and tasks go to several slots; ordering.py)
    durations_file: Path | None = None
    order: str | None = cast("str | None", default_of("order"))
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
        cls, rootdir: Path | str | None = None, *, run_id: str | None = None, **overrides: object
    ) -> SuperRun:
        """The settings a pytest run in `rootdir` (default: the working folder) would hold, with
        `overrides` in the place of options: `SuperRun.resolve(agent="gold", mem="3g")`. Each
        keyword is a setting's name (`mem`, `cell_timeout`, `git_mirror`, `set`, `keep`, ...),
        given as text (read as the option's text is) or as a value. Raises `SettingError` naming
        the source of a bad value, `TypeError` for an unknown keyword."""
        root = Path(rootdir if rootdir is not None else Path.cwd()).resolve()
        return resolve_run(script_inputs(root, overrides), run_id or new_run_id())

    @property
    def run_dir(self) -> Path:
        return self.report_dir / self.run_id

    @property
    def remote(self) -> bool:
        """Whether tasks run elsewhere (another executor than `local`) rather than in this process
        or its xdist workers."""
        return self.executor != "local"


def resolve_run(inputs: Inputs, run_id: str) -> SuperRun:
    """The run's settings resolved from `inputs`: what a pytest run builds in `pytest_configure`
    (options.py) and `SuperRun.resolve` builds for a script. Raises `SettingError`."""
    values, sources = resolve_values(inputs)
    executor_alias(values, sources)
    report_dir = Path(values["report_dir"])
    if not report_dir.is_absolute():
        report_dir = inputs.rootpath / report_dir
    agent = values["agent"]
    if agent:
        check_agent(agent)
    kernel = kernel_settings(values, inputs, sources, run_id)
    return SuperRun(
        run_id=run_id,
        report_dir=report_dir,
        agent=agent,
        kernel=kernel,
        settings=_episode_settings(values),
        registry=values["registry"],
        llm_settings=model_settings(agent, values, report_dir / run_id),
        judge_settings=judge_settings(values) if agent else None,
        live=values["live"] or inputs.capture_no,
        retries=values["retries"],
        backend=values["backend"],
        executor=values["executor"],
        executor_settings=provider_values("executor", values),
        backend_settings=provider_values("backend", values),
        progress=values["progress"],
        max_containers=values["max_containers"],
        pool=values["pool"],
        sets=run_sets(cast("str | list[str] | None", inputs.given("set"))),
        repeat=values["repeat"],
        resume=values["resume"],
        durations_file=Path(inputs.invocation_dir, values["durations"])
        if values["durations"]
        else None,
        order=values["order"],
        task_roots=inputs.task_roots,
        sources=sources,
    )
