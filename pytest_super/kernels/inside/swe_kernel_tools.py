"""Runs inside the kernel: the SWE-agent file viewer's helpers (stat, searching, finding files).

`swe_commands.FileViewer` ships this file's source into the kernel (`kernels.inside`) and calls
`run(name, args_json)` as a cell through the environment, so the helpers' time counts against the
compute limit. `run` prints its JSON result on one line after `MARKER`; the viewer bounds what it
shows (at most `limit` results are collected, one more to tell that there were more).
Imports only the standard library: the kernel's Python need not have pytest-super.
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat as stat_module
from collections.abc import Callable, Iterator
from typing import TypedDict

#: starts the line that carries a helper's JSON result in the cell's output
MARKER = "@@swe-tool@@"
_SKIPPED_DIRS = (".git", "__pycache__", ".ipynb_checkpoints")


class Stat(TypedDict):
    abs: str
    cwd: str
    exists: bool
    is_dir: bool


class DirHits(TypedDict):
    abs: str
    error: str
    files: list[tuple[str, int]]  # a path shown, its count of matching lines


class FileHits(TypedDict):
    abs: str
    error: str
    lines: list[tuple[int, str]]  # a line's number, its text


class FoundFiles(TypedDict):
    abs: str
    error: str
    paths: list[str]


def run(name: str, args_json: str) -> None:
    """Run the helper `name` with its JSON arguments; print MARKER and its JSON result."""
    helpers: dict[str, Callable[..., object]] = {
        "cwd": cwd,
        "stat": stat,
        "mkdir_parent": mkdir_parent,
        "search_dir": search_dir,
        "search_file": search_file,
        "find_file": find_file,
    }
    print(MARKER + json.dumps(helpers[name](**json.loads(args_json))))


def cwd() -> str:
    return os.getcwd()


def stat(path: str) -> Stat:
    p = os.path.abspath(os.path.expanduser(path))
    return {"abs": p, "cwd": os.getcwd(), "exists": os.path.exists(p), "is_dir": os.path.isdir(p)}


def mkdir_parent(path: str) -> bool:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return True


def search_dir(term: str, directory: str, limit: int) -> DirHits:
    """Files under `directory` whose text holds `term`, with their counts of matching lines."""
    top = os.path.abspath(os.path.expanduser(directory))
    result: DirHits = {"abs": top, "error": "", "files": []}
    if not os.path.isdir(top):
        result["error"] = f"directory {directory} not found (relative paths start at {os.getcwd()})"
        return result
    for path in _walk(top):
        try:
            n = sum(term in line for line in _text_lines(path))
        except OSError:
            continue
        if n:
            result["files"].append((_shown(directory, path), n))
            if len(result["files"]) > limit:
                break
    result["files"].sort()
    return result


def search_file(term: str, path: str, limit: int, max_chars: int) -> FileHits:
    """The lines of `path` that hold `term` (numbered as the viewer numbers them), each cut at
    `max_chars`."""
    p = os.path.abspath(os.path.expanduser(path))
    result: FileHits = {"abs": p, "error": "", "lines": []}
    if not os.path.isfile(p):
        result["error"] = f"file {path} not found (relative paths start at {os.getcwd()})"
        return result
    for i, line in enumerate(_text_lines(p), 1):
        if term in line:
            if len(line) > max_chars:
                line = line[:max_chars] + " ... [line cut]"
            result["lines"].append((i, line))
            if len(result["lines"]) > limit:
                break
    return result


def find_file(name: str, directory: str, limit: int) -> FoundFiles:
    """Files under `directory` whose name matches the shell pattern `name`."""
    top = os.path.abspath(os.path.expanduser(directory))
    result: FoundFiles = {"abs": top, "error": "", "paths": []}
    if not os.path.isdir(top):
        result["error"] = f"directory {directory} not found (relative paths start at {os.getcwd()})"
        return result
    for path in _walk(top):
        if fnmatch.fnmatchcase(os.path.basename(path), name):
            result["paths"].append(_shown(directory, path))
            if len(result["paths"]) > limit:
                break
    result["paths"].sort()
    return result


def _walk(top: str) -> Iterator[str]:
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for f in sorted(files):
            yield os.path.join(root, f)


def _text_lines(path: str) -> Iterator[str]:
    """Lines as the viewer numbers them (split at newlines); nothing for a binary file, nor for
    anything but a regular file (a FIFO blocked the open for good, a device never ends)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    if not stat_module.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as fh:
        if b"\0" in fh.read(8192):
            return
        fh.seek(0)
        for raw in fh:
            yield raw.rstrip(b"\n").decode("utf-8", "replace")


def _shown(top: str, path: str) -> str:
    return os.path.normpath(os.path.join(top, os.path.relpath(path, top)))
