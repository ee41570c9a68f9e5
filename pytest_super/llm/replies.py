"""Reading what the endpoint answered: a reply's text and token counts, an error answer's
message, the refusal of a request, each with the run's secrets scrubbed.

Whatever the endpoint sends that cannot be decoded or read (not JSON, nested too deep, a shape
we do not know, token counts that are no counts) is the endpoint's error (`LLMError`), never the
harness's. The API key and the base URL's secrets never appear in a message: texts from the
server are scrubbed of them and of anything that looks like a key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import httpx

from pytest_super import redaction, safe_read
from pytest_super.errors import LLMError
from pytest_super.llm.accounting import MAX_USAGE_TOKENS
from pytest_super.strictjson import JSON

_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*.]{3,})")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str, api_key: str | None) -> str:
    """Remove the run's secrets (the API key, the base URL's credentials and query values)
    and anything that looks like a key from a text."""
    if api_key:
        text = text.replace(api_key, "<API key>")
    return _KEYLIKE.sub("<API key>", redaction.redact(text))


def decode_json(content: bytes) -> JSON:
    """An answer's JSON, nested at most `safe_read.MAX_DEPTH` deep (checked before it is parsed);
    `ForeignDataError` if it is none."""
    value: JSON = safe_read.loads(content, "the answer")
    return value


def shown_json(value: object) -> str:
    """`value` as JSON for a message; a value too deep to encode is named, not encoded."""
    try:
        return json.dumps(value, default=str)
    except (RecursionError, ValueError, TypeError):
        return f"(a {type(value).__name__} nested too deep to show)"


def server_message(response: httpx.Response, api_key: str | None) -> str:
    """The message of an error answer: `error.message` of its JSON, else its text (the first
    500 characters; a body nested too deep to decode or print is shown as text)."""
    try:
        data = decode_json(response.content)
        error = data.get("error") if isinstance(data, dict) else None
        text = error.get("message") if isinstance(error, dict) else (error or data)
        text = text if isinstance(text, str) else shown_json(text)
    except Exception:  # noqa: BLE001 - whatever the endpoint sent
        text = response.content[:2000].decode("utf-8", "replace")
    return scrub(text.strip()[:500], api_key) or "(no message)"


def refusal(response: httpx.Response, where: str, api_key: str | None) -> str:
    """The message of a refused request (a 4xx answer that is not retried), with what to do."""
    code = response.status_code
    detail = server_message(response, api_key)
    if code == 401:
        hint = (
            "the endpoint refused the API key: set a valid key in SUPER_API_KEY (or OPENAI_API_KEY)"
            if api_key
            else "the endpoint needs an API key: set SUPER_API_KEY (or OPENAI_API_KEY)"
        )
    elif code == 403:
        hint = "the key has no access to this model or endpoint; check the key's permissions"
    elif code == 404:
        hint = (
            "unknown model or wrong base URL: check the model name and that the base URL "
            "ends where `/chat/completions` is served (e.g. https://api.openai.com/v1)"
        )
    else:
        hint = "the endpoint rejected the request; check the model name and sampling options"
    return f"LLM endpoint {where}: HTTP {code}: {hint}. Server said: {detail}"


class ReplyReader:
    """Reads replies of the endpoint shown as `shown_url` (secrets masked), for messages."""

    def __init__(self, shown_url: str, api_key: str | None) -> None:
        self._shown_url = shown_url
        self._api_key = api_key

    def read(self, data: JSON, body: Mapping[str, object]) -> tuple[str, int, int, int]:
        """(text, prompt, completion and cached prompt tokens) of a reply; `LLMError` for a reply
        we cannot read, whatever the reason (a shape we do not know, nesting too deep to walk)."""
        try:
            return self._reply_parts(data, body)
        except LLMError:
            raise
        except Exception as exc:  # noqa: BLE001 - the reply is the endpoint's: so is the fault
            raise LLMError(
                f"LLM endpoint {self._shown_url} answered with a reply that cannot be read "
                f"({type(exc).__name__}); check that the base URL serves OpenAI's "
                "chat-completions protocol"
            ) from None

    def _reply_parts(self, data: JSON, body: Mapping[str, object]) -> tuple[str, int, int, int]:
        """(text, prompt, completion and cached prompt tokens) of a reply; `LLMError` for a shape we cannot read.

        `content` may be a string, null (a reply of tool calls only) or a list of parts
        (`{"type": "text", "text": ...}`, OpenAI's newer format); text parts are joined and
        other parts (images, refusals) are left out.
        """
        choices = data.get("choices") if isinstance(data, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(data, dict) or not isinstance(first, dict) or "message" not in first:
            raise self._bad_reply("answered without choices[0].message", data)
        message = first["message"]
        if not isinstance(message, dict):
            raise self._bad_reply("answered with a choices[0].message that is not an object", data)
        text = content_text(message.get("content"))
        if text is None:
            raise self._bad_reply(
                "answered with a choices[0].message.content that is neither text nor a list "
                "of text parts",
                data,
            )
        # an endpoint that echoes its input may send our key back; JSON may carry lone
        # surrogates (`"\ud800"`), which no file or terminal can encode: U+FFFD stands for them
        text = _LONE_SURROGATE.sub("\ufffd", redaction.redact(text))
        prompt_tokens, completion_tokens, cached_tokens = self._usage(data.get("usage"))
        if prompt_tokens is None:  # some local servers omit usage: estimate (4 characters a token)
            messages = body.get("messages")  # ours: a list of {"role", "content"}
            shown = messages if isinstance(messages, list) else []
            prompt_tokens = sum(len(str(m.get("content") or "")) for m in shown) // 4
        if completion_tokens is None:
            completion_tokens = len(text) // 4
        return text, prompt_tokens, completion_tokens, cached_tokens

    def _usage(self, usage: object) -> tuple[int | None, int | None, int]:
        """(prompt, completion, cached prompt) token counts of a reply's `usage`; None where it
        gives none (0 for cached: `usage.prompt_tokens_details.cached_tokens`).

        Counts must be integers in [0, MAX_USAGE_TOKENS]: a negative count would defeat the token
        budget, a huge one broke xdist's report serialization and lost the run's results.
        """
        if usage is None:
            return None, None, 0
        if not isinstance(usage, dict):
            raise LLMError(
                f"LLM endpoint {self._shown_url} answered with a `usage` that is not an object: "
                f"{scrub(shown_json(usage)[:200], self._api_key)}"
            )
        details = usage.get("prompt_tokens_details")
        counts = []
        for name, value in (
            ("prompt_tokens", usage.get("prompt_tokens")),
            ("completion_tokens", usage.get("completion_tokens")),
            (
                "prompt_tokens_details.cached_tokens",
                details.get("cached_tokens") if isinstance(details, dict) else None,
            ),
        ):
            if value is not None and (type(value) is not int or not 0 <= value <= MAX_USAGE_TOKENS):
                raise LLMError(
                    f"LLM endpoint {self._shown_url} reported usage.{name} = "
                    f"{scrub(shown_json(value)[:100], self._api_key)}; token counts must be whole "
                    f"numbers from 0 to {MAX_USAGE_TOKENS:,}. Check the endpoint (or its proxy)."
                )
            counts.append(value)
        return counts[0], counts[1], counts[2] or 0

    def _bad_reply(self, what: str, data: object) -> LLMError:
        shown = scrub(shown_json(data)[:300], self._api_key)
        return LLMError(
            f"LLM endpoint {self._shown_url} {what}: {shown}; check that the base URL serves "
            "OpenAI's chat-completions protocol"
        )


def content_text(content: object) -> str | None:
    """The text of a message's `content` (string, null or list of parts); None if unreadable."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif not isinstance(part, dict):
            return None
    return "".join(texts)
