"""`pytest-super download lmr-bench`: LMR-Bench's tree at the pinned commit, its content checked
against a pinned digest, with the license its README grants (docs/lmr-bench.md).

The source is GitHub's tarball of `shuoYan97/LMR-Bench` at commit LMR_COMMIT (the last whose
`benchmark/` tree is whole): `<base>/shuoYan97/LMR-Bench/tar.gz/<commit>`, the base
`https://codeload.github.com` or a mirror's (`LMR_BENCH_BASE_URL`). GitHub does not promise a
tarball's bytes stay the same (its compression changed once), so the pin is a digest of the
tree's content (`tree_digest`): each file's path, executable bit and git blob id, which is what
`git ls-tree -r` lists for the commit, so the pin is recomputed from the commit alone. Upstream
keeps its tensors in Git LFS: the tarball holds their pointer files; a mirror serving the objects
themselves gives the same digest (an object counts as the pointer that names it).

The archive is hostile until checked, and is read a member at a time, never with `extractall`:
one top folder; only regular files and folders (a link, device or FIFO is refused, naming it); no
absolute path, no `..`, no name twice; at most MAX_MEMBERS members, MAX_FILE_BYTES a file and
MAX_TREE_BYTES in all, counted as the bytes are written. The tree is unpacked into a folder beside
`--out` and moved into place only once its digest is the pinned one; whatever fails, nothing is
left but what was there before. The download itself is under the one HTTP policy
(`http_policy`): a total deadline from connect to last byte, a size cap, at most
MAX_REDIRECTS redirects, the URL shown with its credentials masked.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from pytest_super import http_policy
from pytest_super.atomic import write_atomically
from pytest_super.lmr import LMR_COMMIT as LMR_COMMIT
from pytest_super.lmr import LMR_REPO as LMR_REPO
from pytest_super.redaction import masked_url
from pytest_super.reference_files import DownloadError, check_base_url, shown_error

#: `tree_digest` of the repository's tree at LMR_COMMIT, its 26,769 files (docs/lmr-bench.md
#: gives the command that recomputes it from `git ls-tree -r -z <commit>`)
LMR_TREE_DIGEST = "5705baffaeb0192fdbfe03425bacfa4d8771fda1df34962254cdf235190d6aab"
CODELOAD_URL = "https://codeload.github.com"
BASE_URL_ENV = "LMR_BENCH_BASE_URL"
LICENSE_FILE = "LICENSE.md"
MANIFEST = "download.json"
#: the total deadline of the tarball's download (about 100 MB), and the most bytes it may take
ARCHIVE_DEADLINE_S = 1800.0
MAX_ARCHIVE_BYTES = 1 * 2**30
#: bounds of the unpacked tree (the real one: 26,769 files, about 350 MB)
MAX_MEMBERS = 100_000
MAX_FILE_BYTES = 256 * 2**20
MAX_TREE_BYTES = 2 * 2**30
_LFS_HEAD = b"version https://git-lfs.github.com/spec/v1\n"
#: the files upstream's .gitattributes keeps in Git LFS at LMR_COMMIT (all of them pointers there)
LFS_SUFFIXES = (".bin", ".npy", ".pkl", ".pt", ".tsv")
_CHUNK = 2**20
LICENSE = Path(__file__).resolve().parent / "data" / "lmr_bench_LICENSE.md"


class ArchiveError(DownloadError):
    """The archive is not a tree this download keeps (a link, a path out of the tree, too big)."""


def archive_url(base: str) -> str:
    return f"{base.rstrip('/')}/{LMR_REPO}/tar.gz/{LMR_COMMIT}"


def download_lmr_bench(
    out_dir: Path,
    *,
    deadline_s: float | None = None,
    max_archive_bytes: int | None = None,
) -> dict[str, object]:
    """Fetch the tree into `out_dir` (which must not exist, or hold this very download) and
    return its manifest (also `out_dir/download.json`)."""
    kept = _kept_manifest(out_dir)
    if kept is not None:
        return kept
    if os.path.lexists(out_dir):
        raise DownloadError(
            f"{out_dir}: exists and is not this download of {LMR_REPO} at {LMR_COMMIT[:7]}; "
            "remove it or give --out a new folder"
        )
    base = check_base_url(
        (os.environ.get(BASE_URL_ENV) or CODELOAD_URL).rstrip("/"),
        BASE_URL_ENV,
        "codeload.github.com",
    )
    url = archive_url(base)
    partial = out_dir.with_name(f".{out_dir.name}.partial-{uuid.uuid4().hex[:8]}")
    archive = partial.with_suffix(".tar.gz")
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        fetch_archive(
            url,
            archive,
            deadline_s=deadline_s or ARCHIVE_DEADLINE_S,
            max_bytes=max_archive_bytes or MAX_ARCHIVE_BYTES,
        )
        manifest = _unpack_checked(archive, partial, masked_url(url))
        partial.rename(out_dir)
        return manifest
    except OSError as exc:  # a folder that cannot be written, a full disk
        raise DownloadError(
            f"{out_dir}: the download could not be written ({exc}); nothing was kept"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            archive.unlink(missing_ok=True)
        shutil.rmtree(partial, ignore_errors=True)


def _unpack_checked(archive: Path, partial: Path, shown: str) -> dict[str, object]:
    """The archive unpacked into `partial`, its digest checked, the license and the manifest
    written beside the tree; the manifest."""
    hashes = extract(archive, partial, shown=shown)
    digest = tree_digest(hashes)
    if digest != LMR_TREE_DIGEST:
        raise DownloadError(
            f"{shown}: the tree's digest is {digest}, not the pinned {LMR_TREE_DIGEST} of "
            f"{LMR_REPO} at {LMR_COMMIT}; nothing was kept. Check {BASE_URL_ENV} (or the "
            "network's proxy)"
        )
    manifest: dict[str, object] = {
        "repo": LMR_REPO,
        "commit": LMR_COMMIT,
        "source": shown,
        "tree_digest": digest,
        "files": len(hashes),
        "lfs_pointers": sum(1 for _, lfs in hashes.values() if lfs),
        "license": LICENSE_FILE,
    }
    shutil.copyfile(LICENSE, partial / LICENSE_FILE)
    write_atomically(partial / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return manifest


def _kept_manifest(out_dir: Path) -> dict[str, object] | None:
    """The manifest of this download already in `out_dir` (not fetched again), else None."""
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = isinstance(manifest, dict) and manifest.get("tree_digest") == LMR_TREE_DIGEST
    return manifest if same and manifest.get("commit") == LMR_COMMIT else None


def fetch_archive(url: str, into: Path, *, deadline_s: float, max_bytes: int) -> None:
    """The body of `url` written to `into`: a 200 answer of at most `max_bytes`, within
    `deadline_s` from connect to last byte (redirects included), or DownloadError naming the URL
    with its credentials masked."""
    import httpx

    shown = masked_url(url)
    try:
        with (
            http_policy.client(timeout=deadline_s, follow_redirects=True) as made,
            http_policy.bounded(deadline_s, max_bytes=max_bytes) as ends,
            made.stream("GET", url) as answer,
        ):
            if answer.status_code != 200:
                raise DownloadError(f"{shown}: HTTP {answer.status_code}; check {BASE_URL_ENV}")
            with into.open("wb") as out:
                _write_body(answer, out, ends, max_bytes)
    except http_policy.TooLarge:
        raise DownloadError(f"{shown}: more than {max_bytes:,} bytes; not the archive") from None
    except (httpx.HTTPError, httpx.InvalidURL, http_policy.TooManyRedirects) as exc:
        raise DownloadError(
            f"{shown}: cannot be fetched ({shown_error(exc, url)}); check the network, or set "
            f"{BASE_URL_ENV} to a mirror of codeload.github.com"
        ) from None


def _write_body(answer: object, out: IO[bytes], ends: float, max_bytes: int) -> None:
    import httpx

    assert isinstance(answer, httpx.Response)
    size = 0
    for chunk in answer.iter_bytes(_CHUNK):  # decompressed if the server compressed it
        size += len(chunk)
        if size > max_bytes:
            raise http_policy.TooLarge(f"more than {max_bytes:,} bytes")
        out.write(chunk)
        if time.monotonic() > ends:
            raise httpx.ReadTimeout("the body was still arriving", request=answer.request)


def extract(archive: Path, dest: Path, *, shown: str) -> dict[str, tuple[str, bool]]:
    """Unpack the tarball `archive` (one top folder) into `dest`, member by member under the
    module's rules; return each file's path in the tree -> (its digest entry, is an LFS
    pointer). ArchiveError names the member and the rule it broke."""
    dest.mkdir(parents=True)
    hashes: dict[str, tuple[str, bool]] = {}
    written = 0
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for number, (member, path) in enumerate(_members(tar, shown), start=1):
                if number > MAX_MEMBERS:
                    raise ArchiveError(f"{shown}: more than {MAX_MEMBERS:,} members; refused")
                if member.isdir():
                    (dest / path).mkdir(parents=True, exist_ok=True)
                    continue
                source = tar.extractfile(member)
                assert source is not None  # a regular file (`_members`)
                entry, size = _write_member(source, dest / path, member, written, shown)
                written += size
                hashes[path] = entry
    except (tarfile.TarError, EOFError) as exc:  # not a tarball, cut short
        raise ArchiveError(f"{shown}: not an archive this download can unpack ({exc})") from None
    except OSError as exc:  # a name that is a file and a folder, a full disk
        raise ArchiveError(f"{shown}: cannot be unpacked into {dest} ({exc})") from None
    if not hashes:
        raise ArchiveError(f"{shown}: the archive holds no file")
    return hashes


def _members(tar: tarfile.TarFile, shown: str) -> Iterator[tuple[tarfile.TarInfo, str]]:
    """Each member with its path inside the top folder, checked: one top folder, a path that
    stays inside it, a regular file or a folder, each name once."""
    top: str | None = None
    seen: set[str] = set()
    for member in tar:
        parts = PurePosixPath(member.name).parts
        if member.name.startswith("/") or not parts or ".." in parts:
            raise ArchiveError(f"{shown}: member {member.name!r} points outside the tree; refused")
        top = top or parts[0]
        if parts[0] != top:
            raise ArchiveError(
                f"{shown}: member {member.name!r} is not under the archive's top folder "
                f"{top!r}; refused"
            )
        if not (member.isreg() or member.isdir()):
            kind = "a link" if member.issym() or member.islnk() else "not a file or folder"
            target = f" -> {member.linkname!r}" if member.linkname else ""
            raise ArchiveError(f"{shown}: member {member.name!r}{target} is {kind}; refused")
        path = "/".join(parts[1:])
        if not path:
            continue
        if path in seen:
            raise ArchiveError(f"{shown}: member {member.name!r} comes twice; refused")
        seen.add(path)
        yield member, path


def _write_member(
    source: IO[bytes], target: Path, member: tarfile.TarInfo, written: int, shown: str
) -> tuple[tuple[str, bool], int]:
    """One regular file written under the size bounds; its digest entry and size."""
    if member.size > MAX_FILE_BYTES:
        raise ArchiveError(
            f"{shown}: member {member.name!r} is {member.size:,} bytes, more than "
            f"{MAX_FILE_BYTES:,}; refused"
        )
    if written + member.size > MAX_TREE_BYTES:
        raise ArchiveError(f"{shown}: the tree is more than {MAX_TREE_BYTES:,} bytes; refused")
    target.parent.mkdir(parents=True, exist_ok=True)
    blob = hashlib.sha1(b"blob %d\0" % member.size)  # noqa: S324 - git's object id, not security
    content = hashlib.sha256()
    head = b""
    with target.open("xb") as out:  # `x`: a name already written is never overwritten
        while chunk := source.read(_CHUNK):
            blob.update(chunk)
            content.update(chunk)
            head = head or chunk[:1024]
            out.write(chunk)
    executable = bool(member.mode & stat.S_IXUSR)
    target.chmod(0o755 if executable else 0o644)
    pointer = head.startswith(_LFS_HEAD) and member.size < 1024
    blob_id = blob.hexdigest()
    if not pointer and target.suffix in LFS_SUFFIXES:  # the object, not its pointer
        blob_id = _git_blob_id(_lfs_pointer(content.hexdigest(), member.size))
    return (f"{'x' if executable else '-'} {blob_id}", pointer), member.size


def _lfs_pointer(sha256: str, size: int) -> bytes:
    """The Git LFS pointer file of an object (the spec's canonical text)."""
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
    )


def _git_blob_id(data: bytes) -> str:
    blob = hashlib.sha1(b"blob %d\0" % len(data))  # noqa: S324 - git's object id
    blob.update(data)
    return blob.hexdigest()


def tree_digest(hashes: dict[str, tuple[str, bool]]) -> str:
    """sha256 of the tree: one line per file in path order, `<path> <x|-> <git blob id>`: what
    `git ls-tree -r` lists for the commit (its submodules left out), so the pin is computed
    from the commit alone. A file of upstream's LFS patterns served as its object rather than
    its pointer counts as the pointer that names it."""
    lines = "".join(f"{path} {entry}\n" for path, (entry, _) in sorted(hashes.items()))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()
