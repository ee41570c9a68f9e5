"""Fetching SUPER's task files from the Hugging Face Hub (`pytest-super download`), and the
reference's prompt.yaml from its repository (`pytest-super download prompts`, `download_prompts`).

The dataset `allenai/super` keeps its three sets as JSON lines (`tasks/expert.jsonl`,
`tasks/masked.jsonl`, `tasks/auto_gen.jsonl`); this module downloads them with `huggingface_hub`
(the `download` extra: `pip install "pytest-super[download]"`) at a pinned revision and copies
them into a task folder, where pytest collects them as they are (the file names tell the sets).
`HF_ENDPOINT`, `HF_HOME`/`HF_HUB_CACHE` and `HF_TOKEN` work as for any Hub download, and a file
already in the Hub's cache at that revision is not fetched again.

Both downloads are under the harness's one HTTP policy (`http_policy`): a total deadline per file
from connect to last byte (a mirror trickling a byte every 20 s is cut there), a size cap and at
most `http_policy.MAX_REDIRECTS` redirects. A URL is shown with its credentials masked
(`redaction.masked_url`): `SUPER_PROMPTS_BASE_URL` or `HF_ENDPOINT` may hold a password.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_super import http_policy
from pytest_super.atomic import write_atomically
from pytest_super.errors import SuperError
from pytest_super.redaction import masked_url, scrub_url

REPO_ID = "allenai/super"
#: The dataset revision downloads use unless told otherwise. The Hub cannot be reached from where
#: this was written, so the commit id could not be read: `main` stands in, and every download
#: records the commit it resolved to in `<out>/download.json`. Replace it with that 40-hex commit
#: (and pass it with --revision meanwhile) to pin the data.
DEFAULT_REVISION = "main"
SET_FILES = {
    "expert": "tasks/expert.jsonl",
    "masked": "tasks/masked.jsonl",
    "auto": "tasks/auto_gen.jsonl",
}
#: the total deadline of one task file's download (its metadata request and its body), and the
#: most bytes it may take from the network: the three files are a few MB
TASK_FILE_DEADLINE_S = 600.0
TASK_FILE_MAX_BYTES = 256 * 2**20


class DownloadError(SuperError):
    """The Hub (or what HF_ENDPOINT names) did not give a task file."""


@dataclass(frozen=True)
class Downloaded:
    """One task file: its set, where it was written, and the dataset commit it came from."""

    set_name: str
    path: Path
    commit: str | None


def download_tasks(
    out_dir: Path, *, sets: list[str] | None = None, revision: str = DEFAULT_REVISION
) -> list[Downloaded]:
    """Download the task files of `sets` (default: all three) into `out_dir`."""
    try:
        from huggingface_hub import constants
        from huggingface_hub.errors import (
            EntryNotFoundError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "huggingface_hub":
            raise
        raise DownloadError(
            "downloading SUPER's tasks needs huggingface_hub, an optional dependency: "
            'pip install "pytest-super[download]"'
        ) from None

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    out_of_bounds = _out_of_bounds_errors()
    for set_name in sets or list(SET_FILES):
        filename = SET_FILES[set_name]
        where = (
            f"{masked_url(constants.ENDPOINT)}/datasets/{REPO_ID} ({filename} at revision "
            f"{revision!r})"
        )
        try:
            cached = Path(_hub_download(filename, revision))
        except RevisionNotFoundError:
            raise DownloadError(
                f"{where}: no such revision; pass --revision with a commit id of the dataset"
            ) from None
        except LocalEntryNotFoundError:
            raise DownloadError(
                f"{where}: the Hub cannot be reached and the file is not in the Hub's cache "
                f"({constants.HF_HUB_CACHE}); check the network, or set HF_ENDPOINT to a mirror"
            ) from None
        except (RepositoryNotFoundError, EntryNotFoundError) as exc:  # after its subclass above
            raise DownloadError(f"{where}: not found ({type(exc).__name__})") from None
        except HfHubHTTPError as exc:
            shown = shown_error(exc, constants.ENDPOINT)
            raise DownloadError(f"{where}: {shown}".splitlines()[0]) from None
        except out_of_bounds as exc:
            raise DownloadError(
                f"{where}: cannot be fetched within the download's bounds ("
                f"{shown_error(exc, constants.ENDPOINT)}); check the network, or set "
                "HF_ENDPOINT to a mirror"
            ) from None
        target = out_dir / Path(filename).name
        shutil.copyfile(cached, target)
        written.append(Downloaded(set_name, target, _commit_of(cached)))
    manifest = {
        "repo": REPO_ID,
        "revision": revision,
        "files": {d.path.name: {"set": d.set_name, "commit": d.commit} for d in written},
    }
    (out_dir / "download.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return written


#: the httpcore each httpx the Hub's client may be built on runs on (huggingface_hub 1.x: httpx;
#: 2.x: httpx2)
_CORE_OF = {"httpx": "httpcore", "httpx2": "httpcore2"}


def _hub_download(filename: str, revision: str) -> str:
    """`hf_hub_download` of one task file under the HTTP policy: the Hub's client on the policy's
    deadline backend and event hooks (no retry past the deadline, no wait past it, at most
    `http_policy.MAX_REDIRECTS` redirects in a row, the Hub's own following included), the whole
    call within TASK_FILE_DEADLINE_S and TASK_FILE_MAX_BYTES; the Hub's retry warnings (which
    name the URL as given, credentials and all) silenced. Xet storage (hf_xet, whose Rust client
    no policy of ours reaches) is off for the call: the Hub then serves the file over HTTP, as it
    does without hf_xet installed. The Hub's own client, verbosity and Xet setting come back
    after. Checked with huggingface_hub 2.4 (httpx2)."""
    from huggingface_hub import constants, hf_hub_download, set_client_factory
    from huggingface_hub.utils import logging as hub_logging

    # the Hub's own factory (offline mode, request ids), not exported by huggingface_hub.utils
    from huggingface_hub.utils._http import default_client_factory

    def bounded_client() -> Any:
        made = default_client_factory()
        made.max_redirects = http_policy.MAX_REDIRECTS
        hooks = made.event_hooks
        made.event_hooks = {
            name: [*hooks.get(name, []), *ours] for name, ours in http_policy.EVENT_HOOKS.items()
        }
        core = _CORE_OF[type(made).__module__.partition(".")[0]]
        http_policy.install(made, importlib.import_module(core))
        return made

    verbosity, xet_disabled = hub_logging.get_verbosity(), constants.HF_HUB_DISABLE_XET
    hub_logging.set_verbosity(logging.ERROR)
    constants.HF_HUB_DISABLE_XET = True
    set_client_factory(bounded_client)
    try:
        with http_policy.bounded(TASK_FILE_DEADLINE_S, max_bytes=TASK_FILE_MAX_BYTES):
            return str(hf_hub_download(REPO_ID, filename, repo_type="dataset", revision=revision))
    finally:
        set_client_factory(default_client_factory)
        constants.HF_HUB_DISABLE_XET = xet_disabled
        hub_logging.set_verbosity(verbosity)


def _out_of_bounds_errors() -> tuple[type[Exception], ...]:
    """What a download past the policy's bounds raises through the Hub's client: the policy's
    own errors, and its httpx's that the Hub does not wrap (a timeout of the total deadline)."""
    import httpx

    errors: list[type[Exception]] = [
        http_policy.TooLarge,
        http_policy.DeadlinePassed,
        http_policy.TooManyRedirects,
        httpx.TransportError,
    ]
    with contextlib.suppress(ModuleNotFoundError):
        import httpx2

        errors.append(httpx2.TransportError)
    return tuple(errors)


def shown_error(exc: Exception, url: str) -> str:
    """`Type: message` of `exc`, with `url`'s credentials masked wherever they appear."""
    return scrub_url(f"{type(exc).__name__}: {exc}", url)


def _commit_of(cached: Path) -> str | None:
    """The commit a file in the Hub's cache belongs to: `.../snapshots/<commit>/<filename>`."""
    parts = cached.parts
    if "snapshots" in parts:
        index = parts.index("snapshots")
        if index + 1 < len(parts):
            return parts[index + 1]
    return None


# -- the reference's prompts ---------------------------------------------------------------------
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


def prompts_cache() -> Path:
    """`$XDG_CACHE_HOME/pytest-super/prompts/<commit>` (default `~/.cache/...`)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "pytest-super" / "prompts" / PROMPTS_COMMIT


def download_prompts(out_dir: Path | None = None) -> Path:
    """Fetch the reference's prompt.yaml at the pinned commit, check its sha256, and save it with
    the repository's license into `out_dir` (default `prompts_cache()`); return its path. A file
    already there with the pinned hash is not fetched again."""
    out_dir = out_dir or prompts_cache()
    target = out_dir / Path(PROMPT_FILE).name
    license_path = out_dir / LICENSE_FILE
    if (
        target.is_file()
        and license_path.is_file()
        and _sha256(target.read_bytes()) == PROMPT_SHA256
    ):
        return target
    base = check_base_url(
        (os.environ.get(BASE_URL_ENV) or RAW_BASE_URL).rstrip("/"),
        BASE_URL_ENV,
        "raw.githubusercontent.com",
    )
    prompt = _fetch(f"{base}/{PROMPTS_REPO}/{PROMPTS_COMMIT}/{PROMPT_FILE}")
    digest = _sha256(prompt)
    if digest != PROMPT_SHA256:
        raise DownloadError(
            f"{masked_url(f'{base}/{PROMPTS_REPO}/{PROMPTS_COMMIT}/{PROMPT_FILE}')}: sha256 "
            f"{digest}, not the pinned {PROMPT_SHA256} of the reference's file at that commit; "
            f"nothing was saved. Check {BASE_URL_ENV} (or the network's proxy), or use a checkout "
            f"of {PROMPTS_REPO}"
        )
    license_text = _fetch(f"{base}/{PROMPTS_REPO}/{PROMPTS_COMMIT}/{LICENSE_FILE}")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(license_path, license_text.decode("utf-8", errors="replace"))
    write_atomically(target, prompt.decode("utf-8"))  # last: its presence means both are there
    return target


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
