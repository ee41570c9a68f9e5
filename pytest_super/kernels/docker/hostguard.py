"""Keeping bridge-networked tasks away from the host's own services (`guard_host`).

A container on a bridge network reaches every address of the host (the bridge's gateway, docker0,
the host's LAN address) through the host's INPUT chain, so any service listening on all
interfaces (a local model server, a database) answers task code. Where the harness may (a local
engine, root, `iptables` installed), one rule drops everything that enters the host from the
task bridge's interface:

    iptables -I INPUT -i <task bridge> -j DROP

Traffic to the outside is forwarded (FORWARD chain) and not affected; nor is docker's embedded
DNS (it answers inside the container's own namespace). The rule lives as long as the network, and
is checked (`iptables -C`) before it is added, so each run adds it at most once. Where the harness
cannot, it says so once per process with a warning naming why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import warnings

_done: dict[str, str] = {}
_lock = threading.Lock()


class HostReachableWarning(UserWarning):
    """Bridge-networked tasks can reach this host's services (the harness could not block them)."""


def guard_host(bridge: str, *, local: bool) -> str:
    """Drop traffic from interface `bridge` to the host; return "" if done, else why not.

    Says why not once per process (a `HostReachableWarning`).
    """
    with _lock:
        if bridge in _done:
            return _done[bridge]
        why = _add_rule(bridge, local=local)
        _done[bridge] = why
    if why:
        warnings.warn(
            f"tasks on the bridge network can reach services of the engine's host: {why}. "
            "Use --super-network none for tasks that need no network (see docs/security.md).",
            HostReachableWarning,
            stacklevel=3,
        )
    return why


def input_rule(bridge: str) -> list[str]:
    """The iptables rule (without the -C/-I/-D verb) that drops what `bridge` sends the host."""
    return ["INPUT", "-i", bridge, "-j", "DROP"]


def _add_rule(bridge: str, *, local: bool) -> str:
    if not local:
        return "the engine runs on another machine, whose firewall the harness cannot set"
    iptables = shutil.which("iptables")
    if iptables is None:
        return "`iptables` is not installed here"
    if os.geteuid() != 0:
        return "the harness does not run as root, so it cannot add an iptables rule"
    rule = input_rule(bridge)
    if _iptables(iptables, "-C", *rule).returncode == 0:
        return ""
    added = _iptables(iptables, "-I", *rule)
    if added.returncode != 0:
        return f"`iptables -I {' '.join(rule)}` failed: {added.stderr.strip()}"
    return ""


def _iptables(iptables: str, *args: str) -> subprocess.CompletedProcess[str]:
    # -w: wait for the xtables lock (the engine takes it too)
    return subprocess.run(
        [iptables, "-w", *args], capture_output=True, text=True, timeout=30, check=False
    )
