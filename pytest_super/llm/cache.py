"""The on-disk cache of replies (`--super-llm-cache`): one owner-only JSON file per request,
named by the SHA-256 of the request body (model, messages, sampling, stop; never the key).

An entry holds what a trajectory may hold of a reply (its text, redacted, and its token counts),
not the raw answer. An entry that cannot be read is a miss; one that cannot be written is warned
about.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from pytest_super import safe_read, strictjson
from pytest_super.atomic import write_atomically
from pytest_super.strictjson import JSON

log = logging.getLogger(__name__)

#: the largest cache entry read (an entry holds one reply's text and its token counts)
MAX_CACHE_ENTRY_BYTES = 16 * 1024 * 1024


def cache_file(cache_dir: Path, body: Mapping[str, object]) -> Path:
    """The cache file of a request body under `cache_dir`."""
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    return cache_dir / digest[:2] / f"{digest}.json"


def read_cache_entry(path: Path) -> JSON:
    """A cache entry's JSON; None when there is none or it cannot be read (not a regular file,
    larger than MAX_CACHE_ENTRY_BYTES, not JSON, nested too deep): the model is asked again."""
    if not os.path.lexists(path):
        return None
    try:
        entry: JSON = safe_read.read_json_file(path, MAX_CACHE_ENTRY_BYTES)
        return entry
    except Exception as exc:  # noqa: BLE001 - a bad entry is a cache miss
        log.warning("ignoring an unreadable LLM cache entry: %s", exc)
        return None


def write_cache_entry(
    path: Path, text: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int
) -> None:
    """Store what a trajectory may hold of a reply (its text, redacted, and its token counts;
    not the raw answer), owner-only: 0700 folders, a 0600 file. A cache that cannot be written
    is warned about, not an error."""
    entry = {
        "choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        },
    }
    try:
        for folder in (path.parent.parent, path.parent):
            if not folder.is_dir():
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                folder.chmod(0o700)
        write_atomically(path, strictjson.dumps(entry), mode=0o600)
    except OSError as exc:
        log.warning("could not write the LLM cache file %s: %s", path, exc)
