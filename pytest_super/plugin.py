"""The pytest glue: options, collection hooks, fixtures and the run's reports. Thin by design:
the work is done in collect.py, runner.py, kernels/, agents/ and report.py.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_super import collect, slots
from pytest_super import report as reports
from pytest_super.errors import InfrastructureError, SuperError, TaskSetupError
from pytest_super.kernels.base import KernelSettings
from pytest_super.runner import (
    PASS_METRICS,
    RunSettings,
    TaskResult,
    exit_status_of,
    run_task,
    task_timeout_s,
)
from pytest_super.tasks import (
    CATEGORIES,
    SETS,
    Task,
    categories_from_id,
    infer_set,
    load_yaml_task,
)
from pytest_super.trajectory import Step

RUN_KEY = pytest.StashKey["SuperRun"]()
RESULT_KEY = pytest.StashKey[TaskResult]()


# -- options ---------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
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
    g.addoption("--super-pip-cache", help="docker volume shared by task containers as pip's cache")
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
        default="https://api.openai.com/v1",
        help="OpenAI-compatible endpoint; key from SUPER_API_KEY or OPENAI_API_KEY",
    )
    g.addoption("--super-price", metavar="IN,OUT", help="USD per million prompt,completion tokens")
    g.addoption("--super-llm-cache", metavar="DIR", help="cache model responses on disk")
    g.addoption(
        "--super-token-budget",
        type=int,
        help="prompt-token budget per task (default 600k expert/auto, 400k masked)",
    )
    g.addoption("--super-steps", type=int, default=100, help="step limit per episode (100)")
    g.addoption("--super-attempts", type=int, default=3, help="reflexion attempts (3)")
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
    parser.addini("super_tasks", "folders holding task files", type="paths", default=["tasks"])
    parser.addini("super_git_mirrors", "PREFIX=DIR git mirrors", type="linelist", default=[])
    parser.addini("super_report_dir", "where runs write reports", default="reports")
    parser.addini("super_pip_cache", "docker volume for pip's cache in task containers", default="")


def _split_sets(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    for n in names:
        if n not in SETS:
            raise pytest.UsageError(f"--super-set: unknown set {n!r}; use one of {', '.join(SETS)}")
    return names


# -- configuration -----------------------------------------------------------------------------
@dataclass
class SuperRun:
    """The run-wide state: settings, the run id, the report folder, the results so far."""

    run_id: str
    report_dir: Path
    agent: str | None
    kernel: KernelSettings
    settings: RunSettings
    llm_settings: Any = None
    live: bool = False
    records: dict[str, reports.TaskRecord] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.report_dir / self.run_id


def pytest_configure(config: pytest.Config) -> None:
    for name in SETS:
        config.addinivalue_line("markers", f"{name}: a SUPER {name} task")
    for name in CATEGORIES:
        config.addinivalue_line("markers", f"{name}: a masked SUPER task of category {name}")
    config.addinivalue_line(
        "markers", "super_task(path): the task file the super_task fixture loads"
    )
    sets = config.getoption("super_set")
    config.option.super_set = [s for group in sets for s in group] if sets else None
    agent = config.getoption("super_agent")
    if (agent or sets) and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(p) for p in config.getini("super_tasks")]
    if agent:  # one broken task file must not stop a benchmark run: the others still run
        config.option.continue_on_collection_errors = True
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput["super_run_id"] if workerinput else _new_run_id()
    if workerinput is None:
        os.environ["PYTEST_SUPER_CONTROLLER_PID"] = str(os.getpid())
    run = config.stash[RUN_KEY] = _make_run(config, run_id)
    if workerinput is None and run.agent:
        config.pluginmanager.register(RunRecorder(run, config.rootpath), "pytest-super-recorder")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # xdist: hand the run id to each worker
    node.workerinput["super_run_id"] = node.config.stash[RUN_KEY].run_id


def _new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def _make_run(config: pytest.Config, run_id: str) -> SuperRun:
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
        pip_cache=opt("super_pip_cache") or config.getini("super_pip_cache") or None,
        run_id=run_id,
        worker=worker,
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


def _llm_settings(config: pytest.Config) -> Any:
    from pytest_super.agents import needs_llm
    from pytest_super.agents.llm import LLMSettings, api_key_from_env

    agent = config.getoption("super_agent")
    if not agent or not needs_llm(agent):
        return None
    model = config.getoption("super_model")
    if not model:
        raise pytest.UsageError(
            f"--super-agent={agent} talks to a model: name it with --super-model"
        )
    price_in = price_out = None
    if config.getoption("super_price"):
        try:
            price_in, price_out = (float(x) for x in config.getoption("super_price").split(","))
        except ValueError:
            raise pytest.UsageError(
                "--super-price takes IN,OUT in USD per million tokens, e.g. 2.5,10"
            ) from None
    return LLMSettings(
        model=model,
        base_url=config.getoption("super_base_url"),
        api_key=api_key_from_env(),
        price_in=price_in,
        price_out=price_out,
        cache_dir=config.getoption("super_llm_cache"),
    )


# -- collection ------------------------------------------------------------------------------------
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    return collect.ignore_in_task_roots(collection_path, config)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return collect.collect_task_file(file_path, parent)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run = config.stash[RUN_KEY]
    tasks = [item for item in items if isinstance(item, collect.SuperTaskItem)]
    if not run.agent:
        skip = pytest.mark.skip(
            reason="no agent: run SUPER tasks with --super-agent=gold (or "
            "react, react-super, swe, reflexion with --super-model)"
        )
        for item in tasks:
            item.add_marker(skip)
        return
    if config.getoption("super_resume"):
        _skip_finished_tasks(run, tasks)
    if config.pluginmanager.hasplugin("timeout") and not (
        config.getoption("timeout", None) or config.getini("timeout")
    ):
        from pytest_super.agents import needs_llm

        uses_model = needs_llm(run.agent)
        for item in tasks:
            if item.get_closest_marker("timeout") is None:
                seconds = task_timeout_s(item.task, run.settings, uses_model=uses_model)
                item.add_marker(pytest.mark.timeout(seconds))


def _skip_finished_tasks(run: SuperRun, items: list[collect.SuperTaskItem]) -> None:
    """--super-resume: tasks with a final result for this agent and model are skipped; their
    earlier result rides along in the skip report's properties, so the summary counts it."""
    finished = reports.final_results(
        run.report_dir, agent=run.agent or "", model=run.settings.model, exclude_run=run.run_id
    )
    for item in items:
        previous = finished.get(item.task.id)
        if previous is None:
            continue
        run_id, record = previous
        item.user_properties.extend((f"super.{k}", v) for k, v in record.properties.items())
        item.user_properties.append(("super.resumed_from", run_id))
        item.user_properties.append(("super.resumed_outcome", record.outcome))
        item.add_marker(pytest.mark.skip(reason=f"resumed: {record.outcome} in run {run_id}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Setup and teardown errors of our own (engine down, prefix cell failed) read as sentences."""
    rep = yield
    if (
        call.when != "call"
        and call.excinfo is not None
        and isinstance(call.excinfo.value, SuperError)
    ):
        exc = call.excinfo.value
        rep.longrepr = f"{type(exc).__name__}: {exc}"
    return rep


# -- fixtures --------------------------------------------------------------------------------------
@pytest.fixture
def super_task(request: pytest.FixtureRequest) -> Task:
    """The task this test runs: the item's own, or the file named by @pytest.mark.super_task(path)."""
    task = getattr(request.node, "task", None)
    if task is not None:
        return task
    marker = request.node.get_closest_marker("super_task")
    if marker is None:
        raise pytest.UsageError(
            "super_task needs a task: mark the test @pytest.mark.super_task('tasks/x.yaml')"
        )
    return load_yaml_task(Path(marker.args[0]))


@pytest.fixture
def super_kernel(request: pytest.FixtureRequest):
    """A fresh kernel (a new container with the docker backend) for this test, removed afterwards."""
    from pytest_super.kernels import provision_kernel

    run = request.config.stash[RUN_KEY]
    kernel = provision_kernel(run.kernel, task_id=_safe_name(request.node.name))
    try:
        yield kernel
    finally:
        kernel.close()


@pytest.fixture
def super_result(request: pytest.FixtureRequest, super_task: Task) -> TaskResult:
    """Run the task's episode (in setup, so infrastructure faults are errors, not failures)."""
    from pytest_super.agents import load_agent
    from pytest_super.kernels import provision_kernel

    run: SuperRun = request.config.stash[RUN_KEY]
    if not run.agent:
        pytest.skip("no --super-agent given")
    agent = load_agent(run.agent)
    llm = None
    if run.llm_settings is not None:
        from pytest_super.agents.llm import LLMClient

        llm = LLMClient(run.llm_settings)
    item = request.node
    # known before the episode, so a task that errors is still filed under its set and agent
    item.user_properties.extend(
        [
            ("super.set", super_task.set),
            ("super.category", ",".join(super_task.categories)),
            ("super.agent", run.agent),
            ("super.model", run.settings.model or ""),
        ]
    )
    trajectory = run.run_dir / "trajectories" / f"{_safe_name(super_task.id)}.json"
    on_step = _live_printer(request.config, super_task) if run.live else None
    locks = run.run_dir / "locks"

    def new_kernel():
        with slots.start_lock(locks):
            return provision_kernel(run.kernel, task_id=super_task.id)

    retries = request.config.getoption("super_retries")
    retried: list[tuple[str, Any]] = []
    try:
        with slots.container_slot(locks, request.config.getoption("super_max_containers")):
            for attempt in range(retries + 1):
                try:
                    result = run_task(
                        super_task,
                        agent,
                        new_kernel,
                        run.settings,
                        trajectory,
                        llm=llm,
                        on_step=on_step,
                    )
                    break
                except InfrastructureError as exc:
                    if not exc.retryable or attempt == retries:
                        raise
                    retried.append(("super.retried_after", f"{type(exc).__name__}: {exc}"[:500]))
    except (InfrastructureError, TaskSetupError) as exc:
        item.user_properties.extend([*retried, ("super.exit_status", exit_status_of(exc).value)])
        raise
    finally:
        if llm is not None:
            llm.close()
    item.user_properties[:] = [p for p in item.user_properties if not p[0].startswith("super.")]
    item.user_properties.extend([*result.properties().items(), *retried])
    item.stash[RESULT_KEY] = result
    return result


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.," else "_" for c in name)


def _live_printer(config: pytest.Config, task: Task):
    capman = config.pluginmanager.getplugin("capturemanager")

    def show(step: Step) -> None:
        tail = (step.observation or step.output).strip().splitlines()[-5:]
        text = ["", f"[{task.id}] {step.action}: {step.thought.strip()[:200]}"]
        if step.content and step.action != "submit":
            text += ["    > " + ln for ln in step.content.strip().splitlines()[:10]]
        elif step.content:
            text.append(f"    > {step.content[:300]}")
        text += ["    | " + ln[:200] for ln in tail]
        if step.prompt_tokens:
            text.append(f"    ({step.prompt_tokens} prompt tokens this step)")
        if capman is not None:
            with capman.global_and_fixture_disabled():
                print("\n".join(text), flush=True)
        else:
            print("\n".join(text), file=sys.stderr, flush=True)

    return show


# -- results -----------------------------------------------------------------------------------
class RunRecorder:
    """The controller's record of the run: results.jsonl as tasks finish, the summary at the end.

    Registered only in the controlling process (never in xdist workers), so each task is written
    exactly once however many workers ran it.
    """

    def __init__(self, run: SuperRun, rootpath: Path) -> None:
        self.run = run
        self.rootpath = rootpath
        self.phases: dict[str, list[pytest.TestReport]] = {}
        run.run_dir.mkdir(parents=True, exist_ok=True)
        self.writer = reports.ResultsWriter(run.run_dir / "results.jsonl")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.run.kernel.backend == "docker":
            _remove_dead_runs(self.run)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        phases = self.phases.setdefault(report.nodeid, [])
        phases.append(report)
        if report.when == "???":  # xdist: the worker died while running this item
            self.phases.pop(report.nodeid, None)
            if self._is_task(report.nodeid, phases):
                self._write(
                    report.nodeid,
                    "error",
                    {
                        **self._known_facts(report.nodeid),
                        **reports.strip_prefix(p for ph in phases for p in ph.user_properties),
                        "exit_status": "worker_crashed",
                    },
                )
            return
        if report.when != "teardown":
            return
        del self.phases[report.nodeid]
        outcome = _outcome(phases)
        properties = reports.strip_prefix(report.user_properties)
        if "resumed_outcome" in properties:
            outcome = properties.pop("resumed_outcome")
        elif outcome == "skipped" or not properties:
            return  # not a task item, or a task that never ran
        self._write(report.nodeid, outcome, properties)

    def _known_facts(self, nodeid: str) -> dict[str, Any]:
        """What the controller can say of a task whose worker died before reporting anything
        (under xdist the controller collected nothing, so it reads the task file)."""
        facts: dict[str, Any] = {"agent": self.run.agent, "model": self.run.settings.model or ""}
        path = self.rootpath / nodeid.split("::")[0]
        try:
            if path.suffix in (".yaml", ".yml"):
                task = load_yaml_task(path)
                facts.update(set=task.set, category=",".join(task.categories))
            else:
                task_id = nodeid.rsplit("::", 1)[-1]
                facts.update(set=infer_set(path), category=",".join(categories_from_id(task_id)))
        except SuperError:
            pass
        return facts

    def _is_task(self, nodeid: str, phases: list[pytest.TestReport]) -> bool:
        path = nodeid.split("::")[0]
        return path.endswith(collect.TASK_SUFFIXES) or any(
            k.startswith("super.") for p in phases for k, _ in p.user_properties
        )

    def _write(self, nodeid: str, outcome: str, properties: dict[str, Any]) -> None:
        record = reports.TaskRecord(
            task_id=nodeid.rsplit("::", 1)[-1], outcome=outcome, properties=properties
        )
        self.run.records[nodeid] = record
        self.writer.write(record)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.writer.close()
        if self.run.kernel.backend == "docker" and not self.run.settings.keep_failed:
            _remove_run_containers(self.run)  # what killed workers left behind
        if self.run.records:
            table = reports.format_table({self.run.agent or "run": self._rows()}, markdown=True)
            (self.run.run_dir / "summary.md").write_text(
                f"# pytest-super run {self.run.run_id}\n\nagent: {self.run.agent}, model: "
                f"{self.run.settings.model or '-'}\n\n{table}\n"
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.run.records:
            return
        terminalreporter.section(f"SUPER summary (run {self.run.run_id}, agent {self.run.agent})")
        terminalreporter.write_line(reports.format_table({self.run.agent or "run": self._rows()}))
        terminalreporter.write_line(f"reports: {self.run.run_dir}")

    def _rows(self) -> list[reports.SummaryRow]:
        return reports.summarize(self.run.records.values())


def _remove_dead_runs(run: SuperRun) -> None:
    """Containers of runs whose controller died (kill -9) are removed when the next run starts."""
    from pytest_super.kernels import cleanup_containers, docker_client

    try:
        client = docker_client(run.kernel)
    except InfrastructureError:
        return  # each task will report the engine as an error of its own
    cleanup_containers(client, dead_runs_only=True)


def _remove_run_containers(run: SuperRun) -> None:
    from pytest_super.kernels import cleanup_containers, docker_client

    with contextlib.suppress(InfrastructureError):  # no engine: nothing can be left on it
        cleanup_containers(docker_client(run.kernel), run_id=run.run_id)


def _outcome(phases: list[pytest.TestReport]) -> str:
    if any(p.skipped for p in phases):
        return "skipped"
    if any(p.failed for p in phases if p.when != "call"):
        return "error"
    call = next((p for p in phases if p.when == "call"), None)
    if call is None:
        return "error"
    return "failed" if call.failed else "passed"
