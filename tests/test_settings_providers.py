"""Providers own their settings (settings/providers.py): a kernel backend declares them on its class
as an executor does, and they are options, ini keys and `SuperRun.resolve` keywords resolved with
the table's precedence and messages, held in `SuperRun.backend_settings`, found without importing
a heavy library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super.settings import SettingError, SuperRun
from tests.support.toy_providers import COUNT_SCANS, install_toy_provider

pytest_plugins = ["pytester"]

TOY_BACKEND = """\
from pytest_super.kernels.local import LocalBackend
from pytest_super.settings import Setting, number_reader
from pytest_super.tasks.model import Bounds


class ToyBackend(LocalBackend):
    settings = (
        Setting(
            "{name}",
            number_reader(Bounds(1, 8, whole=True)),
            2,
            "depth of the toy backend's boxes",
            env=("TOY_DEPTH",),
            metavar="N",
        ),
    )
"""

#: the project's conftest shows what the run holds of the backend's settings
HEADER_CONFTEST = """\
from pytest_super.options import run_of


def pytest_report_header(config):
    run = run_of(config)
    toy = {k: v for k, v in run.backend_settings.items() if k.startswith("toy")}  # not docker's
    return [f"toy: {toy} from {run.sources.get('toy_depth')}"]
"""

TASK = """\
id: t
query: 'Report x as a json structured as follows: {"x": 0}.'
answer: {x: 1}
solution:
  - execute: print('{"x": 1}')
"""


def _install_toy_backend(site: Path, setting: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party kernel backend declaring the setting `setting`, an entry point of
    `pytest_super.backends`."""
    source = TOY_BACKEND.format(name=setting)
    target = "toy_backend:ToyBackend"
    install_toy_provider(
        site, monkeypatch, group="pytest_super.backends", target=target, source=source
    )


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".yaml", **{"tasks/expert/t": TASK})
    pytester.makeconftest(HEADER_CONFTEST)
    return pytester


def _toy_line(result: pytest.RunResult) -> str:
    (line,) = [line for line in result.outlines if line.startswith("toy: ")]
    return line


def test_a_backend_declares_its_own_settings(project, tmp_path, monkeypatch):
    """A backend's `settings` are `--super-*` options and ini keys with an environment variable,
    resolved as the table's are (option > environment > ini > default), held in
    `run.backend_settings`; a bad value is the usage error an option of the table gives."""
    _install_toy_backend(tmp_path / "site", "toy_depth", monkeypatch)
    monkeypatch.delenv("TOY_DEPTH", raising=False)
    args = ["--collect-only", "--super-agent=gold", "--super-backend=toy"]
    project.makefile(".ini", pytest="[pytest]\nsuper_tasks = tasks\n")
    result = project.runpytest_subprocess(*args)
    assert _toy_line(result) == "toy: {'toy_depth': 2} from default"
    project.makefile(".ini", pytest="[pytest]\nsuper_tasks = tasks\nsuper_toy_depth = 3\n")
    result = project.runpytest_subprocess(*args)
    assert _toy_line(result) == "toy: {'toy_depth': 3} from ini super_toy_depth (pytest.ini)"
    monkeypatch.setenv("TOY_DEPTH", "5")
    result = project.runpytest_subprocess(*args)
    assert _toy_line(result) == "toy: {'toy_depth': 5} from environment variable TOY_DEPTH"
    result = project.runpytest_subprocess(*args, "--super-toy-depth=7")
    assert _toy_line(result) == "toy: {'toy_depth': 7} from --super-toy-depth"
    result = project.runpytest_subprocess(*args, "--super-toy-depth=9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--super-toy-depth 9: expected a whole number from 1 to 8*"])


@pytest.mark.parametrize(
    ("name", "owner"), [("mem", "pytest-super's"), ("ray_address", "executor 'ray''s")]
)
def test_a_backend_may_not_take_a_setting_that_is_already_one(
    project, tmp_path, monkeypatch, name, owner
):
    _install_toy_backend(tmp_path / "site", name, monkeypatch)
    result = project.runpytest_subprocess("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*kernel backend 'toy' declares the setting {name!r}, which is {owner} already*"]
    )


SCRIPT = """\
import sys
from pathlib import Path
from pytest_super.settings import SettingError, SuperRun

root = Path(sys.argv[1])
run = SuperRun.resolve(root, backend="toy", toy_depth="4")
toy = lambda held: {k: v for k, v in held.items() if k.startswith("toy")}  # not docker's
print(toy(run.backend_settings), run.sources["toy_depth"], dict(run.kernel.options))
print(toy(SuperRun().backend_settings))
try:
    SuperRun.resolve(root, backend="toy", toy_depth="0")
except SettingError as exc:
    print(exc)
"""


def test_a_script_resolves_a_backends_settings_as_pytest_does(tmp_path, monkeypatch):
    _install_toy_backend(tmp_path / "site", "toy_depth", monkeypatch)
    monkeypatch.delenv("TOY_DEPTH", raising=False)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "pytest.ini").write_text("[pytest]\nsuper_toy_depth = 3\n")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "project")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    assert out == [
        "{'toy_depth': 4} SuperRun.resolve(toy_depth=...) {'toy_depth': 4}",
        "{'toy_depth': 2}",
        "SuperRun.resolve(toy_depth=...) 0: expected a whole number from 1 to 8",
    ]


#: what no pytest start may import to find the providers' settings
HEAVY = ("docker", "jupyter_client", "ray", "pytest_super.kernels.docker.backend")


def test_the_providers_settings_are_found_without_importing_a_heavy_library():
    code = (
        "import sys\n"
        "from pytest_super.settings import all_settings, provider_settings\n"
        "provider_settings('executor'), provider_settings('backend'), all_settings()\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_each_built_in_provider_declares_on_its_class_what_is_found():
    """What `provider_settings` finds of a built-in provider is its class's `settings` (a
    built-in backend's come from `BUILTIN_BACKEND_SETTINGS`, without importing it)."""
    from pytest_super import executors, kernels
    from pytest_super.registry import Registry
    from pytest_super.settings import provider_settings
    from pytest_super.settings.providers import as_settings

    found = provider_settings("backend")
    for name in kernels.BACKENDS:
        declared = getattr(kernels.kernel_backend_class(name), "settings", ()) or ()
        assert found.get(name, ()) == as_settings(declared), name  # kernels' BackendSetting
    registry = Registry("executor", "executors", executors.ENTRY_POINT_GROUP, executors.EXECUTORS)
    found = provider_settings("executor")
    for name in executors.EXECUTORS:
        declared = tuple(getattr(registry.find(name), "settings", ()) or ())
        assert found.get(name, ()) == declared, name
    assert found["ray"], "the Ray executor declares its address and concurrency"


@pytest.mark.parametrize(
    ("kind", "name", "value"),
    [
        ("executor", "ray_concurrency", -1),
        ("executor", "ray_concurrency", 100_001),
        ("backend", "registry", "http://registry.example.org"),
    ],
)
def test_a_superrun_built_directly_refuses_a_providers_value_its_option_refuses(
    tmp_path, kind, name, value
):
    """Issue 45: `SuperRun(executor_settings={"ray_concurrency": -1})` was accepted unchecked.
    Built directly, it says what `SuperRun.resolve` (the option path) says, with its own source in
    the place of the option's."""
    field = f"{kind}_settings"
    with pytest.raises(SettingError) as direct:
        SuperRun(**{field: {name: value}})
    with pytest.raises(SettingError) as resolved:
        SuperRun.resolve(rootdir=tmp_path, **{name: value})
    said, source = str(direct.value), f"SuperRun({field}={{{name!r}: ...}})"
    assert said.startswith(source), said
    assert said.removeprefix(source) == str(resolved.value).removeprefix(
        f"SuperRun.resolve({name}=...)"
    )


def test_a_superrun_built_directly_refuses_a_setting_no_provider_declares() -> None:
    with pytest.raises(SettingError) as caught:
        SuperRun(executor_settings={"ray_concurency": 4})
    assert str(caught.value) == (
        "SuperRun(executor_settings={'ray_concurency': ...}): no executor declares the setting "
        "'ray_concurency' (known: ray_address, ray_concurrency)"
    )
    with pytest.raises(SettingError, match=r"'4': a str, where the setting holds a int \(4\)"):
        SuperRun(executor_settings={"ray_concurrency": "4"})
    run = SuperRun(executor="ray", executor_settings={"ray_concurrency": 4, "ray_address": "h:1"})
    assert dict(run.executor_settings) == {"ray_concurrency": 4, "ray_address": "h:1"}


#: runs pytest in this process, counting the calls of `importlib.metadata.entry_points` that
#: pytest-super makes (each reads every installed distribution's metadata)
COUNT_SCANS_IN_PYTEST = (
    COUNT_SCANS
    + """\
import pytest

code = pytest.main(sys.argv[1:])
print(f"entry-point scans: {len(scans)} {scans}")
sys.exit(code)
"""
)


def test_one_entry_point_scan_serves_every_group_at_a_pytest_start(project, tmp_path, monkeypatch):
    """Issue 45: at every pytest start the executors' settings and the backends' each scanned the
    installed packages' entry points, and finding a third-party backend scanned them again; one
    scan serves every group now (registry.py)."""
    _install_toy_backend(tmp_path / "site", "toy_depth", monkeypatch)
    monkeypatch.delenv("TOY_DEPTH", raising=False)
    project.makefile(".ini", pytest="[pytest]\nsuper_tasks = tasks\n")
    script = tmp_path / "count_scans.py"
    script.write_text(COUNT_SCANS_IN_PYTEST)
    args = ["--collect-only", "-p", "no:cacheprovider", "--super-agent=gold", "--super-backend=toy"]
    done = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "toy: {'toy_depth': 2} from default" in done.stdout, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("entry-point scans")]
    assert line == "entry-point scans: 1 [{}]"


def test_a_module_imported_beside_the_metadata_writes_its_bytecode_and_no_scan_follows(
    tmp_path, monkeypatch
):
    """Issue 42: the scan's cache was keyed by the mtime of each folder holding metadata, and a
    module imported from such a folder writes its `__pycache__` there: with bytecode written
    (as `make` now does), a pytest start with a third-party backend scanned twice. A distribution
    installed into that folder is still seen at the next look-up."""
    from pytest_super import registry

    site = tmp_path / "site"
    _install_toy_backend(site, "toy_depth", monkeypatch)
    monkeypatch.syspath_prepend(str(site))
    scans: list[None] = []
    scan = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda: scans.append(None) or scan())
    group = "pytest_super.backends"
    assert "toy" in registry.entry_points_of(group)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    try:
        registry.entry_points_of(group)["toy"].load()  # imports toy_backend from the folder
    finally:
        sys.modules.pop("toy_backend", None)
    assert [p.parent.name for p in site.glob("__pycache__/toy_backend.*.pyc")] == ["__pycache__"]
    assert "toy" in registry.entry_points_of(group)
    assert len(scans) == 1
    info = site / "other_toy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other-toy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\nother = toy_backend:ToyBackend\n")
    assert {"toy", "other"} <= set(registry.entry_points_of(group))
    assert len(scans) == 2
