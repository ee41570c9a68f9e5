"""Names derived from task ids: file names that are safe and bounded whatever the id holds.

A task id may be long (ids of up to a few hundred allowed characters load) and a node name may hold
any character; a file system takes at most 255 bytes per name, and the atomic writer adds a dot
and a random suffix. `file_stem` keeps short safe names as they are, so trajectories stay easy to
find, and turns every other name into a safe prefix plus a hash of the whole name, so two
different ids never share a file.
"""

from __future__ import annotations

import hashlib
import re

#: Room left under the 255-byte name limit of ext4/xfs/btrfs/tmpfs for what writers add around a
#: stem: "." + stem + ".ipynb" + "." + 8 random characters (tempfile) is stem + 16.
MAX_STEM = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9_.,-]")
_HASH_CHARS = 12  # 48 bits of SHA-256: collisions need ~16 million long ids in one folder


def file_stem(name: str, max_len: int = MAX_STEM) -> str:
    """A file-name stem for `name`: `name` itself when it is short and made of letters, digits
    and `_ . , -` (and does not start with a dot); otherwise a cleaned, cut prefix plus `-` and
    a hash of the full name."""
    safe = _UNSAFE.sub("_", name)
    if safe == name and len(name) <= max_len and not name.startswith(".") and name:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    prefix = safe.lstrip(".")[: max_len - _HASH_CHARS - 1]
    return f"{prefix}-{digest}" if prefix else digest
