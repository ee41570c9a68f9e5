"""Shared fixtures: `openai_server`, a real scripted OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai_server import FakeOpenAIServer


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A fresh fake endpoint per test; `.script([...])` what it answers, `.requests` what it got."""
    server = FakeOpenAIServer()
    try:
        yield server
    finally:
        server.stop()
