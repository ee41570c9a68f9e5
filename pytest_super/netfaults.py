"""The world's faults inside a task, named: the network or an outside service that failed, and a
gold solution that broke (issue 44, item 2).

`network_fault(text)` recognises, in what a cell printed, a failure that is the world's, not the
agent's: a name that does not resolve (DNS), a connection refused, reset or unreachable, a TLS
failure, an HTTP 5xx from a package index, Git host or dataset hub, and pip's "Could not find a
version" when pip could not reach its index (its `Retrying ... after connection broken by` lines).

`world_fault(...)` decides what an episode's faults make of it (runner.py, after scoring):

- under the gold agent, a solution that did not pass because a cell failed (an error, or a
  network fault in its output) is an `EnvironmentFault` (`NetworkFault` for the network): the
  solution is known to work, so the environment broke. A wrong answer printed without a failure
  stays a failure (a task whose answer key is wrong);
- under an LLM agent, an episode that did not pass and whose cells met a network fault is, as
  `network_faults` says: `score` (the default, what SUPER's paper did: each episode was run once and
  scored as it ended) scores it, the fault named in its detail; `error` makes it a `NetworkFault`,
  a pytest error that `--super-retries` runs again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pytest_super.errors import EnvironmentFault, NetworkFault
from pytest_super.trajectory import Step

#: the choices of `--super-network-faults` (the first is the default)
NETWORK_FAULT_CHOICES = ("score", "error")

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (
            "DNS",
            r"could not resolve host|temporary failure in name resolution|name or service not "
            r"known|nodename nor servname|getaddrinfo failed|NameResolutionError|"
            r"no address associated with hostname",
        ),
        (
            "connection",
            r"connection refused|connection reset by peer|ConnectionResetError|network is "
            r"unreachable|no route to host|failed to establish a new connection|connection "
            r"timed out|RemoteDisconnected|after connection broken by",
        ),
        (
            "TLS",
            r"CERTIFICATE_VERIFY_FAILED|SSLError|SSL: |gnutls_handshake\(\) failed|"
            r"TLS handshake|SSL_ERROR_SYSCALL",
        ),
        (
            "HTTP 5xx",
            r"the requested URL returned error: 5\d\d|\b5\d\d Server Error|HTTP Error 5\d\d|"
            r"HTTPError: 5\d\d|status code 5\d\d|\b50[234] (Bad Gateway|Service Unavailable|"
            r"Gateway Time-?out)",
        ),
    )
)


def network_fault(text: str) -> str | None:
    """The first network or outside-service failure `text` shows, as `kind: the line`; None."""
    for line in text.splitlines():
        for kind, pattern in _PATTERNS:
            if pattern.search(line):
                return f"{kind}: {line.strip()[:300]}"
    return None


def first_network_fault(steps: Iterable[Step]) -> str | None:
    """The first network fault of an episode's cells, naming the step."""
    for n, step in enumerate(steps, start=1):
        found = network_fault(step.output or step.observation)
        if found is not None:
            return f"step {n}: {found}"
    return None


def world_fault(
    agent: str, steps: list[Step], passed: bool, network_faults: str = "score"
) -> EnvironmentFault | str | None:
    """What the world's faults make of an episode that ended (see the module's text): an
    exception to raise, a note for an LLM agent's scored episode, or None."""
    if passed:
        return None
    network = first_network_fault(steps)
    if agent == "gold":
        if network is not None:
            return NetworkFault(
                f"the network failed inside the task, so the expert solution could not run: "
                f"{network}. Not the agent's failure: check the network (DNS, a proxy, the "
                "package index, Git host or dataset hub) and run the task again"
            )
        broken = next(
            (n for n, s in enumerate(steps, 1) if s.cell_status == "error" and not s.pre_executed),
            None,
        )
        if broken is not None:
            return EnvironmentFault(
                f"the expert solution, known to work, failed at step {broken} (a cell error): "
                "the environment broke (a package, a file or a service the task needs); see the "
                "trajectory"
            )
        return None
    if network is None:
        return None
    if network_faults == "error":
        return NetworkFault(
            f"the network failed inside the task ({network}); --super-network-faults=error makes "
            "this an error, which --super-retries runs again"
        )
    return f"the network failed inside the task ({network}); scored as it ended"
