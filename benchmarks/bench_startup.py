"""What pytest-super's start-up costs, against the same start-up of another commit, in one run:

    .venv/bin/python benchmarks/bench_startup.py [--baseline 6b71721] [-n 20]

The start-up is what every pytest start asks of the plugin before any task: `import
pytest_super.plugin`, every `--super-*` setting with the providers' (the executors' and the kernel
backends', settings/providers.py: this scans the installed packages' entry points) and a
`SuperRun()` checked as the options are. Each of `-n` rounds starts a fresh `python -c` of it for
this tree and for `--baseline` (a `git archive` of that commit, first on PYTHONPATH), alternating
which goes first; the CPU time of each process (user + system, from the children's rusage) is
measured. Printed: the median of each, the ratio this tree / baseline, and how many times each
called `importlib.metadata.entry_points`. The machine's other load shows in the figures (CPU
time less than wall time): run it on a quiet machine. Always exits 0: it reports, it does not
judge.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.toy_providers import COUNT_SCANS  # noqa: E402

#: the start-up, then the count of entry-point scans the package made (on stdout)
START_UP = (
    COUNT_SCANS
    + """\
import pytest_super.plugin
from pytest_super.settings import SuperRun
from pytest_super.settings.providers import all_settings
all_settings()
SuperRun()
print(len(scans), pytest_super.plugin.__file__)
"""
)


def export(rev: str, into: Path) -> Path:
    """The tree of commit `rev` (its `pytest_super` package) written under `into`."""
    archive = into / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", rev, "pytest_super"], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def one_start(pythonpath: Path) -> tuple[float, str]:
    """The CPU seconds of one fresh start-up with `pythonpath` first, and what it printed."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(pythonpath), os.environ.get("PYTHONPATH", "")])
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(  # not in ROOT: `python -c` puts its folder first on sys.path
        [sys.executable, "-c", START_UP],
        env=env,
        cwd=pythonpath.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="6b71721", help="the commit to compare with")
    parser.add_argument("-n", type=int, default=20, help="start-ups of each (default 20)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        trees = {"this tree": ROOT, f"baseline {args.baseline}": export(args.baseline, Path(tmp))}
        times: dict[str, list[float]] = {name: [] for name in trees}
        said: dict[str, str] = {}
        for tree in trees.values():  # an untimed warm-up of each (.pyc, page cache)
            one_start(tree)
        for i in range(args.n):
            order = list(trees) if i % 2 == 0 else list(reversed(trees))
            for name in order:
                cpu, said[name] = one_start(trees[name])
                times[name].append(cpu)
        medians = {name: statistics.median(t) for name, t in times.items()}
        for name, median in medians.items():
            scans, _, module = said[name].partition(" ")
            print(
                f"{name}: median CPU {median * 1000:.0f} ms over {args.n} start-ups "
                f"(min {min(times[name]) * 1000:.0f}, max {max(times[name]) * 1000:.0f}); "
                f"entry-point scans: {scans}; plugin from {module}"
            )
        this, base = medians.values()
        print(f"ratio this tree / baseline: {this / base:.3f}")


if __name__ == "__main__":
    main()
