"""The HTTP transport of the LLM client, under the harness's one HTTP policy (`http_policy`):
every request has a total deadline from connect to last byte, and an answer is read within its
size cap, which `max_tokens` sets here.

The answer is read up to `max_reply_bytes`, counted after decompression (a gzip bomb is cut
while it inflates).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from pytest_super import http_policy
from pytest_super.llm.settings import LLMSettings

#: the largest answer read, as `max_tokens` allows it: a token is at most a few characters, and a
#: character at most 6 bytes of JSON (`\uXXXX`), so 64 bytes a token bounds the reply text
#: generously; 256 KiB more hold the envelope (ids, usage, logprobs, an error message). With the
#: default 1500 tokens: 352 KiB. A 100 MB answer (or a gzip bomb inflating to 1 GiB) is cut there,
#: counted after decompression, while it is read.
REPLY_BYTES_PER_TOKEN = 64
REPLY_ENVELOPE_BYTES = 256 * 1024


def max_reply_bytes(settings: LLMSettings) -> int:
    """The most bytes (decompressed) of one answer the client reads before calling it an error."""
    return REPLY_ENVELOPE_BYTES + REPLY_BYTES_PER_TOKEN * settings.max_tokens


class ReplyTooLarge(http_policy.TooLarge):
    """An answer past `max_reply_bytes`: the endpoint's fault, retried like a malformed one."""


def http_client(headers: dict[str, str], timeout: float) -> httpx.Client:
    """The endpoint's client: the policy's, following no redirect (a POST is not replayed)."""
    return http_policy.client(timeout=timeout, headers=headers)


def post_once(
    client: httpx.Client, url: str, body: Mapping[str, object], limit: float, settings: LLMSettings
) -> httpx.Response:
    """One POST within a total deadline of `limit` seconds from connect to last byte, however
    slowly the headers or the body trickle in; the answer read up to `max_reply_bytes(settings)`
    (decompressed, `ReplyTooLarge` past it). A timeout is httpx's `TimeoutException` naming the
    deadline."""
    return http_policy.send(
        client,
        client.build_request("POST", url, json=body, timeout=limit),
        limit=limit,
        max_bytes=max_reply_bytes(settings),
        too_large=ReplyTooLarge,
        why=(
            f" (max_tokens {settings.max_tokens} x {REPLY_BYTES_PER_TOKEN} + "
            f"{REPLY_ENVELOPE_BYTES:,})"
        ),
    )
