"""The documentation matches the code: every option documented once, every module placed, no dead link."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _help_options() -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(re.findall(r"^\s+(--super-[a-z0-9-]+)", out, re.M)) | set(
        re.findall(r",\s*(--super-[a-z0-9-]+)", out)
    )


def test_every_option_is_documented_once_and_every_documented_option_exists():
    options = _help_options()
    assert "--super-agent" in options  # the plugin is loaded: the check below means something
    page = (DOCS / "options.md").read_text()
    documented = re.findall(r"^\| `(--super-[a-z0-9-]+)", page, re.M)
    documented += re.findall(r"^\| `--super-[a-z0-9-]+[^|]*` / `(--super-[a-z0-9-]+)", page, re.M)
    missing = sorted(options - set(documented))
    unknown = sorted(set(documented) - options)
    twice = sorted({o for o in documented if documented.count(o) > 1})
    assert not missing, f"options missing from docs/options.md's table: {missing}"
    assert not unknown, f"docs/options.md documents options pytest --help does not know: {unknown}"
    assert not twice, f"options documented more than once in docs/options.md: {twice}"


def test_every_module_is_placed_in_the_design_page():
    page = (DOCS / "design.md").read_text()
    package = ROOT / "pytest_super"
    missing = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.name not in page or (len(rel.parts) > 1 and f"{rel.parts[0]}/" not in page):
            missing.append(str(rel))
    assert not missing, f"add these modules to docs/design.md's tree: {missing}"


def test_links_in_readme_and_docs_resolve():
    dead = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                dead.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not dead, f"dead links: {dead}"


def test_readme_fits_a_screen_or_two():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 120, f"README.md has {len(lines)} lines: move details to docs/"
