"""The modules shipped into a kernel (`kernels.inside`): their functions here, directly, and
the expression that loads one in a fresh interpreter, as a kernel would."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super.kernels.inside import file_access, kernel_module, swe_kernel_tools


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_file_access_writes_creating_parents_and_reads_at_most_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "f.bin"
    assert (
        file_access.write_base64(b64(str(path)), base64.b64encode(b"\x00\xffhello").decode()) == 7
    )
    assert base64.b64decode(file_access.read_base64(b64(str(path)))) == b"\x00\xffhello"
    assert base64.b64decode(file_access.read_base64(b64(str(path)), 3)) == b"\x00\xffh"
    with pytest.raises(FileNotFoundError):
        file_access.read_base64(b64(str(tmp_path / "missing")))


def test_swe_tools_search_and_find_with_their_bounds(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\nprint(x)\nx += 1\n")
    (tmp_path / "pkg" / "b.py").write_text("y = 2\n")
    (tmp_path / "blob.bin").write_bytes(b"x\0x")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.py").write_text("x\n")
    monkeypatch.chdir(tmp_path)
    found = swe_kernel_tools.search_dir("x", ".", 100)
    assert found["files"] == [("pkg/a.py", 3)]
    assert len(swe_kernel_tools.find_file("*.py", ".", 1)["paths"]) == 2  # limit + 1: "more"
    lines = swe_kernel_tools.search_file("print", "pkg/a.py", 100, 5)["lines"]
    assert lines == [(2, "print ... [line cut]")]
    assert "not found" in swe_kernel_tools.search_dir("x", "nowhere", 100)["error"]


def test_a_shipped_module_loads_once_in_a_fresh_interpreter(tmp_path: Path) -> None:
    tools = kernel_module("pytest_super.kernels.inside", "swe_kernel_tools.py")
    code = (
        f"import os; os.chdir({str(tmp_path)!r})\n"
        f"{tools}.run('stat', {json.dumps({'path': 'f'})!r})\n"
        f"first = {tools}\n"
        f"assert {tools} is first and 'pytest_super' not in __import__('sys').modules\n"
    )
    # -I: isolated, so the kernel-side module cannot come from this checkout's package
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith(swe_kernel_tools.MARKER)
    assert json.loads(out[len(swe_kernel_tools.MARKER) :])["exists"] is False
