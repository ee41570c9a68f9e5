"""The world's faults inside a task, named: the network or an outside service that failed, and a
gold solution that missed (issue 44, item 2).

`network_fault(text)` recognises, in what a cell printed, a failure that is the world's, not the
agent's: a name that does not resolve (DNS), a connection refused, reset or unreachable, a TLS
failure, an HTTP 5xx from a package index, Git host or dataset hub, and pip's "Could not find a
version" when pip could not reach its index (its `Retrying ... after connection broken by` lines).

`world_fault(...)` decides what an episode's faults make of it (runner.py, after scoring):

- under the gold agent, any miss of the expert solution is an error, never a failure: the solution
  is known to work, so a miss means the environment broke. A network fault in its cells is a
  `NetworkFault` (`network_error`); any other miss is an `EnvironmentFault` (`environment_error`)
  whose message says which: a failing cell, no answer, a wrong answer (the accuracy and the keys
  that differ), missed landmarks, a script that did not run, or (LMR-Bench) a golden function
  that failed its unit test. An episode a limit of the run ended (compute, disk, steps) or that
  broke its own kernel keeps its own status, as for any agent: the status names the cause;
- under an LLM agent, an episode that did not pass and whose cells met a network fault is, as
  `network_faults` says: `score` (the default, what SUPER's paper did: docs/results.md quotes it)
  scores it, the fault named in its detail; `error` makes it a `NetworkFault`, a pytest error that
  `--super-retries` runs again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Protocol

from pytest_super.errors import EnvironmentFault, ExitStatus, NetworkFault
from pytest_super.lmr.unit_tests import UnitTestOutcome
from pytest_super.scoring import MISSING, SCRIPT_MIN_DURATION_S, Comparison
from pytest_super.trajectory import Action, Step

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


class ScoredEpisode(Protocol):
    """What `world_fault` reads of a scored episode (runner.TaskResult)."""

    @property
    def exit_status(self) -> ExitStatus: ...
    @property
    def passed(self) -> bool: ...
    @property
    def metric_value(self) -> float | None: ...
    @property
    def pass_metric(self) -> str: ...
    @property
    def comparisons(self) -> Sequence[Comparison]: ...
    @property
    def landmarks_missed(self) -> Sequence[str]: ...
    @property
    def unit_test(self) -> UnitTestOutcome | None: ...


#: how an episode ends when the agent ran its course (a submission or none): under the gold
#: agent, a miss of such an episode is the environment's. Limits and a broken kernel name their
#: own cause.
_RAN_ITS_COURSE = (ExitStatus.SUBMITTED, ExitStatus.NO_SUBMISSION)
#: the statuses of a cell that did not run to its end
_FAILED_CELL = ("error", "died", "timeout")
_NOT_REPRODUCED = (
    "the environment differs from the one the answer was recorded in (a package version, a "
    "dataset, a download, a seed): not the agent's failure; see the trajectory"
)


def world_fault(
    agent: str, steps: list[Step], episode: ScoredEpisode, network_faults: str = "score"
) -> EnvironmentFault | str | None:
    """What the world's faults make of an episode that ended (see the module's text): an
    exception to raise, a note for an LLM agent's scored episode, or None."""
    if episode.passed:
        return None
    network = first_network_fault(steps)
    if agent == "gold":
        if network is not None:
            return NetworkFault(
                f"the network failed inside the task, so the expert solution could not run: "
                f"{network}. Not the agent's failure: check the network (DNS, a proxy, the "
                "package index, Git host or dataset hub) and run the task again"
            )
        return gold_miss(steps, episode)
    if network is None:
        return None
    if network_faults == "error":
        return NetworkFault(
            f"the network failed inside the task ({network}); --super-network-faults=error makes "
            "this an error, which --super-retries runs again"
        )
    return f"the network failed inside the task ({network}); scored as it ended"


def gold_miss(steps: list[Step], episode: ScoredEpisode) -> EnvironmentFault | None:
    """The expert solution's miss, as an environment error that says which; None for an episode
    that a limit ended (its status says so) and whose cells all ran."""
    course = episode.exit_status in _RAN_ITS_COURSE
    failing = _FAILED_CELL if course else ("error",)
    broken = next(
        (n for n, s in enumerate(steps, 1) if s.cell_status in failing and not s.pre_executed),
        None,
    )
    if broken is not None:
        step = steps[broken - 1]
        if step.cell_status == "timeout":
            return EnvironmentFault(
                f"the expert solution, known to work, ran past the cell timeout at step {broken}: "
                "the environment is slower than the one the solution was recorded in, or "
                "--super-cell-timeout is too short for it; see the trajectory"
            )
        return EnvironmentFault(
            f"the expert solution, known to work, failed at step {broken} (cell {step.cell_status}"
            f"{_last_line(step.output or step.observation)}): the environment broke (a package, "
            "a file or a service the task needs); see the trajectory"
        )
    if not course:
        return None
    return EnvironmentFault(f"{_what_missed(steps, episode)}; {_NOT_REPRODUCED}")


def _what_missed(steps: list[Step], episode: ScoredEpisode) -> str:
    """Which miss of an expert solution whose cells all ran, in a sentence, by the pass metric."""
    metric, value = episode.pass_metric, episode.metric_value
    shown = "none" if value is None else f"{value:g}"
    if episode.unit_test is not None:
        return (
            f"the golden function did not pass the task's unit test: "
            f"{episode.unit_test.why or 'it failed'}"
        )
    if metric == "landmarks":
        regexes = ", ".join(repr(r) for r in episode.landmarks_missed[:5])
        return f"the expert solution missed landmarks: landmarks {shown} (not hit: {regexes})"
    if metric == "script-executed":
        return (
            f"the expert solution did not run the task's script: script-executed {shown} (the "
            f"entrypoint did not run for {SCRIPT_MIN_DURATION_S:g} s without an exception)"
        )
    if metric != "accuracy":
        return f"the expert solution did not pass: {metric} {shown}"
    if episode.exit_status is ExitStatus.NO_SUBMISSION:
        why = next((s.observation for s in reversed(steps) if s.action is Action.SUBMIT), "")
        return f"the expert solution gave no answer ({why or 'no submission'})"
    missed = [c for c in episode.comparisons if c.score < 1]
    keys = "; ".join(_comparison(c) for c in missed[:5])
    more = f"; {len(missed) - 5} more" if len(missed) > 5 else ""
    return f"the expert solution did not reproduce the gold answer: accuracy {shown} ({keys}{more})"


def _comparison(c: Comparison) -> str:
    submitted = "<missing>" if c.submitted is MISSING else json.dumps(c.submitted, default=str)
    return f"{c.path or '(answer)'}: expected {json.dumps(c.expected, default=str)}, submitted {submitted}"


def _last_line(text: str) -> str:
    """`: <the last non-blank line>` of a cell's output, or nothing."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return f": {lines[-1][:300]}" if lines else ""
