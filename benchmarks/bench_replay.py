"""The closed-loop replay of every shipped published episode: its wall-clock and CPU seconds, and
the CPU ratio against reading the same runs, measured in the same run of this script.

    .venv/bin/python benchmarks/bench_replay.py [--rounds 3]

The figure tests/test_replay_run.py once bounded ("replay in under a minute" of CPU: a fresh
clone's `make test` measured 60.6 s against its 60, beside the rest of the suite) is printed here
instead, beside its baseline: `read_run` of every shipped run (the notebooks parsed into episodes,
the part of a replay no agent code runs in). The ratio replay / read says what the agents, the
replay endpoint and the replay kernel add, whatever the machine's speed and load; each round
measures both, one after the other, and the medians are printed. Always exits 0: it reports, it
does not judge.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_super.published_runs import read_run  # noqa: E402
from pytest_super.replay.run import replay_run  # noqa: E402
from tests.support.published_data import published_runs, sample_runs  # noqa: E402


def shipped_runs() -> list[Path]:
    """Every shipped run folder (tests/data/super-reference, unpacked once)."""
    return sorted(
        p for root in (published_runs(), sample_runs()) for p in root.iterdir() if p.is_dir()
    )


def timed(work: list[Path], one: Callable[[Path], int]) -> tuple[float, float, int]:
    """(wall s, CPU s of this process, episodes) of `one(run_dir)` over every run of `work`."""
    started, cpu, episodes = time.monotonic(), time.process_time(), 0
    for run_dir in work:
        episodes += one(run_dir)
    return time.monotonic() - started, time.process_time() - cpu, episodes


def replayed(run_dir: Path) -> int:
    return len(replay_run(run_dir).episodes)


def read(run_dir: Path) -> int:
    return len(read_run(run_dir))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = shipped_runs()
    replays: list[tuple[float, float]] = []
    reads: list[tuple[float, float]] = []
    episodes = 0
    for i in range(args.rounds):
        wall, cpu, episodes = timed(runs, replayed)
        replays.append((wall, cpu))
        read_wall, read_cpu, _ = timed(runs, read)
        reads.append((read_wall, read_cpu))
        print(
            f"round {i + 1}: replay {wall:.1f} s wall, {cpu:.1f} s CPU; "
            f"read {read_wall:.1f} s wall, {read_cpu:.1f} s CPU"
        )
    replay_cpu = statistics.median(c for _, c in replays)
    read_cpu = statistics.median(c for _, c in reads)
    print(f"{len(runs)} runs, {episodes} episodes; medians of {args.rounds} rounds:")
    print(
        f"  replay: {statistics.median(w for w, _ in replays):.1f} s wall, {replay_cpu:.1f} s CPU"
    )
    print(f"  read:   {statistics.median(w for w, _ in reads):.1f} s wall, {read_cpu:.1f} s CPU")
    print(f"  CPU ratio replay / read: {replay_cpu / read_cpu:.1f}")


if __name__ == "__main__":
    main()
