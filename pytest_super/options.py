"""The plugin's settings under pytest: every `--super-*` option and its `super_*` ini key are
declared from the settings package's `SETTINGS` table (and the providers' own settings), and
resolved once at start-up into one `SuperRun` by the settings package's `resolve_run`, the code
`SuperRun.resolve` runs for a script (option > environment variable > ini file > default; a bad
value is a usage error naming where it came from). Nothing else in the package reads pytest's
options.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pytest_super import executors, thirdparty, timeouts
from pytest_super.paths import shown_path
from pytest_super.redaction import masked_url
from pytest_super.settings import (
    DEFAULT_DISK,
    MEMORY_BOUNDS,
    SETTINGS,
    TRUSTED_AGENTS,
    Inputs,
    Setting,
    SettingError,
    SuperRun,
    all_settings,
    engine_address_of,
    find_ini,
    memory_size,
    new_run_id,
    resolve_run,
)

__all__ = [
    "DEFAULT_DISK",
    "MEMORY_BOUNDS",
    "RUN_KEY",
    "SETTINGS",
    "TRUSTED_AGENTS",
    "Setting",
    "SuperRun",
    "add_options",
    "make_run",
    "memory_size",
    "new_run_id",
    "run_of",
]

#: where the run's settings are kept for every hook and fixture
RUN_KEY = pytest.StashKey[SuperRun]()


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
    settings = _all_settings()  # the table's, then each executor's own
    for s in settings:
        if not s.boolean:
            g.addoption(s.flag, dest=s.dest, metavar=s.metavar, help=s.help)
    g.addoption(
        "--super-git-mirror",
        action="append",
        default=[],
        metavar="PREFIX=DIR",
        help="clone PREFIX<name> from DIR/<name> inside kernels (repeatable; ini "
        "super_git_mirrors)",
    )
    for s in settings:  # the on/off ones: --super-NAME (and --no-super-NAME with an ini key)
        if s.boolean:
            action = argparse.BooleanOptionalAction if s.ini else "store_true"
            g.addoption(s.flag, dest=s.dest, action=action, default=None, help=s.help)
    for s in sorted(settings, key=lambda s: s.boolean):  # the on/off ones' last, as their options
        if s.ini:
            parser.addini(s.dest, s.help, default=None)
    parser.addini("super_tasks", "folders holding task files", type="paths", default=["tasks"])
    parser.addini("super_git_mirrors", "PREFIX=DIR git mirrors", type="linelist", default=[])


def _all_settings() -> tuple[Setting, ...]:
    """The settings there are; an executor's that clashes is a usage error naming it."""
    try:
        return all_settings()
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None


def run_of(config: pytest.Config) -> SuperRun:
    """The run's settings, made once in `pytest_configure` (`configure`)."""
    return config.stash[RUN_KEY]


def configure(config: pytest.Config, run_id: str) -> SuperRun:
    """Resolve the settings once, keep them in the config's stash, and set the pytest options a
    benchmark run implies: the ini's task folders when no paths were given, and one broken task
    file never stopping the others."""
    run = config.stash[RUN_KEY] = make_run(config, run_id)
    timeouts.check_user_timeout(config)
    if not thirdparty.is_worker(config):
        _say_if_invocation_ini_unread(config, run)
    if (run.agent or run.sets) and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(p) for p in run.task_roots]
    if run.agent:
        config.option.continue_on_collection_errors = True
    return run


def _say_if_invocation_ini_unread(config: pytest.Config, run: SuperRun) -> None:
    """pytest takes its config file and rootdir from the paths named (the run and its reports
    follow it): when those lie outside the project pytest is started in, the project's config file
    is read by neither, and the reports go under a rootdir pytest guessed (the paths' common
    ancestor with the working folder). Say so once, with the option that reads that file."""
    if config.inipath is not None:
        return
    try:
        ini = find_ini(config.invocation_params.dir)
    except SettingError:  # a file pytest did not read either: not this run's concern
        return
    if ini.path is None or not any(key.startswith("super_") for key in ini.values):
        return
    config.issue_config_time_warning(
        pytest.PytestConfigWarning(
            f"{ini.path} was not read (by pytest or pytest-super): the paths named lie "
            f"outside {ini.path.parent}, so pytest found no config file and took "
            f"{config.rootpath} as its rootdir; reports go to {run.report_dir}. To run with that "
            f"file's settings, add `-c {ini.path}` (its folder becomes the rootdir)."
        ),
        stacklevel=2,
    )


def collecting_only(config: pytest.Config) -> bool:
    """`--collect-only`: nothing runs, so nothing is checked against an endpoint."""
    return bool(config.option.collectonly)


def continues_after_collection_errors(config: pytest.Config) -> bool:
    """`--continue-on-collection-errors` (set for every benchmark run by `configure`)."""
    return bool(config.option.continue_on_collection_errors)


def make_run(config: pytest.Config, run_id: str) -> SuperRun:
    """The run's settings, resolved by the settings package's `resolve_run` (the code `SuperRun.resolve`
    runs for a script) from pytest's options, ini file and the environment; a bad value is a
    usage error with the message naming its source."""
    try:
        return resolve_run(_inputs(config), run_id)
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None


def _inputs(config: pytest.Config) -> Inputs:
    workerinput = thirdparty.worker_input(config)

    def warn(message: str) -> None:
        config.issue_config_time_warning(pytest.PytestConfigWarning(message), stacklevel=2)

    return Inputs(
        given=lambda name: config.getoption("super_" + name),
        given_source=lambda name: "--super-" + name.replace("_", "-"),
        ini=lambda key: config.getini(key),
        ini_label=f" ({config.inipath.name})" if config.inipath else "",
        rootpath=config.rootpath,
        invocation_dir=config.invocation_params.dir,
        task_roots=tuple(Path(config.rootpath, p).resolve() for p in config.getini("super_tasks")),
        worker=workerinput["workerid"] if workerinput else "main",
        capture_no=config.getoption("capture") == "no",
        warn=warn,
    )


def report_header(run: SuperRun) -> list[str]:
    """What `pytest_report_header` shows of the run: agent, model, backend (and the executor with
    what it says of itself, when tasks run elsewhere), image, run id."""
    if not run.agent:
        return ["pytest-super: no --super-agent (task items are skipped)"]
    backend = run.backend
    elsewhere = executors.described(run)
    if elsewhere:
        backend += f", {elsewhere}"
    elif engine := engine_address_of(run.kernel.backend, run.kernel.options):
        backend += f" at {masked_url(engine)}"
    return [
        f"pytest-super: agent {run.agent}, model {run.settings.model or '-'}, backend {backend}, "
        f"image {run.kernel.image or '(the default kernel image)'}",
        f"pytest-super: run {run.run_id}, reports in {shown_path(run.run_dir)}",
        f"pytest-super: prompts {run.settings.options.prompts.label}",
    ]
