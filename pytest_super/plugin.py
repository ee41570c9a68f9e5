"""The pytest glue: hooks and fixtures only. The work is done elsewhere: options.py (settings),
collect.py (items), runner.py (one episode), recorder.py and report.py (results), kernels/, agents/.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_super import (
    collect,
    executors,
    interrupts,
    last_failed,
    options,
    progress,
    redaction,
    sinks,
    thirdparty,
    timeouts,
)
from pytest_super import report as reports
from pytest_super.durations import Durations, DurationsFileError, known_durations
from pytest_super.errors import SuperError
from pytest_super.executors import pytest_side
from pytest_super.kernels.base import Kernel
from pytest_super.kernels.jupyter.output import console_text
from pytest_super.llm.settings import LLMSettings
from pytest_super.names import file_stem
from pytest_super.options import SuperRun, run_of
from pytest_super.ordering import choose_order, for_xdist, in_order
from pytest_super.outcome import OutcomeError, TaskOutcome
from pytest_super.recorder import RecordHooks
from pytest_super.run_record import known_properties, outcome_record, stop_message
from pytest_super.runner import TaskResult, task_timeout_s
from pytest_super.settings import engine_address_of
from pytest_super.tasks import (
    CATEGORIES,
    SETS,
    Task,
    load_yaml_task,
)

RESULT_KEY = pytest.StashKey[TaskResult]()
REMOVAL_FAILURES_KEY = pytest.StashKey[list[str]]()
#: the known task durations the run orders by (durations.py) and the order chosen (ordering.py),
#: both set in pytest_configure (the report header shows them)
DURATIONS_KEY = pytest.StashKey[Durations]()
ORDER_KEY = pytest.StashKey[str]()


# -- options ---------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


# -- configuration -----------------------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    for name in SETS:
        config.addinivalue_line("markers", f"{name}: a SUPER {name} task")
    for name in CATEGORIES:
        config.addinivalue_line("markers", f"{name}: a masked SUPER task of category {name}")
    config.addinivalue_line(
        "markers", "super_task(path): the task file the super_task fixture loads"
    )
    workerinput = thirdparty.worker_input(config)
    run_id = workerinput["super_run_id"] if workerinput else options.new_run_id()
    if workerinput is None:
        os.environ["PYTEST_SUPER_CONTROLLER_PID"] = str(os.getpid())
    run = options.configure(config, run_id)
    executor = pytest_side.choose(config, run)
    if run.llm_settings is not None:
        redaction.register(run.llm_settings.api_key)
    # the backend engine's address's credentials too (the resume command)
    redaction.register_url(engine_address_of(run.kernel.backend, run.kernel.options))
    config.stash[REMOVAL_FAILURES_KEY] = []
    if run.agent:
        _plan_order(config, run)
        last_failed.scope(config, run.agent, run.settings.model)
        interrupts.stop_on_sigterm(config)
        interrupts.stop_on_ctrl_c(
            config,
            run.run_id,
            controller=workerinput is None,
            where=executors.cleanup_options(run),
        )
    if workerinput is None and run.agent:
        if run.llm_settings is not None and not options.collecting_only(config):
            check_llm_endpoint(run.llm_settings)
            _say_if_price_unknown(run.llm_settings)
        if run.judge_settings is not None and not options.collecting_only(config):
            fetch_judge_rubric()
        if not options.collecting_only(config):
            pytest_side.start(config, run, executor)
        recorder = RecordHooks(run, config.rootpath, executor)
        config.pluginmanager.register(recorder, "pytest-super-recorder")
        if not options.collecting_only(config):
            progress.start(
                config,
                run.progress,
                remote=executor.remote,
                durations=lambda: config.stash.get(DURATIONS_KEY, None),
                whose=(run.agent, run.settings.model),
            )


def _plan_order(config: pytest.Config, run: SuperRun) -> None:
    """The known durations (a bad --super-durations file is a usage error) and the order tasks
    start in (ordering.choose_order: a run on one process keeps collection order unless
    --super-order says otherwise)."""
    try:
        durations = known_durations(
            run.durations_file,
            run.report_dir,
            agent=run.agent,
            model=run.settings.model,
            exclude_run=run.run_id,
        )
    except DurationsFileError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[DURATIONS_KEY] = durations
    config.stash[ORDER_KEY] = choose_order(
        run.order, any_known=bool(durations), one_process=_one_process(config, run)
    )


def _one_process(config: pytest.Config, run: SuperRun) -> bool:
    """Whether tasks run one after another in one process: not on a remote executor, not on 2+
    xdist workers."""
    if pytest_side.executor_of(config).remote:
        return False
    workerinput = thirdparty.worker_input(config)
    if workerinput is not None:
        return int(workerinput.get("workercount", 1)) <= 1
    workers = thirdparty.requested_workers(config)
    return workers is None or workers <= 1


def _say_if_price_unknown(settings: LLMSettings) -> None:
    """A model of no known price is said once, by the controller: its cost would read 0.00."""
    from pytest_super.llm.accounting import price_unknown

    if price_unknown(settings):
        warnings.warn(
            f"pytest-super: no price is known for model {settings.model!r}: the run's cost shows "
            "0.00; give --super-price IN,OUT (USD per million prompt and completion tokens; "
            "0,0 for a free local model) to count it",
            stacklevel=1,
        )


def check_llm_endpoint(settings: LLMSettings) -> None:
    """Before any container starts: one small request to the model endpoint. A refusal (bad key,
    unknown model, wrong URL) or no answer stops the session with one message, instead of every
    task retrying. With --super-llm-cache an unreachable endpoint only warns (replies may all be
    cached)."""
    from pytest_super.llm import LLMClient

    with LLMClient(settings) as client:
        problem = client.preflight()
    if problem is None:
        return
    if not problem.reached and settings.cache_dir:
        warnings.warn(f"pytest-super: {problem.message} Going on with the LLM cache.", stacklevel=1)
        return
    raise pytest.UsageError(f"{problem.message} (checked before any task ran)")


def fetch_judge_rubric() -> None:
    """--super-judge-model: LMR-Bench's judge rubric fetched (or found in the cache) and read
    before any task; one that cannot be had, or has another sha256, stops the session."""
    from pytest_super.lmr.judge import JudgeError, rubric, rubric_path
    from pytest_super.reference_files import DownloadError

    try:
        rubric(rubric_path().read_text(encoding="utf-8"))
    except (DownloadError, JudgeError) as exc:
        raise pytest.UsageError(
            f"--super-judge-model: LMR-Bench's judge rubric: {exc} (checked before any task ran)"
        ) from None


@pytest.hookimpl(wrapper=True)  # around every plugin's sessionfinish, the reports' writers too
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, object, object]:
    interrupts.ignore_while_finishing(session.config)
    _stop_executor(session.config)  # before the controller's end-of-run cleanup and reports
    _well_formed_junit(session.config)  # before junitxml writes it
    run = run_of(session.config)
    if run.agent:
        last_failed.save(session.config, run.agent, run.settings.model)
    return (yield)


def _well_formed_junit(config: pytest.Config) -> None:
    """The JUnit report pytest is about to write (`--junitxml`) made well-formed whatever the task
    files are named (`sinks.xml_tree`): pytest escapes a test's name, not its `classname` or
    `file`. Reaches junitxml's private objects (pytest 9.1): its `LogXML` in the stash and each
    test case's reporter, finalized (its element built once, as junitxml does after a test's
    teardown) so that `to_xml()` answers with the element cleaned here;
    tests/attacks/test_attack_round5_output.py parses the written file."""
    from _pytest.junitxml import xml_key

    log = config.stash.get(xml_key, None)
    if log is None:
        return
    for reporter in log.node_reporters_ordered:
        reporter.finalize()
        sinks.xml_tree(reporter.to_xml())
    log.global_properties = [(sinks.xml(n), sinks.xml(v)) for n, v in log.global_properties]


def _stop_executor(config: pytest.Config) -> None:
    """Whatever ended the session: this process's executor takes no more tasks (the local one:
    the warm kernel no task took and every container still being removed are gone) before it
    ends. A worker hands the removals that failed to the controller."""
    executor = config.stash.get(pytest_side.EXECUTOR_KEY, None)
    if executor is None:
        return
    failures = executor.stop()
    workeroutput = thirdparty.worker_output(config)
    if workeroutput is not None:
        workeroutput["super_removal_failures"] = failures
    else:
        config.stash[REMOVAL_FAILURES_KEY].extend(failures)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:  # Any: xdist's WorkerController
    failures = thirdparty.node_output(node).get("super_removal_failures", [])
    node.config.stash[REMOVAL_FAILURES_KEY].extend(failures)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    failures = config.stash.get(REMOVAL_FAILURES_KEY, [])
    if failures:
        terminalreporter.section("pytest-super: container removals that failed", red=True)
        for line in failures:
            terminalreporter.write_line(console_text(line))
        terminalreporter.write_line(
            "the end-of-run cleanup retried what it found; remove what is left with "
            "`pytest-super cleanup`"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    interrupts.restore_sigterm(config)
    interrupts.restore_ctrl_c(config)
    from pytest_super.kernels import shutdown_backends

    shutdown_backends()  # each backend this process used: Docker releases its leases


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # Any: xdist's WorkerController; gets the run id
    workerinput = thirdparty.node_input(node)
    workerinput["super_run_id"] = run_of(node.config).run_id
    # and how the controller hands out items (a worker's own --dist reads "no"): ordering.for_xdist
    dist, chunk = thirdparty.distribution(node.config)
    workerinput.update(super_dist=dist, super_maxschedchunk=chunk)


def pytest_report_header(config: pytest.Config) -> list[str]:
    run = run_of(config)
    lines = options.report_header(run)
    if DURATIONS_KEY in config.stash:
        durations = config.stash[DURATIONS_KEY]
        known = f", {len(durations.seconds)} known" if durations else ""
        if durations and not durations.for_eta(run.agent, run.settings.model):
            known += " (another agent's or model's: no ETA from them)"
        lines.append(
            f"pytest-super: order {config.stash[ORDER_KEY]} "
            f"({run.sources.get('order', 'default')}); "
            f"durations: {durations.source}{known}"
        )
    if run.agent:
        lines += last_failed.header(config, run.agent, run.settings.model)
    # names the user chose, shown escaped
    return [sinks.terminal(line) for line in lines + _quiet_live_note(config)]


def _quiet_live_note(config: pytest.Config) -> list[str]:
    """--super-live under xdist prints nothing (xdist does not pass on what its workers print):
    said at the start, instead of a run that is silently quiet."""
    run = run_of(config)
    workers = thirdparty.requested_workers(config)
    executor = config.stash.get(pytest_side.EXECUTOR_KEY, None)
    remote = executor is not None and executor.remote
    if not run.live or remote or workers is None or workers < 1:
        return []
    return [
        f"pytest-super: --super-live shows no steps under xdist (-n {workers}): pytest-xdist does "
        "not pass on what its workers print; run with -n 0 to watch each step (the status line, "
        "--super-progress, shows the run)"
    ]


# -- collection ------------------------------------------------------------------------------------
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    return collect.ignore_in_task_roots(collection_path, config)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return collect.collect_task_file(file_path, parent)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    collect.add_unlisted_task_files(collector, report)
    return report


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run = run_of(config)
    tasks = [item for item in items if isinstance(item, collect.SuperTaskItem)]
    if not run.agent:
        skip = pytest.mark.skip(
            reason="no agent: run SUPER tasks with --super-agent=gold (or "
            "react, react-super, swe, reflexion with --super-model)"
        )
        for item in tasks:
            item.add_marker(skip)
        return
    if run.resume:
        _skip_finished_tasks(run, tasks)
    if config.stash.get(ORDER_KEY, "collection") != "collection":
        items[:] = _in_start_order(config, items)
    if config.pluginmanager.hasplugin("timeout") and not timeouts.user_timeout_configured(config):
        from pytest_super.agents import needs_llm

        uses_model = needs_llm(run.agent)
        for item in tasks:
            if item.get_closest_marker("timeout") is None:
                seconds = task_timeout_s(item.task, run.settings, uses_model=uses_model)
                item.add_marker(pytest.mark.timeout(seconds))


def _in_start_order(config: pytest.Config, items: list[pytest.Item]) -> list[pytest.Item]:
    """The items longest first; on an xdist worker, arranged so that the controller's scheduler
    (which hands each worker a run of consecutive items) starts the longest ones first."""
    durations = config.stash[DURATIONS_KEY]
    if not any(durations.get(item.nodeid) is not None for item in items):
        return items  # nothing known of these items (the shipped table knows SUPER's ids only)
    ordered = in_order(items, lambda item: durations.get(item.nodeid), config.stash[ORDER_KEY])
    workerinput = thirdparty.worker_input(config)
    if workerinput is None:
        return ordered
    return for_xdist(
        ordered,
        int(workerinput.get("workercount", 1)),
        workerinput.get("super_dist", "load"),
        workerinput.get("super_maxschedchunk"),
    )


def _skip_finished_tasks(run: SuperRun, items: list[collect.SuperTaskItem]) -> None:
    """--super-resume: tasks with a final result for this agent and model are skipped; their
    earlier result rides along in the skip report's properties, so the summary counts it."""
    finished = reports.final_results(
        run.report_dir, agent=run.agent or "", model=run.settings.model, exclude_run=run.run_id
    )
    for item in items:
        previous = finished.get(item.name)
        if previous is None:
            continue
        run_id, record = previous
        item.user_properties.extend((f"super.{k}", v) for k, v in record.properties.items())
        item.user_properties.append(("super.resumed_from", run_id))
        item.user_properties.append(("super.resumed_outcome", record.outcome))
        item.add_marker(pytest.mark.skip(reason=f"resumed: {record.outcome} in run {run_id}"))


# -- running ---------------------------------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    item.stash[pytest_side.NEXT_ITEM_KEY] = (
        nextitem  # whose kernel the pool makes while this item runs
    )


@pytest.hookimpl(optionalhook=True)  # pytest-timeout's: a task item's timer is ours (timeouts.py)
def pytest_timeout_set_timer(
    item: pytest.Item, settings: Any
) -> bool | None:  # Any: pytest-timeout
    return timeouts.set_task_timer(item, settings)


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    return timeouts.cancel_task_timer(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Setup and teardown errors of our own (engine down, prefix cell failed) read as sentences."""
    rep = yield
    if (
        call.when != "call"
        and call.excinfo is not None
        and isinstance(call.excinfo.value, SuperError)
    ):
        exc = call.excinfo.value
        rep.longrepr = (
            exc.error.shown() if isinstance(exc, OutcomeError) else f"{type(exc).__name__}: {exc}"
        )
    _redact_report(rep)
    _console_safe_report(rep)
    return rep


def _redact_report(rep: pytest.TestReport) -> None:
    """The run's secrets out of what pytest prints and writes of a report (failure text, captured
    output, JUnit properties), whatever put them there (an endpoint echoing the key)."""
    rep.user_properties = [(k, redaction.redact_value(v)) for k, v in rep.user_properties]
    rep.sections = [(name, redaction.redact(text)) for name, text in rep.sections]
    if rep.longrepr is not None and redaction.holds_secret(str(rep.longrepr)):
        rep.longrepr = redaction.redact(str(rep.longrepr))


def _console_safe_report(rep: pytest.TestReport) -> None:
    """No escape sequence or control character (but newline and tab) in what the console shows
    of a report: a task's output and a model's text reach the failure text, a skip's reason and
    the captured sections (`console_text`)."""
    rep.sections = [(name, console_text(text)) for name, text in rep.sections]
    longrepr = rep.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        rep.longrepr = (longrepr[0], longrepr[1], console_text(str(longrepr[2])))
    elif longrepr is not None:
        text = str(longrepr)
        safe = console_text(text)
        if safe != text:  # a traceback keeps pytest's layout unless it holds a control
            rep.longrepr = safe


# -- fixtures --------------------------------------------------------------------------------------
@pytest.fixture
def super_task(request: pytest.FixtureRequest) -> Task:
    """The task this test runs: the item's own, or the file named by @pytest.mark.super_task(path)."""
    task: Task | None = getattr(request.node, "task", None)
    if task is not None:
        return task
    marker = request.node.get_closest_marker("super_task")
    if marker is None:
        raise pytest.UsageError(
            "super_task needs a task: mark the test @pytest.mark.super_task('tasks/x.yaml')"
        )
    return load_yaml_task(Path(marker.args[0]))


@pytest.fixture
def super_kernel(request: pytest.FixtureRequest) -> Iterator[Kernel]:
    """A fresh kernel (a new container with the docker backend) for this test, removed afterwards."""
    from pytest_super.kernels import provision_kernel

    run = run_of(request.config)
    kernel = provision_kernel(run.kernel, task_id=file_stem(request.node.name))
    try:
        yield kernel
    finally:
        kernel.close()


@pytest.fixture
def super_result(request: pytest.FixtureRequest, super_task: Task) -> TaskResult:
    """The task's outcome from the run's executor (in setup, so infrastructure faults are
    errors, not failures), recorded in the item's properties and turned into pytest's outcome."""

    run: SuperRun = run_of(request.config)
    if not run.agent:
        pytest.skip("no --super-agent given")
    _stop_if_run_stopped(request, run)
    item = request.node
    # known before the episode, so a task that errors is still filed under its set and agent;
    # the record's properties are run_record.py's, as `run_tasks` writes them without pytest
    known = known_properties(run, super_task, getattr(item, "repeat", None))
    item.user_properties.extend((f"super.{k}", v) for k, v in known.items())
    outcome = pytest_side.outcome_for(request.config, run, item, super_task)
    _, properties = outcome_record(run, outcome)
    item.user_properties[:] = [p for p in item.user_properties if not p[0].startswith("super.")]
    item.user_properties.extend((f"super.{k}", v) for k, v in {**known, **properties}.items())
    result = _pytest_outcome(outcome)
    item.stash[RESULT_KEY] = result
    return result


def _pytest_outcome(outcome: TaskOutcome) -> TaskResult:
    """The one place a task's outcome becomes pytest's: its result returned, its error raised
    as a pytest error (`OutcomeError`: the error's class name, message and exit status), its
    deadline passed raised as pytest-timeout's failure (`timeouts.TaskTimedOut`)."""
    if outcome.timed_out_after_s is not None:
        failure = timeouts.TaskTimedOut(outcome.timed_out_after_s)
        failure.retried = outcome.retried
        raise failure
    if outcome.error is not None:
        raise OutcomeError(outcome.error, outcome.retried)
    assert outcome.result is not None
    return outcome.result


def _stop_if_run_stopped(request: pytest.FixtureRequest, run: SuperRun) -> None:
    """No task starts once the endpoint (the circuit breaker, llm/breaker.py) or the Docker
    engine was found down by any process of the run: the task is skipped, not recorded, so
    `--super-resume` runs it, and this process stops taking tasks."""
    message = stop_message(run)
    if message is not None:
        request.session.shouldstop = message
        pytest.skip(f"not started: {message}")
