"""thirdparty.py, the one adapter to other plugins' internals, pinned to the versions we support:
the installed pytest-xdist and pytest-timeout are in pyproject.toml's range, and every private
name thirdparty.py touches exists with the shape it uses. Each failure names the attribute and
the installed version, so an upgrade that moves one fails here, not in a user's run."""

from __future__ import annotations

import inspect
import json
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
import pytest_timeout  # type: ignore[import-untyped]
import xdist.dsession  # type: ignore[import-untyped]
from packaging.requirements import Requirement
from packaging.version import Version

from pytest_super import thirdparty

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_super"
XDIST = metadata.version("pytest-xdist")
TIMEOUT = metadata.version("pytest-timeout")


def pinned(distribution: str) -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (requirement,) = [Requirement(d) for d in deps if Requirement(d).name == distribution]
    return requirement


@pytest.mark.parametrize(
    ("distribution", "checked"),
    [("pytest-xdist", thirdparty.XDIST_CHECKED), ("pytest-timeout", thirdparty.TIMEOUT_CHECKED)],
)
def test_the_installed_versions_are_the_supported_ones(distribution: str, checked: str) -> None:
    installed = Version(metadata.version(distribution))
    requirement = pinned(distribution)
    assert requirement.specifier.contains(installed), (
        f"{distribution} {installed} is outside pyproject.toml's {requirement}"
    )
    assert Version(checked) in requirement.specifier, f"{checked} checked, pinned {requirement}"
    assert installed.major == Version(checked).major, (
        f"{distribution} {installed}: thirdparty.py was checked against {checked}; a new major "
        "version: check every private name it uses, then raise *_CHECKED"
    )


# -- pytest-timeout ---------------------------------------------------------------------------
def test_get_env_settings_returns_a_settings_with_the_fields_used(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_TIMEOUT", "7")
    config = pytester.parseconfigure()
    settings = pytest_timeout.get_env_settings(config)
    assert isinstance(settings, pytest_timeout.Settings), (
        f"pytest_timeout.get_env_settings returned {type(settings)} in {TIMEOUT}"
    )
    for field in ("timeout", "method", "func_only"):
        assert field in settings._fields, f"pytest_timeout.Settings.{field} gone in {TIMEOUT}"
    assert settings.timeout == 7.0
    assert thirdparty.configured_timeout_s(config) == 7.0


SHOW_DEADLINES = """
import json, pathlib, pytest
from pytest_super import thirdparty

APPLIED, OURS = {}, {}

@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):  # pytest-timeout calls it for a deadline > 0 only
    APPLIED[item.name] = settings.timeout

def pytest_runtest_call(item):
    OURS[item.name] = thirdparty.item_deadline_s(item)

def pytest_collection_modifyitems(items):
    for item in items:
        thirdparty.item_deadline_s(item)  # read (and kept) before a default marker is added
        if item.name == "test_default":
            item.add_marker(pytest.mark.timeout(11))

def pytest_sessionfinish(session):
    pathlib.Path("deadlines.json").write_text(json.dumps({"applied": APPLIED, "ours": OURS}))
"""

TESTS = """
import pytest

def test_plain(): pass

def test_default(): pass

@pytest.mark.timeout(3)
def test_marked(): pass

@pytest.mark.timeout(0)
def test_off(): pass

@pytest.mark.timeout(method="thread")
def test_method_only(): pass
"""


@pytest.mark.parametrize(
    ("args", "env", "ini", "plain"),
    [
        ((), None, None, None),
        (("--timeout=5",), None, None, 5.0),
        ((), "6", None, 6.0),
        ((), None, "8", 8.0),
        (("--timeout=5",), "6", "8", 5.0),
        (("--timeout=0",), None, None, None),
    ],
    ids=["nothing", "option", "env", "ini", "option-first", "zero"],
)
def test_item_deadline_is_the_one_pytest_timeout_applies(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    env: str | None,
    ini: str | None,
    plain: float | None,
) -> None:
    """Compared with the settings pytest-timeout hands its own timer hook, for the marker, the
    option, the environment, the ini file, 0 and a marker added after a first read."""
    monkeypatch.delenv("PYTEST_TIMEOUT", raising=False)
    if env is not None:
        monkeypatch.setenv("PYTEST_TIMEOUT", env)
    if ini is not None:
        pytester.makeini(f"[pytest]\ntimeout = {ini}\n")
    pytester.makeconftest(SHOW_DEADLINES)
    pytester.makepyfile(test_it=TESTS)
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    seen = json.loads((pytester.path / "deadlines.json").read_text())
    ours, applied = seen["ours"], seen["applied"]
    assert len(ours) == 5
    for name, deadline in ours.items():
        assert deadline == applied.get(name), f"{name}: pytest-timeout {applied}, ours {ours}"
    assert ours["test_plain"] == plain
    assert ours["test_method_only"] == plain
    assert ours["test_default"] == 11.0
    assert ours["test_marked"] == 3.0
    assert ours["test_off"] is None


def test_without_pytest_timeout_no_item_has_a_deadline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it="import pytest\n@pytest.mark.timeout(3)\ndef test_a(): pass\n")
    items, _ = pytester.inline_genitems("-p", "no:timeout")
    assert thirdparty.item_deadline_s(items[0]) is None


# -- pytest-xdist -----------------------------------------------------------------------------
def test_dsession_keeps_its_worker_events_in_a_queue() -> None:
    """`DSession.queue` and `_active_nodes` are set in its constructor (read, not run: a
    DSession needs a controller's config)."""
    source = inspect.getsource(xdist.dsession.DSession.__init__)
    for attribute in ("self.queue", "self._active_nodes"):
        assert re.search(rf"{re.escape(attribute)}\s*[:=]", source), (
            f"xdist.dsession.DSession: {attribute} gone in pytest-xdist {XDIST}"
        )
    assert re.search(r"self\.queue\b[^=\n]*= (queue\.)?Queue\(\)", source), (
        f"DSession.queue is no queue.Queue in pytest-xdist {XDIST}"
    )
    assert re.search(r"self\.queue\.get\(", inspect.getsource(xdist.dsession.DSession))


SHOW_WORKERS = """
import json, pathlib, queue
import pytest
from pytest_super import thirdparty

def pytest_xdist_node_collection_finished(node, ids):
    config = node.config
    events = thirdparty.undispatched_worker_events(config)
    pathlib.Path("workers.json").write_text(json.dumps({
        "queue": isinstance(events, queue.Queue),
        "plugin": type(config.pluginmanager.getplugin("dsession")).__name__,
        "active": thirdparty.active_worker_count(config),
        "fd": thirdparty.terminal_fd(config),
        "process": thirdparty.worker_process(node) is not None
        and thirdparty.worker_process(node).poll() is None,
    }))
"""


def test_the_xdist_controller_has_what_thirdparty_reads(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SHOW_WORKERS)
    pytester.makepyfile(test_it="def test_a(): pass\n")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    seen = json.loads((pytester.path / "workers.json").read_text())
    assert seen["plugin"] == "DSession", f"xdist's 'dsession' plugin in {XDIST}: {seen}"
    assert seen["queue"], f"DSession.queue no queue.Queue in pytest-xdist {XDIST}"
    assert seen["active"] >= 1, f"DSession._active_nodes empty in pytest-xdist {XDIST}"
    assert seen["fd"] != 2, f"CaptureManager._global_capturing.err.targetfd_save: {seen}"
    assert seen["process"], f"WorkerController.gateway._io.popen (execnet) moved: {seen}"


def test_without_xdist_there_is_no_queue(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure("-p", "no:xdist")
    assert thirdparty.undispatched_worker_events(config) is None
    assert thirdparty.active_worker_count(config) == 0


# -- the rest of the package goes through thirdparty -------------------------------------------
PRIVATE_USE = re.compile(
    r"import pytest_timeout|pytest_timeout\.|getplugin\(\"dsession\"\)|_global_capturing"
)


def test_no_other_module_reaches_into_these_plugins() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "thirdparty.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE_USE.search(line)
    ]
    assert not offenders, "use pytest_super/thirdparty.py:\n" + "\n".join(offenders)


# -- pytest's junitxml ------------------------------------------------------------------------
def test_pytests_junit_writer_has_the_shape_used() -> None:
    from _pytest import junitxml

    assert isinstance(getattr(junitxml, "xml_key", None), pytest.StashKey), (
        f"_pytest.junitxml.xml_key gone in pytest {pytest.__version__}"
    )
    for owner, names in (
        (junitxml.LogXML, ("add_global_property", "node_reporter")),
        (junitxml._NodeReporter, ("add_attribute", "append")),
    ):
        for name in names:
            assert callable(getattr(owner, name, None)), (
                f"{owner.__name__}.{name} gone in pytest {pytest.__version__}"
            )
    writer = junitxml.LogXML("x.xml", None)
    assert writer.family == "xunit1" and hasattr(writer, "global_properties")
