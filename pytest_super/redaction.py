"""The run's own secrets (the model endpoint's API key, and the credentials and query values of
its base URL), kept out of everything we write or print.

The key is sent to the endpoint and nowhere else; but an endpoint (a proxy, or a model repeating
its input) can send it back, and what it sends reaches trajectories, reports, JUnit and the
terminal. A base URL may hold secrets too: `http://user:password@proxy/v1` (a proxy with basic
auth) or `https://host/v1?token=...`. The LLM settings register them (`register`,
`register_url`); replies are redacted where they enter (`llm.py`), and every JSON we write
(`strictjson.dumps`), the pytest reports (failure text, captured output, JUnit properties) and the
live step printer are redacted again on the way out, whatever the text's source. Where the base
URL itself is shown, it is shown by `masked_url`.
"""

from __future__ import annotations

from urllib.parse import unquote

#: what a secret is replaced with
MARK = "<API key>"
#: what the base URL's credentials and query values are replaced with
CREDENTIALS_MARK = "<credentials>"
PASSWORD_MARK = "<password>"
QUERY_MARK = "<secret>"
#: shorter values are not treated as secrets (a test's key "k" would redact every letter k)
MIN_SECRET_CHARS = 8
#: query parameters that name no secret: Azure OpenAI's `api-version=2024-02-01` is a date, which
#: would else be redacted from every text the run writes
PUBLIC_QUERY_NAMES = frozenset({"api-version"})

#: each secret with the mark that replaces it
_secrets: dict[str, str] = {}
#: the secrets, longest first (the order `redact` replaces them in)
_longest_first: list[str] = []


def register(secret: str | None, mark: str = MARK) -> None:
    """Keep `secret` out of everything this process writes from now on."""
    if secret and len(secret) >= MIN_SECRET_CHARS and secret not in _secrets:
        _secrets[secret] = mark
        _longest_first[:] = sorted(_secrets, key=len, reverse=True)


def register_url(url: str | None) -> None:
    """Keep the secrets of a base URL out of everything this process writes: its userinfo (the
    `user:password` before `@`, and the password) and the values of its query string, as written
    and percent-decoded. Works on any text, a URL that does not parse too."""
    if not url:
        return
    userinfo, query = _userinfo_and_query(url)
    if userinfo:
        for form in {userinfo, unquote(userinfo)}:
            register(form + "@", CREDENTIALS_MARK + "@")
            register(form, CREDENTIALS_MARK)
            register(form.partition(":")[2], PASSWORD_MARK)
    for name, value in _query_items(query):
        if name.lower() not in PUBLIC_QUERY_NAMES:
            register(value, QUERY_MARK)
            register(unquote(value.replace("+", " ")), QUERY_MARK)


def masked_url(url: str) -> str:
    """`url` as it may be shown: the userinfo as `***`, each query value as `***` (but those of
    PUBLIC_QUERY_NAMES). Works on any text, a URL that does not parse too."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    path, qmark, query = tail.partition("?")
    if qmark:
        query, hash_, fragment = query.partition("#")
        shown = [
            name + eq + (value if name.lower() in PUBLIC_QUERY_NAMES or not eq else "***")
            for name, eq, value in (item.partition("=") for item in query.split("&"))
        ]
        path += "?" + "&".join(shown) + hash_ + fragment
    return f"{scheme}{sep}{netloc}{path}"


def scrub_url(text: str, url: str) -> str:
    """`text` (an error message that may quote `url`, whole or in part) with the secrets of `url`
    masked as `masked_url` masks them: its userinfo, its password alone, and its query values (but
    those of PUBLIC_QUERY_NAMES), as written and percent-decoded. Short ones too: unlike
    `register`, this touches only the message at hand."""
    userinfo, query = _userinfo_and_query(url)
    secrets: set[str] = set()
    for form in {userinfo, unquote(userinfo)} if userinfo else ():
        secrets.update((form, form.partition(":")[2]))
    for name, value in _query_items(query):
        if name.lower() not in PUBLIC_QUERY_NAMES:
            secrets.update((value, unquote(value.replace("+", " "))))
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _userinfo_and_query(url: str) -> tuple[str, str]:
    rest = url.partition("://")[2] or url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc = rest[:end]
    userinfo = netloc.rpartition("@")[0]
    query = rest[end:].partition("?")[2].partition("#")[0]
    return userinfo, query


def _query_items(query: str) -> list[tuple[str, str]]:
    return [(n, v) for n, _, v in (item.partition("=") for item in query.split("&") if item)]


def redact(text: str) -> str:
    """`text` with every registered secret replaced by its mark (the longest secrets first, so
    `user:password@` is replaced whole before the password alone)."""
    for secret in _longest_first:
        if secret in text:
            text = text.replace(secret, _secrets[secret])
    return text


def redact_value(value: object) -> object:
    """`value` redacted if it is a string that holds a secret; other values as they are."""
    return redact(value) if isinstance(value, str) and _secrets else value


def holds_secret(text: str) -> bool:
    return any(secret in text for secret in _secrets)
