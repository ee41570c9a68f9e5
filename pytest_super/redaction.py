"""The run's own secrets (the model endpoint's API key), kept out of everything we write or print.

The key is sent to the endpoint and nowhere else; but an endpoint (a proxy, or a model repeating
its input) can send it back, and what it sends reaches trajectories, reports, JUnit and the
terminal. The LLM client registers the key once (`register`); replies are redacted where they
enter (`llm.py`), and every JSON we write (`strictjson.dumps`), the pytest reports
(failure text, captured output, JUnit properties) and the live step printer are redacted again on
the way out, whatever the text's source.
"""

from __future__ import annotations

from typing import Any

#: what a secret is replaced with
MARK = "<API key>"
#: shorter values are not treated as secrets (a test's key "k" would redact every letter k)
MIN_SECRET_CHARS = 8

_secrets: set[str] = set()


def register(secret: str | None) -> None:
    """Keep `secret` out of everything this process writes from now on."""
    if secret and len(secret) >= MIN_SECRET_CHARS:
        _secrets.add(secret)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by MARK."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MARK)
    return text


def redact_value(value: Any) -> Any:
    """`value` redacted if it is a string that holds a secret; other values as they are."""
    return redact(value) if isinstance(value, str) and _secrets else value


def holds_secret(text: str) -> bool:
    return any(secret in text for secret in _secrets)
