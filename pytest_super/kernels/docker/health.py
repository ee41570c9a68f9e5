"""The Docker engine's faults, told from a task's: an error that is the engine not answering
(`engine_fault`), and a ping that says whether it answers now (`engine_problem`). A Ray node
asks them through the backend contract (`kernels.is_engine_fault`, `kernels.engine_problem`) to
give a task whose engine failed to another node instead of failing it."""

from __future__ import annotations

import docker
import docker.errors
import requests.exceptions

from pytest_super.errors import EngineUnavailable
from pytest_super.kernels.docker.engine import engine_address

#: seconds the engine's ping may take when an infrastructure error asks whether it still answers
ENGINE_PING_S = 10


def engine_fault(exc: BaseException) -> bool:
    """Is `exc` (or an error it came from) the Docker engine not answering: `EngineUnavailable`,
    a connection error or timeout of requests (docker's transport), docker's own "Error while
    fetching server API version"? An engine that answered with an HTTP error did not fail."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, EngineUnavailable | requests.exceptions.ConnectionError):
            return True
        if isinstance(cause, requests.exceptions.Timeout):
            return True
        if (
            isinstance(cause, docker.errors.DockerException)
            and not isinstance(cause, docker.errors.APIError)
            and ("server API version" in str(cause) or "Connection" in str(cause))
        ):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def engine_problem(docker_host: str | None, timeout_s: int = ENGINE_PING_S) -> str:
    """Why the engine at `docker_host` (None: DOCKER_HOST or the local socket) does not answer
    a ping within `timeout_s`; "" when it does."""
    try:
        client = docker.DockerClient(base_url=engine_address(docker_host), timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - any failure to reach it is the answer
        return f"{type(exc).__name__}: {exc}"
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return ""
