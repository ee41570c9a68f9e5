"""The circuit breaker on the model endpoint: a dead endpoint stops the run once (issue 44).

Every model call's tries are counted per process: a try that gets no answer (connection
refused or reset, a timeout) or a server fault (HTTP 5xx) is a failure; any answer that is not
one of those (a 200, a refusal of one request, a 429) resets the count. After `threshold` failures
in a row, across the run's tasks, the endpoint is checked once, the way the check before the run
does (`LLMClient.preflight`, its deadline `check_s`). If it still cannot be reached, the breaker
trips: it writes the run's flag file (`ENDPOINT_DOWN_FILE` in the run folder, so xdist workers
learn of it too) with the message, and from then on every try of every process raises
`EndpointDown` (an `LLMError`: the running task ends as `llm_error`), the waits between retries
included (they are cut into short naps that look at the flag). No new task starts: the plugin
skips the tasks that had not started (`down_message`), and the controller ends the run with the
message and the `--super-resume` command.

An endpoint that answers the check (a busy server, a fault of one kind of request) does not trip
the breaker: the count starts again and the tasks' own retries go on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_super import atomic
from pytest_super.errors import LLMError

#: the flag file in the run folder: its text is the message the run ends with
ENDPOINT_DOWN_FILE = "endpoint-down.txt"
#: the default K: failed tries in a row (connection, timeout, 5xx) before the endpoint is checked
DEFAULT_THRESHOLD = 5
#: the default deadline of that check, in seconds
DEFAULT_CHECK_S = 10.0
#: the longest nap between two looks at the flag while a retry waits
_NAP_S = 0.5


class EndpointDown(LLMError):
    """The run's endpoint was found down by the circuit breaker: no try is sent any more."""

    retryable = False


def down_message(flag: Path | None) -> str | None:
    """The message of a tripped breaker (the flag file's text); None while it has not tripped."""
    if flag is None:
        return None
    try:
        return flag.read_text(encoding="utf-8").strip() or "the LLM endpoint is down"
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"the LLM endpoint is down ({flag}: {exc.strerror})"


@dataclass
class Breaker:
    """One process's breaker for one endpoint (`breaker_for` shares it between the process's
    tasks). `check` returns None when the endpoint answers, else why it cannot be reached."""

    threshold: int
    check: Callable[[], str | None]
    flag: Path | None
    where: str
    failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def raise_if_down(self) -> None:
        message = down_message(self.flag)
        if message is not None:
            raise EndpointDown(message)

    def succeeded(self) -> None:
        with self._lock:
            self.failures = 0

    def failed(self) -> None:
        """One more failed try; at the threshold, the check, and the trip if it fails too."""
        if self.threshold <= 0 or self.flag is None:
            return
        with self._lock:  # one check at a time: the others wait for its verdict
            self.failures += 1
            if self.failures < self.threshold:
                return
            count, self.failures = self.failures, 0
            problem = self.check()
            if problem is not None and down_message(self.flag) is None:
                atomic.write_atomically(
                    self.flag,
                    f"the LLM endpoint {self.where} stopped answering: {count} model calls in "
                    f"a row failed, then the check failed too ({problem})",
                )
        self.raise_if_down()

    def sleep(self, seconds: float, sleep: Callable[[float], None]) -> None:
        """Wait `seconds` between retries, in naps that end early when the breaker trips."""
        end = time.monotonic() + seconds
        while True:
            self.raise_if_down()
            left = end - time.monotonic()
            if left <= 0:
                return
            sleep(min(_NAP_S, left))


_breakers: dict[tuple[str, str, str], Breaker] = {}
_registry_lock = threading.Lock()


def breaker_for(key: tuple[str, str, str], make: Callable[[], Breaker]) -> Breaker:
    """This process's breaker for `key` (endpoint, model, flag file), made once."""
    with _registry_lock:
        found = _breakers.get(key)
        if found is None:
            found = _breakers[key] = make()
        return found
