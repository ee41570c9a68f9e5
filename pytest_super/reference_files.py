"""The reference's own files at the pinned commit, fetched once and cached: SUPER's prompt.yaml
(`pytest-super download prompts`, `--super-prompts reference`) and the two files of its agent whose
literal strings are what the model is shown besides the prompt (`super/agent/agent.py`,
`super/env/jupyter_env.py`; `reference_protocol` reads them).

Each file is fetched from `raw.githubusercontent.com/<repo>/<commit>/<path>` (or the mirror
`SUPER_PROMPTS_BASE_URL` names) under the harness's HTTP policy (`http_policy`: a total deadline
from connect to last byte, a size cap, few redirects), its sha256 checked against the pinned one
before anything is saved, with the repository's licence beside it, into
`$XDG_CACHE_HOME/pytest-super/prompts/<commit>/` (a file already there with its pinned hash is not
fetched again). The repository holds no copy of them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath

from pytest_super import http_policy
from pytest_super.atomic import write_atomically
from pytest_super.errors import SuperError
from pytest_super.redaction import masked_url, scrub_url


class DownloadError(SuperError):
    """A file to download (a task file from the Hub, a reference file) could not be had."""


def shown_error(exc: Exception, url: str) -> str:
    """`Type: message` of `exc`, with `url`'s credentials masked wherever they appear."""
    return scrub_url(f"{type(exc).__name__}: {exc}", url)


PROMPTS_REPO = "allenai/super-benchmark"
#: the commit of the reference whose code and published runs this project follows
PROMPTS_COMMIT = "50cefd4c213fd8f88d28728ed87e4a20b43c91a3"
PROMPT_FILE = "super/agent/prompt.yaml"
#: sha256 of super/agent/prompt.yaml at PROMPTS_COMMIT: a download with another is refused
PROMPT_SHA256 = "d7c7548120d8c35fd5e9413c04dbb4c50d24c447b730878444a228f327f188da"
LICENSE_FILE = "LICENSE.md"  # Apache-2.0, saved beside the prompt
RAW_BASE_URL = "https://raw.githubusercontent.com"
#: a stand-in for RAW_BASE_URL (a mirror; the tests' local server), as HF_ENDPOINT is for the Hub
BASE_URL_ENV = "SUPER_PROMPTS_BASE_URL"
MAX_FILE_BYTES = 2**20  # both files are a few KiB
#: the total deadline of fetching one of them, from connect to last byte, redirects included
PROMPT_FILE_DEADLINE_S = 60.0


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/pytest-super` (default `~/.cache/pytest-super`)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "pytest-super"


def prompts_cache() -> Path:
    """`$XDG_CACHE_HOME/pytest-super/prompts/<commit>` (default `~/.cache/...`)."""
    return cache_root() / "prompts" / PROMPTS_COMMIT


#: the reference agent's files whose literal strings the model is shown (the format-error
#: correction in agent.py; the still-running, interrupt and unknown-action notes in
#: jupyter_env.py), with their sha256 at PROMPTS_COMMIT
AGENT_FILES = {
    "super/agent/agent.py": "a12c3a77106d751b56d5acee055ae57aa3d918bcf3bcddde5dcbbc9d0f366b08",
    "super/env/jupyter_env.py": "36164be9570fe641b23ae1df5d2eddb0c7ceea6c74386fc3720a00e166d92dc8",
}


def download_prompts(out_dir: Path | None = None) -> Path:
    """Fetch the reference's prompt.yaml at the pinned commit, check its sha256, and save it with
    the repository's license into `out_dir` (default `prompts_cache()`); return its path. A file
    already there with the pinned hash is not fetched again."""
    out_dir = out_dir or prompts_cache()
    target = out_dir / Path(PROMPT_FILE).name
    license_path = out_dir / LICENSE_FILE
    if license_path.is_file() and _cached(target, PROMPT_SHA256):
        return target
    base = _base_url()
    prompt = _pinned(base, PROMPT_FILE, PROMPT_SHA256)
    license_text = _fetch(f"{base}/{PROMPTS_REPO}/{PROMPTS_COMMIT}/{LICENSE_FILE}")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(license_path, license_text.decode("utf-8", errors="replace"))
    write_atomically(target, prompt.decode("utf-8"))  # last: its presence means both are there
    return target


def download_reference(out_dir: Path | None = None) -> Path:
    """`download_prompts`, then the agent's files of `AGENT_FILES` beside the prompt.yaml, each
    checked against its pinned sha256 (a file already there with it is not fetched again);
    return the prompt.yaml's path."""
    target = download_prompts(out_dir)
    for path, digest in AGENT_FILES.items():
        pinned_file(PROMPTS_REPO, PROMPTS_COMMIT, path, digest, target.parent)
    return target


def pinned_file(repo: str, commit: str, path: str, digest: str, out_dir: Path) -> Path:
    """`repo`'s file `path` at `commit`, saved in `out_dir` under its own name: the copy there
    when its sha256 is `digest`, else fetched (from RAW_BASE_URL or BASE_URL_ENV's mirror),
    refused unless its sha256 is `digest`, and saved; return its path."""
    target = out_dir / PurePosixPath(path).name
    if not _cached(target, digest):
        data = _pinned(_base_url(), path, digest, repo=repo, commit=commit)
        out_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(target, data.decode("utf-8"))
    return target


def _base_url() -> str:
    return _checked_base_url((os.environ.get(BASE_URL_ENV) or RAW_BASE_URL).rstrip("/"))


def _cached(path: Path, digest: str) -> bool:
    return path.is_file() and _sha256(path.read_bytes()) == digest


def _pinned(
    base: str, path: str, digest: str, *, repo: str = PROMPTS_REPO, commit: str = PROMPTS_COMMIT
) -> bytes:
    """`repo`'s file `path` at `commit`, refused unless its sha256 is `digest`."""
    url = f"{base}/{repo}/{commit}/{path}"
    data = _fetch(url)
    found = _sha256(data)
    if found != digest:
        raise DownloadError(
            f"{masked_url(url)}: sha256 {found}, not the pinned {digest} of the reference's file "
            f"at that commit; nothing was saved. Check {BASE_URL_ENV} (or the network's proxy), "
            f"or use a checkout of {repo}"
        )
    return data


def _checked_base_url(base: str) -> str:
    return check_base_url(base, BASE_URL_ENV, "raw.githubusercontent.com")


def check_base_url(base: str, setting: str, mirror_of: str) -> str:
    """`base` (the value of the environment variable `setting`, a mirror of `mirror_of`) if it
    is an http(s) URL with a host, checked before any download: a malformed one (`http://[::1`:
    httpx's InvalidURL, which is not an HTTPError) is one line naming it."""
    import httpx

    try:
        url = httpx.URL(base)
        problem = "" if url.scheme in ("http", "https") and url.host else "not an http(s) URL"
        if not problem:
            url.copy_with(path="/")  # a port out of range is found here
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        problem = f"not a URL ({exc})"
    if problem:
        raise DownloadError(
            f"{setting} {masked_url(base)!r}: {problem}; set it to a mirror of "
            f"{mirror_of} such as https://host[:port], or unset it"
        )
    return base


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fetch(url: str) -> bytes:
    """The body of `url` (a 200 answer of at most MAX_FILE_BYTES, within PROMPT_FILE_DEADLINE_S
    from connect to last byte), or DownloadError naming the URL with its credentials masked."""
    import httpx

    shown = masked_url(url)
    try:
        answer = http_policy.get(url, limit=PROMPT_FILE_DEADLINE_S, max_bytes=MAX_FILE_BYTES)
    except http_policy.TooLarge:
        raise DownloadError(f"{shown}: more than {MAX_FILE_BYTES} bytes; not the file") from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise DownloadError(
            f"{shown}: cannot be fetched ({shown_error(exc, url)}); check the network, or set "
            f"{BASE_URL_ENV} to a mirror of raw.githubusercontent.com"
        ) from None
    if answer.status_code != 200:
        raise DownloadError(f"{shown}: HTTP {answer.status_code}; check {BASE_URL_ENV}")
    return answer.content
