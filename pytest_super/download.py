"""Fetching SUPER's task files from the Hugging Face Hub (`pytest-super download`), and the
reference's prompt.yaml from its repository (`pytest-super download prompts`, `download_prompts`,
which lives in `reference_files` so that `--super-prompts reference` can fetch it).

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
import importlib
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_super import http_policy
from pytest_super.redaction import masked_url
from pytest_super.reference_files import DownloadError, shown_error

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

    def bounded_client() -> Any:  # Any: huggingface_hub's client factory (httpx or httpx2)
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


def _commit_of(cached: Path) -> str | None:
    """The commit a file in the Hub's cache belongs to: `.../snapshots/<commit>/<filename>`."""
    parts = cached.parts
    if "snapshots" in parts:
        index = parts.index("snapshots")
        if index + 1 < len(parts):
            return parts[index + 1]
    return None
