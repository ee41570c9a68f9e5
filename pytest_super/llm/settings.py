"""Which model to ask, where, and how: `LLMSettings`, the endpoint's URL and the API key.

The settings hold secrets (the API key, the base URL's credentials and query values): they are
registered with `redaction` when made, and the URL is shown masked (`redaction.masked_url`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import httpx

from pytest_super import redaction

#: where the base URL is set, for messages
BASE_URL_SETTING = "--super-base-url (or SUPER_BASE_URL, OPENAI_BASE_URL)"


@dataclass(frozen=True)
class LLMSettings:
    """Which model to ask, where, and how."""

    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key: str | None = field(default=None, repr=False)  # never printed
    temperature: float = 0.2
    top_p: float = 0.5
    max_tokens: int = 1500
    price_in: float | None = None  # USD per million prompt tokens; None: from PRICES, else 0
    price_out: float | None = None
    price_cached: float | None = None  # USD per million cached prompt tokens; None: table/price_in
    cache_dir: str | None = None  # --super-llm-cache
    max_retries: int = 6
    timeout_s: float = 300.0  # total deadline of one HTTP request, from connect to last byte
    #: the circuit breaker (llm/breaker.py): failed tries in a row before the endpoint is
    #: checked (0: never), the check's deadline, and the run's flag file (None: no breaker)
    breaker_threshold: int = 5
    breaker_check_s: float = 10.0
    down_flag: str | None = None

    def __post_init__(self) -> None:
        # settings that hold secrets make them the run's secrets, in every process that has them
        redaction.register(self.api_key)
        redaction.register_url(self.base_url)


def api_key_from_env() -> str | None:
    """The API key from SUPER_API_KEY, else OPENAI_API_KEY; None when neither is set."""
    return os.environ.get("SUPER_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


def chat_url(base_url: str) -> httpx.URL:
    """The `/chat/completions` URL of a base URL: the path extended, a query string kept
    (`https://host/v1?token=t` -> `https://host/v1/chat/completions?token=t`). httpx.InvalidURL
    if it does not parse."""
    url = httpx.URL(base_url.strip())
    return url.copy_with(path=url.path.rstrip("/") + "/chat/completions")


def base_url_problem(base_url: str) -> str | None:
    """Why `base_url` cannot be an endpoint's URL (a usage error naming the setting and the URL,
    its secrets masked); None when it can."""
    why = None
    if base_url != base_url.strip() or any(ord(c) < 32 or c == "\x7f" for c in base_url):
        why = "it holds blanks or control characters"
    else:
        try:
            url = chat_url(base_url)
            port = url.port
        except (httpx.InvalidURL, ValueError, TypeError) as exc:
            why = f"it does not parse ({redaction.redact(str(exc))})"
        else:
            if url.scheme not in ("http", "https"):
                why = "it must start with http:// or https://"
            elif not url.host:
                why = "it names no host"
            elif port is not None and not 0 < port < 65536:
                why = f"port {port} is not in 1-65535"
    if why is None:
        return None
    return (
        f"{BASE_URL_SETTING}: the base URL {redaction.masked_url(base_url)!r} is not a valid "
        f"endpoint URL: {why}. Give the URL up to where `/chat/completions` is served, e.g. "
        "https://api.openai.com/v1 or http://127.0.0.1:8000/v1"
    )
