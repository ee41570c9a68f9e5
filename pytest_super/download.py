"""Fetching SUPER's task files from the Hugging Face Hub (`pytest-super download`), and the
reference's prompt.yaml from its repository (`pytest-super download prompts`, `download_prompts`).

The dataset `allenai/super` keeps its three sets as JSON lines (`tasks/expert.jsonl`,
`tasks/masked.jsonl`, `tasks/auto_gen.jsonl`); this module downloads them with `huggingface_hub`
(the `download` extra: `pip install "pytest-super[download]"`) at a pinned revision and copies
them into a task folder, where pytest collects them as they are (the file names tell the sets).
`HF_ENDPOINT`, `HF_HOME`/`HF_HUB_CACHE` and `HF_TOKEN` work as for any Hub download, and a file
already in the Hub's cache at that revision is not fetched again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pytest_super.atomic import write_atomically
from pytest_super.errors import SuperError
from pytest_super.redaction import masked_url

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
        from huggingface_hub import constants, hf_hub_download
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
    for set_name in sets or list(SET_FILES):
        filename = SET_FILES[set_name]
        where = f"{constants.ENDPOINT}/datasets/{REPO_ID} ({filename} at revision {revision!r})"
        try:
            cached = Path(
                hf_hub_download(REPO_ID, filename, repo_type="dataset", revision=revision)
            )
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
            raise DownloadError(f"{where}: {exc}".splitlines()[0]) from None
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
    base = _checked_base_url((os.environ.get(BASE_URL_ENV) or RAW_BASE_URL).rstrip("/"))
    prompt = _fetch(f"{base}/{PROMPTS_REPO}/{PROMPTS_COMMIT}/{PROMPT_FILE}")
    digest = _sha256(prompt)
    if digest != PROMPT_SHA256:
        raise DownloadError(
            f"{base}/{PROMPTS_REPO}/{PROMPTS_COMMIT}/{PROMPT_FILE}: sha256 {digest}, not the pinned "
            f"{PROMPT_SHA256} of the reference's file at that commit; nothing was saved. Check "
            f"{BASE_URL_ENV} (or the network's proxy), or use a checkout of {PROMPTS_REPO}"
        )
    license_text = _fetch(f"{base}/{PROMPTS_REPO}/{PROMPTS_COMMIT}/{LICENSE_FILE}")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(license_path, license_text.decode("utf-8", errors="replace"))
    write_atomically(target, prompt.decode("utf-8"))  # last: its presence means both are there
    return target


def _checked_base_url(base: str) -> str:
    """`base` if it is an http(s) URL with a host, checked before any download: a malformed one
    (`http://[::1`: httpx's InvalidURL, which is not an HTTPError) is one line naming it."""
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
            f"{BASE_URL_ENV} {masked_url(base)!r}: {problem}; set it to a mirror of "
            "raw.githubusercontent.com such as https://host[:port], or unset it"
        )
    return base


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fetch(url: str) -> bytes:
    """The body of `url` (a 200 answer of at most MAX_FILE_BYTES), or DownloadError."""
    import httpx

    try:
        with httpx.stream("GET", url, timeout=60, follow_redirects=True) as answer:
            if answer.status_code != 200:
                raise DownloadError(f"{url}: HTTP {answer.status_code}; check {BASE_URL_ENV}")
            body = b""
            for chunk in answer.iter_bytes():
                body += chunk
                if len(body) > MAX_FILE_BYTES:
                    raise DownloadError(f"{url}: more than {MAX_FILE_BYTES} bytes; not the file")
    except httpx.HTTPError as exc:
        raise DownloadError(
            f"{url}: cannot be fetched ({type(exc).__name__}: {exc}); check the network, or set "
            f"{BASE_URL_ENV} to a mirror of raw.githubusercontent.com"
        ) from None
    return body
