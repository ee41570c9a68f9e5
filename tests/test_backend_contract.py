"""The backend contract's optional calls (issue 45 item 2): what the rest of the code asks a
backend through `pytest_super.kernels` (prepare_kernel_image, cleanup_all, shutdown_backends,
backend_resources, is_engine_fault, engine_problem, node_options). A third party's backend with
only provision/cleanup_run/cleanup_dead_runs gets the defaults; a backend's own methods are
called; the Docker backend answers them without a container. No Docker engine is needed."""

from __future__ import annotations

import dataclasses
import pickle
import socket
import warnings
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests.exceptions

from pytest_super import kernels
from pytest_super.errors import EngineUnavailable, InfrastructureError
from pytest_super.kernels.base import (
    BackendBase,
    BackendResources,
    BackendSetting,
    Kernel,
    KernelSettings,
    PreparedImage,
)
from pytest_super.kernels.docker.backend import DockerBackend
from pytest_super.kernels.docker.settings import DockerOptions, docker_options
from tests.support.example_backend import LOG_VARIABLE

EXAMPLE = "tests.support.example_backend:RecordingBackend"
HERE = __name__


@pytest.fixture(autouse=True)
def fresh_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no backend made in this process (one instance per process)."""
    monkeypatch.setattr(kernels, "_instances", {})


def test_a_backend_with_only_the_three_calls_gets_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_VARIABLE, str(tmp_path / "calls.jsonl"))
    settings = KernelSettings(backend=EXAMPLE)
    backend = kernels.kernel_backend(settings)
    assert not isinstance(backend, BackendBase)
    assert kernels.prepare_kernel_image(settings, "default") is None
    assert kernels.cleanup_all(settings) == []  # its cleanup_dead_runs
    assert "cleanup_dead_runs" in (tmp_path / "calls.jsonl").read_text()
    assert kernels.backend_resources(settings) == BackendResources()
    assert kernels.is_engine_fault(settings, EngineUnavailable("gone"))
    assert kernels.is_engine_fault(settings, wrapped(EngineUnavailable("gone")))
    assert not kernels.is_engine_fault(settings, InfrastructureError("a task's"))
    assert not kernels.is_engine_fault(settings, ValueError("a bug"))
    assert kernels.engine_problem(settings) == ""
    assert kernels.node_options(settings) == {}
    kernels.shutdown_backends()  # nothing to shut down: no error


def wrapped(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise RuntimeError("while starting a kernel") from inner
    except RuntimeError as outer:
        return outer


#: calls the backends below received, by class
CALLS: list[tuple[str, str]] = []


class FullBackend(BackendBase):
    """A backend with every optional method of its own."""

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        raise InfrastructureError("not used")

    def cleanup_run(self, settings: KernelSettings, run_id: str) -> list[str]:
        return []

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        return ["dead-one"]

    def prepare(self, settings: KernelSettings, profile: str) -> PreparedImage | None:
        CALLS.append((type(self).__name__, f"prepare {profile}"))
        return PreparedImage(f"env-{profile}", "built", 1.5, "a note")

    def cleanup_all(self, settings: KernelSettings) -> list[str]:
        return ["live-one", "dead-one"]

    def shutdown(self) -> None:
        CALLS.append((type(self).__name__, "shutdown"))

    def describe(self, settings: KernelSettings) -> BackendResources:
        return BackendResources(memory_bytes=2**30, cpus=2.0, where="the test engine")

    def is_engine_fault(self, exc: BaseException) -> bool:
        return isinstance(exc, OSError)

    def engine_problem(self, settings: KernelSettings) -> str:
        return "the test engine is down"

    def node_options(self, settings: KernelSettings) -> dict[str, Any]:
        return {"token": "for the nodes"}


class FailingShutdown(FullBackend):
    def shutdown(self) -> None:
        CALLS.append((type(self).__name__, "shutdown"))
        raise InfrastructureError("the leases would not go")


class WrongAnswers(FullBackend):
    def prepare(self, settings: KernelSettings, profile: str) -> PreparedImage | None:
        return "an image"  # type: ignore[return-value]

    def describe(self, settings: KernelSettings) -> BackendResources:
        return {"memory": 1}  # type: ignore[return-value]


def test_a_backends_own_optional_methods_are_called() -> None:
    CALLS.clear()
    settings = KernelSettings(backend=f"{HERE}:FullBackend")
    assert kernels.prepare_kernel_image(settings, "colab") == PreparedImage(
        "env-colab", "built", 1.5, "a note"
    )
    assert kernels.cleanup_all(settings) == ["live-one", "dead-one"]
    assert kernels.backend_resources(settings) == BackendResources(2**30, 2.0, "the test engine")
    assert kernels.is_engine_fault(settings, ConnectionRefusedError())
    assert not kernels.is_engine_fault(settings, EngineUnavailable("not this backend's sign"))
    assert kernels.engine_problem(settings) == "the test engine is down"
    assert kernels.node_options(settings) == {"token": "for the nodes"}
    kernels.shutdown_backends()
    assert CALLS == [("FullBackend", "prepare colab"), ("FullBackend", "shutdown")]


def test_every_backend_made_shuts_down_even_when_one_fails() -> None:
    CALLS.clear()
    for name in ("FailingShutdown", "FullBackend"):
        kernels.kernel_backend(KernelSettings(backend=f"{HERE}:{name}"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernels.shutdown_backends()
    assert sorted(CALLS) == [("FailingShutdown", "shutdown"), ("FullBackend", "shutdown")]
    said = [str(w.message) for w in caught]
    assert said == [
        f"pytest-super: the kernel backend '{HERE}:FailingShutdown' failed to shut down: "
        "the leases would not go"
    ]


def test_an_answer_of_the_wrong_type_names_the_backend_and_the_call() -> None:
    settings = KernelSettings(backend=f"{HERE}:WrongAnswers")
    with pytest.raises(TypeError, match=r"WrongAnswers: prepare\(\) returned 'an image', not a"):
        kernels.prepare_kernel_image(settings, "default")
    with pytest.raises(TypeError, match=r"WrongAnswers: describe\(\) returned \{'memory': 1\}"):
        kernels.backend_resources(settings)


def test_the_local_backend_declares_no_bound_and_no_engine() -> None:
    settings = KernelSettings(backend="local", mem="4g", cpus=2)
    assert kernels.prepare_kernel_image(settings, "default") is None
    resources = kernels.backend_resources(settings)
    assert (resources.memory_bytes, resources.cpus) == (None, None)
    assert "this machine" in resources.where
    assert kernels.engine_problem(settings) == ""
    assert kernels.cleanup_all(settings) == []
    assert kernels.node_options(settings) == {}


def test_the_docker_backend_describes_a_kernel_without_reaching_its_engine() -> None:
    backend = DockerBackend()
    nowhere = "tcp://127.0.0.1:1"  # nothing listens: describing must not connect
    four = backend.describe(KernelSettings(mem="4g", cpus=1.5, options={"docker_host": nowhere}))
    assert four == BackendResources(4 * 2**30, 1.5, f"the Docker engine at {nowhere}")
    assert backend.describe(KernelSettings(mem="512m")).memory_bytes == 512 * 2**20
    assert backend.describe(KernelSettings(mem="lots")).memory_bytes is None


def test_the_docker_backend_tells_its_engines_faults_from_a_tasks() -> None:
    backend = DockerBackend()
    assert backend.is_engine_fault(requests.exceptions.ConnectionError("refused"))
    assert backend.is_engine_fault(requests.exceptions.ReadTimeout("slow"))
    assert backend.is_engine_fault(wrapped(EngineUnavailable("gone")))
    assert backend.is_engine_fault(
        docker.errors.DockerException("Error while fetching server API version: refused")
    )
    answered = requests.Response()
    answered.status_code = 500
    assert not backend.is_engine_fault(docker.errors.APIError("500 Server Error", answered))
    assert not backend.is_engine_fault(InfrastructureError("the task's own image failed"))
    assert not backend.is_engine_fault(ValueError("a bug"))


def test_the_docker_backend_says_why_an_engine_does_not_answer() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: a refusal
        settings = KernelSettings(options={"docker_host": f"tcp://127.0.0.1:{port}"})
        problem = DockerBackend().engine_problem(settings)
    assert "ConnectionError" in problem or "Connection refused" in problem, problem


def test_the_docker_options_are_read_typed_and_named_when_wrong() -> None:
    assert docker_options(KernelSettings()) == DockerOptions()
    given = KernelSettings(
        options={"registry": "127.0.0.1:5000", "trusted_images": [["t:1", "sha256:ab"]]}
    )
    assert docker_options(given) == DockerOptions(
        registry="127.0.0.1:5000", trusted_images=(("t:1", "sha256:ab"),)
    )
    with pytest.raises(ValueError, match=r"option 'registry' is 5000: expected a string"):
        docker_options(KernelSettings(options={"registry": 5000}))
    with pytest.raises(ValueError, match=r"option 'trusted_images' is \['t:1'\]: expected"):
        docker_options(KernelSettings(options={"trusted_images": ["t:1"]}))


def test_the_docker_backends_node_options_are_the_images_it_trusts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The images this machine trusts go to a node in the settings' options (pickled, as Ray
    sends them), read back typed there."""
    from pytest_super.kernels.docker import trust

    controller = tmp_path / "controller"
    controller.mkdir(mode=0o700)
    monkeypatch.setattr(trust, "private_dir", lambda: controller)
    trust.record("pytest-super-kernel:default-abc", "sha256:" + "1" * 64)
    options = DockerBackend().node_options(KernelSettings())
    assert options == {
        "trusted_images": [("pytest-super-kernel:default-abc", "sha256:" + "1" * 64)],
        "docker_host": None,  # the node's own engine, not the controller's
    }
    sent = pickle.loads(pickle.dumps(KernelSettings(options=options)))  # as Ray sends it
    assert docker_options(sent).trusted_images == (
        ("pytest-super-kernel:default-abc", "sha256:" + "1" * 64),
    )
    # a node given nothing (its clean-up) asks the backend there: the controller's engine dropped
    controllers = KernelSettings(options={"docker_host": "tcp://ctl:2375", "registry": "r:1"})
    there = kernels.on_node(controllers)
    assert (docker_options(there).docker_host, docker_options(there).registry) == (None, "r:1")


def test_kernel_settings_hold_only_the_neutral_fields(tmp_path: Path) -> None:
    """Docker's engine address, pip cache, pids limit and channel are its options, not fields of
    `KernelSettings` (issue 45 item 2); the run's options reach it there, typed."""
    from pytest_super.settings import SuperRun

    fields = {f.name for f in dataclasses.fields(KernelSettings)}
    assert {"docker_host", "pip_cache", "pids_limit", "channel"}.isdisjoint(fields)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    run = SuperRun.resolve(tmp_path, agent="gold", docker_host="tcp://h:2375", pip_cache="vol")
    assert run.kernel.options == {"docker_host": "tcp://h:2375", "pip_cache": "vol"}
    options = docker_options(run.kernel)
    assert (options.docker_host, options.pip_cache, options.pids_limit, options.channel) == (
        "tcp://h:2375",
        "vol",
        1024,
        "auto",
    )
    given = KernelSettings(options={"pids_limit": 64, "channel": "relay"})
    assert (docker_options(given).pids_limit, docker_options(given).channel) == (64, "relay")
    with pytest.raises(ValueError, match=r"option 'channel' is 'tcp': expected 'auto'"):
        docker_options(KernelSettings(options={"channel": "tcp"}))
    with pytest.raises(ValueError, match=r"option 'pids_limit' is '9': expected a whole number"):
        docker_options(KernelSettings(options={"pids_limit": "9"}))


# -- a backend's own settings (issue 45 item 2: declared by the backend, as executors declare theirs)


def test_the_docker_backends_settings_are_its_own_and_reach_it_in_its_options(
    tmp_path: Path,
) -> None:
    from pytest_super.settings import SETTINGS, SuperRun, all_settings

    table = {s.name for s in SETTINGS}
    assert {"registry", "docker_host", "pip_cache"}.isdisjoint(table)  # not the run's table's
    assert {"registry", "docker_host", "pip_cache"} <= {s.name for s in all_settings()}
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    run = SuperRun.resolve(tmp_path, agent="gold", registry=" 127.0.0.1:5000 ")
    assert run.kernel.options == {"registry": "127.0.0.1:5000"}
    assert docker_options(run.kernel).registry == "127.0.0.1:5000"
    assert SuperRun.resolve(tmp_path, agent="gold").kernel.options == {}  # nothing set
    local = SuperRun.resolve(tmp_path, agent="gold", backend="local", registry="127.0.0.1:5000")
    assert local.kernel.options == {}  # Docker's settings are Docker's alone


def test_a_bad_value_of_a_backends_setting_names_it(tmp_path: Path) -> None:
    from pytest_super.settings import SettingError, SuperRun

    (tmp_path / "pytest.ini").write_text("[pytest]\nsuper_registry = http://nowhere/path\n")
    with pytest.raises(SettingError, match=r"super_registry.*expected HOST:PORT"):
        SuperRun.resolve(tmp_path, agent="gold")


class DeclaringBackend(FullBackend):
    """A third party's backend with a setting of its own."""

    settings = (BackendSetting("zone", str.strip, "eu-1", "where the example backend's boxes run"),)


class TakingBackend(FullBackend):
    settings = (BackendSetting("mem", str, "1g", "a name the run's table has"),)


def test_a_third_party_backend_declares_its_settings_on_its_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_super.settings import SettingError, SuperRun, providers

    def only(cls: str) -> None:
        monkeypatch.setattr(kernels, "known_backend_names", lambda: ["docker", "local", cls])
        providers._declared_settings.cache_clear()

    (tmp_path / "pytest.ini").write_text("[pytest]\nsuper_zone = us-2\n")
    try:
        only(f"{HERE}:DeclaringBackend")
        run = SuperRun.resolve(tmp_path, agent="gold", backend=f"{HERE}:DeclaringBackend")
        assert run.kernel.options == {"zone": "us-2"}
        only(f"{HERE}:TakingBackend")
        with pytest.raises(SettingError, match=r"declares the setting 'mem', which is pytest-s"):
            providers.provider_settings("backend")
    finally:
        providers._declared_settings.cache_clear()


# -- the Ray node side asks the contract only


def test_a_nodes_cleanup_of_everything_is_the_backends_cleanup_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from pytest_super.executors.ray import nodefiles

    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # this test's node folders only
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    removed = nodefiles.cleanup_here(
        KernelSettings(backend=f"{HERE}:FullBackend"), None, every=True
    )
    assert removed == ["live-one", "dead-one"]


def test_a_node_asks_the_backend_whether_its_engine_failed() -> None:
    from pytest_super.executors.ray.node import NodeOutcome, _engine_failed, no_outcome

    full = KernelSettings(backend=f"{HERE}:FullBackend")
    outcome = NodeOutcome(no_outcome("t1", "host/abc"))
    error = _engine_failed(outcome, InfrastructureError("unclear"), full)  # the engine's ping
    assert outcome.engine_failed and error is not None
    assert (error.kind, error.message, error.whose) == (
        "EngineUnavailable",
        "the test engine on node host/abc failed: the test engine is down",
        "engine",
    )
    fault = NodeOutcome(no_outcome("t1", "host/abc"))
    error = _engine_failed(fault, ConnectionResetError("reset"), full)  # its own engine fault
    assert error is not None and "ConnectionResetError: reset" in error.message
    local = KernelSettings(backend="local")
    fine = NodeOutcome(no_outcome("t1", "host/abc"))
    assert _engine_failed(fine, InfrastructureError("the kernel did not start"), local) is None
    assert not fine.engine_failed
