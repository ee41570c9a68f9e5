#!/usr/bin/env python3
"""Regenerate tests/data/super-reference/ from a checkout of SUPER's upstream repository.

    python3 scripts/regenerate-test-data.py UPSTREAM_CHECKOUT [--samples DIR]

UPSTREAM_CHECKOUT is a checkout of https://github.com/allenai/super-benchmark (the data in the
repository was made from commit 50cefd4c213fd8f88d28728ed87e4a20b43c91a3). Each published run
`trajectories/<run>/` becomes `runs/<run>.tar.xz` (every episode's history.ipynb and metrics.json,
nothing else); `--samples DIR` adds the runs of DIR (a folder of run folders, e.g. a few episodes of
a run kept as samples of its layout) as `samples/<run>.tar.xz`; the two files of the reference image
the tests pin against are copied from `super/env/`, with upstream's LICENSE.md. The archives are
deterministic (sorted members, zero times and owners), so an unchanged upstream gives identical
bytes.
"""

from __future__ import annotations

import argparse
import io
import lzma
import shutil
import sys
import tarfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "super-reference"
#: what the tests read of the reference image's definition (tests/test_image_colab.py)
ENV_FILES = ("colab_pip_requirements.txt", "start_modal_app.py")
#: the files of an episode folder the tests read
EPISODE_FILES = ("history.ipynb", "metrics.json")


def pack_run(run: Path, archive: Path) -> int:
    """Write `run`'s episodes into `archive` (xz, deterministic); return how many episode folders."""
    buffer = io.BytesIO()
    folders = sorted(p for p in run.iterdir() if p.is_dir())
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in folders:
            for name in EPISODE_FILES:
                path = folder / name
                if not path.is_file():
                    continue
                data = path.read_bytes()
                info = tarfile.TarInfo(f"{run.name}/{folder.name}/{name}")
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                tar.addfile(info, io.BytesIO(data))
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(lzma.compress(buffer.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    return len(folders)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("upstream", type=Path, help="a checkout of allenai/super-benchmark")
    parser.add_argument("--samples", type=Path, help="a folder of run folders kept as samples")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT})")
    args = parser.parse_args(argv)
    published = args.upstream / "trajectories"
    if not published.is_dir():
        parser.error(f"{published} is not a folder: name a checkout of allenai/super-benchmark")
    for sub in ("runs", "samples"):
        shutil.rmtree(args.out / sub, ignore_errors=True)
    for kind, root in (("runs", published), ("samples", args.samples)):
        if root is None:
            continue
        for run in sorted(p for p in root.iterdir() if p.is_dir()):
            count = pack_run(run, args.out / kind / f"{run.name}.tar.xz")
            size = (args.out / kind / f"{run.name}.tar.xz").stat().st_size
            print(f"{kind}/{run.name}.tar.xz: {count} episodes, {size:,} bytes")
    (args.out / "env").mkdir(parents=True, exist_ok=True)
    for name in ENV_FILES:
        shutil.copyfile(args.upstream / "super" / "env" / name, args.out / "env" / name)
    for licence in ("LICENSE.md", "LICENSE"):
        if (args.upstream / licence).is_file():
            shutil.copyfile(args.upstream / licence, args.out / "LICENSE.md")
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
