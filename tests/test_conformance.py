"""The backend conformance suite (`pytest --pyargs pytest_super.conformance --super-backend NAME`)
run as a user runs it, in a subprocess: it passes for `local` and `docker`, skips with the
backend's own reason what a backend declares it cannot do, and fails for a backend that breaks
one rule (tests/support/broken_backend.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_super.execute import kernel_settings_for
from pytest_super.kernels.base import CAPABILITIES, KernelSettings, unsupported_capabilities
from pytest_super.kernels.docker.image import default_image_tag
from pytest_super.kernels.local import LocalBackend
from pytest_super.replay.kernel import ReplayBackend
from pytest_super.settings import SuperRun
from pytest_super.tasks import Cell, Task

ROOT = Path(__file__).resolve().parent.parent
BROKEN = "tests.support.broken_backend:StickyRestartBackend"
RESTART_TEST = "test_restart_gives_a_fresh_namespace_and_keeps_files"
LEFTOVERS_TEST = "test_cleanup_run_removes_a_kernel_never_closed"


def run_suite(
    tmp_path: Path, backend: str, path: Path = ROOT
) -> tuple[int, dict[str, tuple[str, str]], str]:
    """Run the suite in a folder of its own (no ini of ours), `path` on PYTHONPATH; return the exit
    code, each test's (outcome, message) from the JUnit XML, and the output."""
    junit = tmp_path / "junit.xml"
    pythonpath = os.pathsep.join(p for p in (str(path), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "--pyargs", "pytest_super.conformance"),
            *(f"--super-backend={backend}", "-p", "no:cacheprovider", "-q", "-rs"),
            f"--junitxml={junit}",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    cases: dict[str, tuple[str, str]] = {}
    for case in ET.parse(junit).iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome, message = child.tag, child.get("message", "")
        cases[case.get("name", "")] = (outcome, message)
    return proc.returncode, cases, output


def outcomes(cases: dict[str, tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome, _ in cases.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def test_the_suite_passes_for_the_local_backend(tmp_path: Path) -> None:
    code, cases, output = run_suite(tmp_path, "local")
    assert code == 0, output
    assert len(cases) >= 12
    assert outcomes(cases) == {"passed": len(cases) - 1, "skipped": 1}, output
    outcome, message = cases[LEFTOVERS_TEST]
    assert outcome == "skipped"
    assert (
        message
        == f"backend 'local' does not support 'leftovers': {LocalBackend.unsupported['leftovers']}"
    )


@pytest.mark.docker
def test_the_suite_passes_for_the_docker_backend(tmp_path: Path, image: str) -> None:
    started = time.perf_counter()
    code, cases, output = run_suite(tmp_path, "docker")
    elapsed = time.perf_counter() - started
    assert code == 0, output
    assert outcomes(cases) == {"passed": len(cases)}, output
    # a figure, not a bound: how long is the machine's load (issue 42); the suite's own tests
    # bound each step by behaviour (a timeout, an interrupt, a restart)
    print(f"the conformance suite took {elapsed:.0f} s against docker")


def test_the_suite_fails_for_a_backend_whose_restart_keeps_state(tmp_path: Path) -> None:
    code, cases, output = run_suite(tmp_path, BROKEN)
    assert code == 1, output
    failed = {name for name, (outcome, _) in cases.items() if outcome != "passed"}
    assert failed == {RESTART_TEST, LEFTOVERS_TEST}, output
    assert cases[RESTART_TEST][0] == "failure"
    assert "'stale' in dir()" in output  # the assertion that caught it
    assert cases[LEFTOVERS_TEST][0] == "skipped"  # inherited from the local backend


def test_a_backend_that_runs_no_code_has_every_test_skipped_with_its_reason(
    tmp_path: Path,
) -> None:
    code, cases, output = run_suite(tmp_path, "replay")
    assert code == 0, output
    # the contract's optional calls need no kernel: they are asked of every backend
    assert cases.pop("test_the_optional_calls_answer_with_the_contracts_types")[0] == "passed"
    assert {outcome for outcome, _ in cases.values()} == {"skipped"}
    reason = ReplayBackend.unsupported["code"]
    assert {message for _, message in cases.values()} == {
        f"backend 'replay' does not support 'code': {reason}"
    }


def test_a_declaration_names_known_capabilities_with_a_reason() -> None:
    assert unsupported_capabilities(LocalBackend) == {
        "leftovers": LocalBackend.unsupported["leftovers"]
    }
    assert unsupported_capabilities(LocalBackend()) == unsupported_capabilities(LocalBackend)
    assert set(unsupported_capabilities(ReplayBackend)) == set(CAPABILITIES)

    class Typo:
        unsupported = {"restrat": "no"}

    class Silent:
        unsupported = {"restart": " "}

    class Undeclared:
        pass

    assert unsupported_capabilities(Undeclared) == {}
    with pytest.raises(
        ValueError, match=r"Typo.unsupported: unknown capability 'restrat'; known: code,"
    ):
        unsupported_capabilities(Typo)
    with pytest.raises(ValueError, match=r"Silent.unsupported\['restart'\]: give the reason"):
        unsupported_capabilities(Silent)


def test_the_backend_shown_in_docs_backends_md_is_short_and_passes(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "backends.md").read_text()
    listing = re.search(r"```python\n(.*?)```", page, re.DOTALL)
    assert listing is not None, "docs/backends.md shows no backend"
    source = listing.group(1)
    assert len(source.splitlines()) < 100
    (tmp_path / "my_backend.py").write_text(source)
    code, cases, output = run_suite(tmp_path, "my_backend:ManagedBackend", path=tmp_path)
    assert code == 0, output
    assert outcomes(cases) == {"passed": len(cases) - 1, "skipped": 1}, output
    assert cases[LEFTOVERS_TEST][0] == "skipped"


class EnvironmentBackend(LocalBackend):
    """A backend whose kernels run in a named environment per image profile (`ImageBackend`)."""

    def image_for(self, settings: KernelSettings, profile: str) -> str:
        return f"conda env {profile}"


def test_the_image_a_task_names_is_its_backends_answer() -> None:
    task = Task(
        id="t",
        set="expert",
        query="q",
        answer={"x": 1},
        solution=(Cell(kind="execute", code="print(1)"),),
        image="colab",
    )

    def image(backend: str, override: str | None = None) -> str | None:
        run = SuperRun(agent="gold", kernel=KernelSettings(backend=backend, image=override))
        return kernel_settings_for(run, task).image

    assert image("docker") == default_image_tag("colab")
    assert image("docker", "mine:1") == "mine:1"
    assert image("local") == "(local kernel)"
    assert image("tests.test_conformance:EnvironmentBackend") == "conda env colab"
    # a backend without images (a third party's, the replay backend) is given no Docker tag
    assert image("tests.support.example_backend:RecordingBackend") is None
    assert image("replay", "mine:1") == "mine:1"


def test_the_backend_neutral_modules_load_nothing_of_dockers() -> None:
    """The contract's calls, made for the local backend, load nothing of Docker's; and the
    package no longer hands out Docker's names (issue 45: the shim went)."""
    code = (
        "import sys\n"
        "from pytest_super.execute import kernel_settings_for\n"
        "from pytest_super import kernels\n"
        "from pytest_super.kernels.base import KernelSettings\n"
        "local = kernels.settings_for_task(KernelSettings(backend='local'), 'default')\n"
        "assert local.image\n"
        "assert kernels.prepare_kernel_image(local, 'default') is None\n"
        "kernels.backend_resources(local), kernels.node_options(local)\n"
        "kernels.is_engine_fault(local, OSError()), kernels.engine_problem(local)\n"
        "kernels.cleanup_all(local), kernels.shutdown_backends()\n"
        "print(sorted(m for m in sys.modules if m.startswith('pytest_super.kernels.docker')))\n"
        "print(sorted(m for m in sys.modules if m == 'docker' or m.startswith('docker.')))\n"
        "for name in ('LABEL_RUN', 'cleanup_containers', 'docker_client', 'no_such_name'):\n"
        "    try:\n"
        "        getattr(kernels, name)\n"
        "    except AttributeError as exc:\n"
        "        print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "[]",
        "[]",
        "module 'pytest_super.kernels' has no attribute 'LABEL_RUN'",
        "module 'pytest_super.kernels' has no attribute 'cleanup_containers'",
        "module 'pytest_super.kernels' has no attribute 'docker_client'",
        "module 'pytest_super.kernels' has no attribute 'no_such_name'",
    ]
