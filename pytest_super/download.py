"""Fetching SUPER's task files from the Hugging Face Hub (`pytest-super download`).

The dataset `allenai/super` keeps its three sets as JSON lines (`tasks/expert.jsonl`,
`tasks/masked.jsonl`, `tasks/auto_gen.jsonl`); this module downloads them with `huggingface_hub`
(the `download` extra: `pip install "pytest-super[download]"`) at a pinned revision and copies
them into a task folder, where pytest collects them as they are (the file names tell the sets).
`HF_ENDPOINT`, `HF_HOME`/`HF_HUB_CACHE` and `HF_TOKEN` work as for any Hub download, and a file
already in the Hub's cache at that revision is not fetched again.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from pytest_super.errors import SuperError

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
