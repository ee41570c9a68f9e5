"""Kernel backends by name: the built-ins, entry points of `pytest_super.backends`, `module:Class`;
and a third-party backend (tests/support/example_backend.py) run by pytest, its lifecycle calls
read against the contract on `KernelBackend`."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_super import kernels
from pytest_super.agents import known_agent_names, load_agent
from pytest_super.kernels import (
    kernel_backend,
    kernel_backend_class,
    known_backend_names,
    provision_kernel,
)
from pytest_super.kernels.base import Kernel, KernelBackend, KernelSettings
from pytest_super.kernels.local import LocalBackend
from tests.support.example_backend import LOG_VARIABLE, RecordingBackend, RecordingKernel
from tests.support.projects import PASS, make_project, only_run_dir, outcomes, run_pytest, task_yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "tests.support.example_backend:RecordingBackend"


@pytest.fixture(autouse=True)
def fresh_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no backend made in this process (one instance per process)."""
    monkeypatch.setattr(kernels, "_instances", {})


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the example backend records its calls in."""
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv(LOG_VARIABLE, str(path))
    return path


def read_calls(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def install_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group: str, entries: dict[str, str]
) -> None:
    """An installed distribution (a dist-info folder on sys.path) registering `entries`."""
    dist = tmp_path / "example_backend-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: example-backend\nVersion: 0.1\n")
    lines = [f"[{group}]", *(f"{name} = {target}" for name, target in entries.items())]
    with (dist / "entry_points.txt").open("a") as f:
        f.write("\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))


# -- the registry -----------------------------------------------------------------------------------


def test_builtins_come_first_and_an_unknown_name_lists_the_known_ones() -> None:
    assert known_backend_names()[:2] == ["docker", "local"]
    assert kernel_backend_class("local") is LocalBackend
    assert kernel_backend_class("docker").__name__ == "DockerBackend"
    assert isinstance(kernel_backend(KernelSettings(backend="local")), LocalBackend)
    with pytest.raises(ValueError) as caught:
        kernel_backend(KernelSettings(backend="nosuch"))
    assert str(caught.value) == (
        "unknown kernel backend 'nosuch'; known kernel backends: docker, local, replay, or give "
        "`package.module:Class`"
    )


def test_a_module_class_backend_is_made_once_per_process(calls: Path) -> None:
    assert kernel_backend_class(EXAMPLE) is RecordingBackend
    backend = kernel_backend(KernelSettings(backend=EXAMPLE))
    assert isinstance(backend, RecordingBackend) and isinstance(backend, KernelBackend)
    assert kernel_backend(KernelSettings(backend=EXAMPLE, run_id="other")) is backend
    assert [c["call"] for c in read_calls(calls)] == ["init"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "tests.support.example_backend:RecordingKernel",
            "kernel backend 'tests.support.example_backend:RecordingKernel' "
            "(tests.support.example_backend.RecordingKernel) is not a kernel backend: it needs the "
            "methods `provision`, `cleanup_run` and `cleanup_dead_runs`",
        ),
        ("tests.support.example_backend:LOG_VARIABLE", "is not a kernel backend"),
        ("tests.support.example_backend:Missing", "module 'tests.support.example_backend' has no"),
        ("tests.support.no_such_module:Backend", "cannot import module 'tests.support.no_such"),
        (":Backend", "give `package.module:Class`"),
    ],
)
def test_what_is_not_a_backend_is_refused_before_it_is_made(
    spec: str, message: str, calls: Path
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kernel_backend(KernelSettings(backend=spec))
    assert kernels._instances == {}


def test_entry_points_register_backends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_entry_points(
        tmp_path,
        monkeypatch,
        kernels.ENTRY_POINT_GROUP,
        {
            "recording": EXAMPLE,
            "broken": "tests.support.no_such_module:Backend",
            "local": EXAMPLE,  # a built-in name is never taken over
        },
    )
    assert known_backend_names() == ["docker", "local", "replay", "broken", "recording"]
    assert kernel_backend_class("recording") is RecordingBackend
    assert kernel_backend_class("local") is LocalBackend
    assert isinstance(kernel_backend(KernelSettings(backend="recording")), RecordingBackend)
    with pytest.raises(ValueError, match="kernel backend 'broken': entry point .* does not load"):
        kernel_backend_class("broken")
    with pytest.raises(
        ValueError, match="known kernel backends: docker, local, replay, broken, recording"
    ):
        kernel_backend_class("nosuch")


def test_agents_are_found_the_same_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_entry_points(
        tmp_path,
        monkeypatch,
        "pytest_super.agents",
        {"replayer": "pytest_super.agents.gold:GoldAgent"},
    )
    assert known_agent_names()[-1] == "replayer"
    assert load_agent("replayer").name == "gold"


def test_an_entry_point_backend_runs_a_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: Path
) -> None:
    install_entry_points(tmp_path, monkeypatch, kernels.ENTRY_POINT_GROUP, {"recording": EXAMPLE})
    settings = KernelSettings(backend="recording", run_id="r1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the local backend's: it isolates nothing
        kernel = provision_kernel(settings, task_id="adder")
    try:
        assert isinstance(kernel, RecordingKernel) and isinstance(kernel, Kernel)
        result = kernel.execute("print(2 + 3)", timeout=30)
        assert (result.status, result.output.strip()) == ("ok", "5")
    finally:
        kernel.close()
    kernel.close()  # safe twice
    assert not kernel.is_alive()
    assert [(c["call"], c.get("task_id"), c.get("run_id")) for c in read_calls(calls)] == [
        ("init", None, None),
        ("provision", "adder", "r1"),
        ("close", None, None),
        ("close", None, None),
    ]


# -- a pytest run with the third-party backend ------------------------------------------------------


def test_a_pytest_run_with_a_third_party_backend_follows_the_lifecycle(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    project = make_project(
        tmp_path / "project",
        {"expert/first": task_yaml("first", PASS), "expert/second": task_yaml("second", PASS)},
    )
    log = tmp_path / "calls.jsonl"
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    code, output = run_pytest(
        project,
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--super-agent=gold",
        f"--super-backend={EXAMPLE}",
        env={LOG_VARIABLE: str(log), "PYTHONPATH": path},
        timeout=180,
    )
    assert code == 0, output
    run_dir = only_run_dir(project)
    assert outcomes(run_dir) == {"first": "passed", "second": "passed"}

    recorded = read_calls(log)
    controller = [c for c in recorded if c["worker"] == "main"]
    workers = [c for c in recorded if c["worker"] != "main"]
    # per run, on the controller: the dead runs' leftovers first, this run's at the very end
    assert [c["call"] for c in controller] == ["init", "cleanup_dead_runs", "cleanup_run"]
    assert controller[-1]["run_id"] == run_dir.name
    assert recorded[-1] == controller[-1]  # after every worker closed its kernels
    # per task, on the workers: one backend each, a kernel provisioned per task, each closed
    assert {c["worker"] for c in workers} <= {"gw0", "gw1"}
    by_process: dict[int, list[dict[str, Any]]] = {}
    for c in workers:
        by_process.setdefault(c["pid"], []).append(c)
    for process_calls in by_process.values():
        assert process_calls[0]["call"] == "init"
        assert [c["call"] for c in process_calls].count("init") == 1
        made = {c["kernel"] for c in process_calls if c["call"] == "provision"}
        closed = {c["kernel"] for c in process_calls if c["call"] == "close"}
        assert made == closed
    provisions = [c for c in workers if c["call"] == "provision"]
    assert sorted(c["task_id"] for c in provisions) == ["first", "second"]
    assert {c["run_id"] for c in provisions} == {run_dir.name}
