"""Tests of several sessions share one host and one engine (issue 42 item 4): what one makes never
carries another's name. The second engine (tests/support/second_engine.py) takes a slot no other
process holds; a slot whose process died is free again, for its next claimer to clean."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import second_engine

ROOT = Path(__file__).resolve().parent.parent

NAMES = """
import json, sys
from tests.support import second_engine as s
print(json.dumps([s.SECOND_SOCKET, s.SECOND_ROOT, s.SECOND_BRIDGE, s.SECOND_SUBNET]), flush=True)
sys.stdin.read()  # holds its slot until told
"""


def _names_of_another_process(worker: str) -> tuple[subprocess.Popen[str], list[str]]:
    """A process of another session, of the same xdist worker name, and its second engine's names."""
    env = {**os.environ, "PYTEST_XDIST_WORKER": worker, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", NAMES], cwd=ROOT, env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def _ours() -> list[str]:
    s = second_engine
    return [s.SECOND_SOCKET, s.SECOND_ROOT, s.SECOND_BRIDGE, s.SECOND_SUBNET]


def test_two_sessions_of_the_same_worker_name_get_second_engines_of_their_own() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gwm")
    first, names = _names_of_another_process(worker)
    second, more = _names_of_another_process(worker)
    try:
        for other in (names, more):
            assert not set(other) & set(_ours()), (other, _ours())
        assert not set(names) & set(more), (names, more)
    finally:
        for proc in (first, second):
            proc.communicate("")


def test_the_slot_of_a_process_that_died_is_free_again() -> None:
    gone, names = _names_of_another_process(os.environ.get("PYTEST_XDIST_WORKER", "gwm"))
    slot = int(names[3].rsplit(".", 1)[1]) - 150  # its subnet: 172.31.(150 + slot)
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.closing(claim):
        with pytest.raises(OSError):  # held while it lives
            claim.bind(f"\0pytest-super-second-engine-{slot}")
        gone.kill()  # killed from outside: no teardown of its own
        gone.wait()
        claim.bind(f"\0pytest-super-second-engine-{slot}")  # free: the next claimer's
