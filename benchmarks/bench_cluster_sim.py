"""How many Ray nodes a SUPER run needs: the paper's published episodes replayed on a simulated
cluster of N nodes x S task slots, scheduled as the Ray backend schedules them.

Run: `python3 benchmarks/bench_cluster_sim.py [--slots 8] [--repeats 1] [--json]` (standard
library only; no Ray, no engine; under a second). It prints markdown for docs/cluster.md.

What is measured from the data (tests/data/super-reference/, unpacked by
tests/support/published_data.py): every step of a published episode (`history.ipynb`) carries a
line `Execution Start time: HH:MM:SS, End time: HH:MM:SS (duration: N seconds)`. Upstream
(super/env/environment.py, `Environment.step`) takes both stamps with `datetime.now()` around the
execution of the step's action only (a cell, an edit, a submission), so for each episode:

- cell time of a step = End - Start (stamps to the second: each difference is within 1 s, their
  sum unbiased; the `duration` field is the same time rounded down, so it is not used);
- model time before a step = its Start - the previous step's End: the model call that chose the
  action (format-error retries included) and the agent's own bookkeeping. Between two
  pre-executed cells of a Masked episode (`[pre-executed by user]`, no model call) the gap is
  harness time, about 0 s, kept as recorded;
- the recorded wall time = the last End - the first Start = all cell time + all model time after
  the first step. Stamps carry no date: a stamp earlier than the one before it is taken as the next
  day (an episode running across midnight; the largest gap is about a minute, so this is safe).

Measured (the repository's data; the script prints these, `--json` has them all):
- ReAct-SUPER Expert: 45 episodes, 2218 steps, 5.15 h of cells, 2.07 h of model time (median
  3 s a call); wall per episode median 8.5 min, mean 9.6, max 34.0.
- ReAct-SUPER Masked: 144 episodes, 5158 steps, 14.97 h of cells, 2.53 h of model time (median
  2 s a call), 53 s between pre-executed cells; wall median 4.5 min, mean 7.3, max 33.0 (8
  episodes cross midnight).
- SWE-agent Expert (`--agent swe-agent`): 45 episodes, wall median 6.0 min, max 18.4.

Not recorded, and how it is accounted for: the model call before the first step of an episode
that starts with the agent (Expert; Masked episodes start with pre-executed cells, and the call
after them is recorded) is taken as the median recorded model gap of that run; container start,
kernel start and the container's removal are `--start-s` (2 s: docs/pool.md measured 0.7-1.3 s to
start and 0.4 s to remove). `--model-scale` multiplies every model time (recorded or assumed) to
plan for a slower or faster model than the run's (gpt-4o-2024-08-06, August 2024). So a task's
duration = start + pre-executed cells and the gaps between them + cells + model time.

The compute limit is applied as the harness applies it (pytest_super/agents/history.py,
`ask_model`, as upstream `agent.py` does): before each model call, if the summed cell time
(pre-executed cells included) is above `--compute-limit` (1800 s), the episode ends there. A task
therefore never takes more than the limit + its last cell (at most the 300 s cell timeout) + its
model time + `--start-s`. Upstream had the same rule: 8 published episodes (1 Expert, 7 Masked)
ended by it, and at 1800 s the replay ends them at the same point (only upstream's empty last
step, "Total compute time exceeded", is not replayed); a lower `--compute-limit` cuts real time.

Sets (sizes of SUPER: Expert 45, Masked 152, Auto 604):
- Expert: the 45 published Expert episodes of `--agent` (react-super, the default, or swe-agent).
- Masked: the 144 published ReAct-SUPER Masked episodes; the 8 unpublished tasks are drawn with
  replacement from those 144 durations with `random.Random(--seed)`, placed after them.
- Auto: nothing is published; 604 durations drawn with replacement from the Masked durations
  (`--auto-from expert` draws from the Expert ones instead), same generator. The 10 seeds 0-9 are
  also run, and the spread of the all-sets FIFO wall time over them is printed.

Policy: one Ray task per pytest item, each needing one slot (`--super-cpus` 2, `--super-mem` 4g;
a node has S = CPUs / 2 slots), submitted in pytest's collection order, each placed when a slot
frees, first come first served, at most `--in-flight` K at once (default N x S). All slots are
alike, so this is list scheduling on min(K, N x S) machines. Collection order: a folder of SUPER's
files is collected file by file in name order (auto_gen.jsonl, expert.jsonl, masked.jsonl), each
file line by line; the dataset's line order is not in the repository, so tasks run in task-id
order (the order of the published episode folders). `--repeats R` (seeds x agents) runs each item
R times back to back, as `--super-repeat` collects them, each replaying the same episode. For
comparison: the same tasks longest first, and the lower bound max(longest task, total / slots).
Both orders come from pytest_super.ordering, the code the plugin orders
pytest's items with (collection order is `--super-order=collection`; longest first is what xdist
and Ray runs do when durations are known, issue 33). `--write-durations FILE` writes each
published task's duration as the table the package ships (pytest_super/data/super_durations.json).
"Longest task dominates" is the smallest N from which the FIFO wall time is within 5% of the
longest task (wall time never grows with N here: with independent tasks in a fixed order, no task
starts later on more slots).

Not modelled: pulling the image onto each node (pre-pull it), Ray's own dispatch time, nodes
failing, the cells' speed on other hardware than upstream's (Modal, CPU) and 2 CPUs / 4 GB.
Always exits 0 on the repository's data.
"""

from __future__ import annotations

import argparse
import heapq
import importlib
import json
import math
import random
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the package's ordering, without installing it (standard library)
    sys.path.insert(0, str(REPO))

from pytest_super import ordering  # noqa: E402  (the executors' own ordering code, issue 33)

#: the sizes of SUPER's three sets, and the file each is collected from (collection order)
SET_SIZES = {"expert": 45, "masked": 152, "auto": 604}
SET_FILES = {"auto": "auto_gen.jsonl", "expert": "expert.jsonl", "masked": "masked.jsonl"}
MODEL = "gpt-4o-2024-08-06"
NODES = (1, 4, 16, 64)
WITHIN = 0.05  # "the longest task dominates": wall time within 5% of it
SPREAD_SEEDS = 10

STEP_TIMES = re.compile(
    r"Execution Start time: (\d\d):(\d\d):(\d\d), End time: (\d\d):(\d\d):(\d\d) "
    r"\(duration: (-?\d+) seconds\)"
)
PRE_EXECUTED = "**Thought**: [pre-executed by user]"
DAY_S = 86_400


# -- the data --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One recorded step: its cell time and the time between the previous step's end and it."""

    cell_s: float
    gap_s: float | None  # None for the first step (nothing recorded before it)
    pre_executed: bool


@dataclass(frozen=True)
class Episode:
    task_id: str
    steps: tuple[Step, ...]
    midnight_wraps: int = 0

    @property
    def wall_s(self) -> float:
        """The recorded wall time: the last End - the first Start."""
        return sum(s.cell_s + (s.gap_s or 0.0) for s in self.steps)

    @property
    def cell_s(self) -> float:
        return sum(s.cell_s for s in self.steps)

    @property
    def model_gaps(self) -> list[float]:
        """The recorded model times (gaps before steps the agent chose)."""
        return [s.gap_s for s in self.steps if s.gap_s is not None and not s.pre_executed]


def _seconds(h: str, m: str, s: str) -> int:
    return int(h) * 3600 + int(m) * 60 + int(s)


def read_episode(notebook: Path) -> Episode:
    """The steps of a published `history.ipynb` with their recorded times (JSON read as is)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    stamps: list[tuple[int, int]] = []
    pre: list[bool] = []
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        match = STEP_TIMES.match(text)
        if match:
            g = match.groups()
            stamps.append((_seconds(*g[0:3]), _seconds(*g[3:6])))
            pre.append(False)
        elif text.startswith(PRE_EXECUTED) and pre:
            pre[-1] = True
    if not stamps:
        raise ValueError(f"{notebook}: no step times")
    # stamps are times of day: one earlier than the one before it is on the next day
    flat: list[int] = []
    day = wraps = 0
    for stamp in (x for pair in stamps for x in pair):
        if flat and stamp + day < flat[-1]:
            day += DAY_S
            wraps += 1
        flat.append(stamp + day)
    steps = []
    for i in range(len(stamps)):
        start, end = flat[2 * i], flat[2 * i + 1]
        gap = None if i == 0 else float(start - flat[2 * i - 1])
        steps.append(Step(cell_s=float(end - start), gap_s=gap, pre_executed=pre[i]))
    return Episode(notebook.parent.name, tuple(steps), wraps)


def read_run(folder: Path) -> list[Episode]:
    """Every episode of a run folder, in task-id order."""
    return [read_episode(p) for p in sorted(folder.glob("*/history.ipynb"))]


def published_runs_folder() -> Path:
    """The unpacked published runs of the repository (tests/support/published_data.py, formerly
    tests/published_data.py: whichever is there)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    for module in ("tests.support.published_data", "tests.published_data"):
        try:
            return importlib.import_module(module).published_runs()
        except ModuleNotFoundError:
            continue
    raise SystemExit("tests/support/published_data.py is gone: pass --runs FOLDER_OF_RUNS")


# -- durations -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Params:
    compute_limit_s: float = 1800.0
    start_s: float = 2.0
    model_scale: float = 1.0


@dataclass(frozen=True)
class Duration:
    seconds: float
    cell_s: float
    model_s: float
    ended_by_limit: bool  # ended by the compute limit before its last recorded step
    cut_s: float  # recorded cell and gap time of the steps not replayed


def task_duration(episode: Episode, params: Params, first_call_s: float) -> Duration:
    """How long the task holds its slot when it replays `episode` (see the module's docstring)."""
    cell = model = harness = 0.0
    replayed = 0
    for step in episode.steps:
        if not step.pre_executed:  # a model call comes first: the compute limit is checked
            if cell > params.compute_limit_s:
                break
            model += first_call_s if step.gap_s is None else step.gap_s
        elif step.gap_s is not None:
            harness += step.gap_s
        cell += step.cell_s
        replayed += 1
    cut = sum(s.cell_s + (s.gap_s or 0.0) for s in episode.steps[replayed:])
    model *= params.model_scale
    total = params.start_s + harness + cell + model
    return Duration(total, cell, model, replayed < len(episode.steps), cut)


@dataclass
class RunSummary:
    """What was measured from one published run (printed, and in --json)."""

    run: str
    episodes: int
    steps: int
    cell_s: float
    model_s: float
    pre_executed_s: float  # harness gaps between pre-executed cells
    recorded_wall_s: list[float]
    median_gap_s: float
    midnight_wraps: int
    episodes_starting_with_agent: int
    durations: list[Duration]

    def as_dict(self) -> dict:
        walls = sorted(self.recorded_wall_s)
        secs = sorted(d.seconds for d in self.durations)
        return {
            "run": self.run,
            "episodes": self.episodes,
            "steps": self.steps,
            "cell_s": self.cell_s,
            "model_s_recorded": self.model_s,
            "harness_gaps_between_pre_executed_s": self.pre_executed_s,
            "recorded_wall_s": {
                "total": sum(walls),
                "median": statistics.median(walls),
                "mean": statistics.fmean(walls),
                "max": walls[-1],
            },
            "median_model_gap_s": self.median_gap_s,
            "episodes_starting_with_the_agent": self.episodes_starting_with_agent,
            "midnight_wraps": self.midnight_wraps,
            "ended_by_compute_limit": sum(d.ended_by_limit for d in self.durations),
            "seconds_cut_by_compute_limit": sum(d.cut_s for d in self.durations),
            "task_duration_s": {
                "total": sum(secs),
                "median": statistics.median(secs),
                "max": secs[-1],
            },
        }


def summarize_run(name: str, episodes: list[Episode], params: Params) -> RunSummary:
    gaps = [g for e in episodes for g in e.model_gaps]
    median_gap = statistics.median(gaps)
    durations = [task_duration(e, params, median_gap) for e in episodes]
    return RunSummary(
        run=name,
        episodes=len(episodes),
        steps=sum(len(e.steps) for e in episodes),
        cell_s=sum(e.cell_s for e in episodes),
        model_s=sum(gaps),
        pre_executed_s=sum(
            s.gap_s for e in episodes for s in e.steps if s.pre_executed and s.gap_s is not None
        ),
        recorded_wall_s=[e.wall_s for e in episodes],
        median_gap_s=median_gap,
        midnight_wraps=sum(e.midnight_wraps for e in episodes),
        episodes_starting_with_agent=sum(not e.steps[0].pre_executed for e in episodes),
        durations=durations,
    )


@dataclass(frozen=True)
class Item:
    """One pytest item as the cluster sees it."""

    name: str
    seconds: float


def _fill(
    name: str, published: list[tuple[str, float]], pool: Sequence[float], size: int, rng
) -> tuple[list[Item], int]:
    """`published` then draws from `pool` up to `size` items: (items, how many drawn)."""
    items = [Item(f"{name}/{task}", s) for task, s in published[:size]]
    drawn = size - len(items)
    items += [Item(f"{name}/drawn-{i + 1}", rng.choice(pool)) for i in range(drawn)]
    return items, drawn


def build_sets(
    runs: dict[str, RunSummary],
    episodes: dict[str, list[Episode]],
    *,
    agent: str,
    auto_from: str,
    seed: int,
    repeats: int,
) -> tuple[dict[str, list[Item]], dict[str, int]]:
    """The items of each set in collection order, and how many durations each set drew."""
    rng = random.Random(seed)

    def published(set_name: str, run_agent: str) -> list[tuple[str, float]]:
        run = f"{MODEL}_{run_agent}_{set_name}"
        return [
            (e.task_id, d.seconds) for e, d in zip(episodes[run], runs[run].durations, strict=True)
        ]

    expert_pub = published("expert", agent)
    masked_pub = published("masked", "react-super")
    pools = {"expert": [s for _, s in expert_pub], "masked": [s for _, s in masked_pub]}
    sets: dict[str, list[Item]] = {}
    drawn: dict[str, int] = {}
    # the draw order is fixed (expert, masked, auto) whatever the collection order
    for set_name, pub in (("expert", expert_pub), ("masked", masked_pub), ("auto", [])):
        pool = pools[auto_from if set_name == "auto" else set_name]
        sets[set_name], drawn[set_name] = _fill(set_name, pub, pool, SET_SIZES[set_name], rng)
    if repeats > 1:  # --super-repeat collects <id>[repeat1], <id>[repeat2], ... back to back
        sets = {k: [i for i in v for _ in range(repeats)] for k, v in sets.items()}
    ordered = {k: sets[k] for k in sorted(SET_FILES, key=SET_FILES.__getitem__)}
    return ordered, drawn


# -- the scheduler -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    node: int
    slot: int
    start: float
    end: float


def schedule(
    durations: Sequence[float], nodes: int, slots: int, in_flight: int | None = None
) -> list[Placement]:
    """FIFO list scheduling: each task, in the given order, starts as soon as fewer than
    K = min(in_flight, N x S) tasks run, on the slot that has been free longest."""
    if nodes < 1 or slots < 1 or (in_flight is not None and in_flight < 1):
        raise ValueError("nodes, slots and in_flight must be at least 1")
    cap = nodes * slots if in_flight is None else min(in_flight, nodes * slots)
    running = [0.0] * cap  # when each of the K places in flight frees
    free = [(0.0, n, s) for n in range(nodes) for s in range(slots)]  # sorted: a valid heap
    placed = []
    for seconds in durations:
        at = heapq.heappop(running)
        # fewer than K <= N x S tasks run at `at`: the slot free longest is free by then
        slot_free, node, slot = heapq.heappop(free)
        at = max(at, slot_free)
        end = at + seconds
        placed.append(Placement(node, slot, at, end))
        heapq.heappush(running, end)
        heapq.heappush(free, (end, node, slot))
    return placed


def wall_time(
    durations: Sequence[float], nodes: int, slots: int, in_flight: int | None = None
) -> float:
    """The wall time (makespan) of `schedule`."""
    return max((p.end for p in schedule(durations, nodes, slots, in_flight)), default=0.0)


def in_order(durations: Sequence[float], order: str) -> list[float]:
    """`durations` in the order the executors start them (pytest_super.ordering, which the plugin
    applies to pytest's items): "collection" (FIFO) or "longest" (longest first)."""
    return ordering.in_order(durations, lambda seconds: seconds, order)


def longest_first(durations: Sequence[float]) -> list[float]:
    return in_order(durations, ordering.LONGEST)


def lower_bound(
    durations: Sequence[float], nodes: int, slots: int, in_flight: int | None = None
) -> float:
    """No schedule beats max(longest task, total / usable slots)."""
    cap = nodes * slots if in_flight is None else min(in_flight, nodes * slots)
    return max(max(durations, default=0.0), sum(durations) / cap)


def dominance_nodes(
    durations: Sequence[float], slots: int, in_flight: int | None = None, within: float = WITHIN
) -> int | None:
    """The smallest N from which the wall time is within `within` of the longest task (None if
    never, with K too small). Wall time does not grow with N, so a bisection finds it."""
    if not durations:
        return None
    target = (1.0 + within) * max(durations)
    lo, hi = 1, max(1, math.ceil(len(durations) / slots))
    if wall_time(durations, hi, slots, in_flight) > target:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if wall_time(durations, mid, slots, in_flight) <= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


# -- the report ----------------------------------------------------------------------------------


def hmm(seconds: float) -> str:
    """h:mm, rounded to the minute."""
    minutes = round(seconds / 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def simulate(
    sets: dict[str, list[Item]], nodes: Sequence[int], slots: int, in_flight: int | None
) -> dict[str, dict]:
    """Per set and for all sets together: the rows of the table and the dominance point."""
    groups = {"all": [i for items in sets.values() for i in items], **sets}
    out = {}
    for name, items in groups.items():
        d = in_order([i.seconds for i in items], ordering.COLLECTION)
        lpt = in_order(d, ordering.LONGEST)
        base = wall_time(d, 1, slots, in_flight)
        rows = []
        for n in nodes:
            fifo = wall_time(d, n, slots, in_flight)
            rows.append(
                {
                    "nodes": n,
                    "slots": n * slots if in_flight is None else min(in_flight, n * slots),
                    "fifo_s": fifo,
                    "speedup": base / fifo,
                    "longest_first_s": wall_time(lpt, n, slots, in_flight),
                    "lower_bound_s": lower_bound(d, n, slots, in_flight),
                }
            )
        out[name] = {
            "tasks": len(d),
            "total_s": sum(d),
            "longest_s": max(d),
            "fifo_n1_s": base,
            "rows": rows,
            "dominance_nodes_fifo": dominance_nodes(d, slots, in_flight),
            "dominance_nodes_longest_first": dominance_nodes(lpt, slots, in_flight),
        }
    return out


LABELS = {"all": "all three", "auto": "Auto", "expert": "Expert", "masked": "Masked"}


def markdown(result: dict, slots: int) -> str:
    lines = [
        f"| set | nodes N | slots N×{slots} | FIFO wall (h:mm) | speed-up vs N=1 "
        "| longest first (h:mm) | lower bound (h:mm) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in result.items():
        for row in r["rows"]:
            lines.append(
                f"| {LABELS[name]} | {row['nodes']} | {row['slots']} | {hmm(row['fifo_s'])} "
                f"| {row['speedup']:.1f}× | {hmm(row['longest_first_s'])} "
                f"| {hmm(row['lower_bound_s'])} |"
            )
    lines += [
        "",
        "| set | tasks | task-hours | longest task (h:mm) | FIFO wall within 5% of it from N = "
        "| longest first: from N = |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in result.items():
        fifo_n, lpt_n = r["dominance_nodes_fifo"], r["dominance_nodes_longest_first"]
        lines.append(
            f"| {LABELS[name]} | {r['tasks']} | {r['total_s'] / 3600:.1f} | {hmm(r['longest_s'])} "
            f"| {fifo_n or 'never'} | {lpt_n or 'never'} |"
        )
    return "\n".join(lines)


def measured_lines(runs: dict[str, RunSummary], used: list[str]) -> list[str]:
    lines = []
    for name in used:
        s = runs[name]
        walls = sorted(s.recorded_wall_s)
        secs = sorted(d.seconds for d in s.durations)
        lines.append(
            f"- `{name}`: {s.episodes} episodes, {s.steps} steps; "
            f"cell time {s.cell_s / 3600:.2f} h, model time {s.model_s / 3600:.2f} h "
            f"(median {s.median_gap_s:.0f} s a call), "
            f"{s.pre_executed_s:.0f} s between pre-executed cells; recorded wall per episode "
            f"median {statistics.median(walls) / 60:.1f} min, mean "
            f"{statistics.fmean(walls) / 60:.1f}, max {walls[-1] / 60:.1f} "
            f"({s.midnight_wraps} across midnight); replayed task duration median "
            f"{statistics.median(secs) / 60:.1f} min, max {secs[-1] / 60:.1f} min; "
            f"ended at the compute limit: {sum(d.ended_by_limit for d in s.durations)} "
            f"({sum(d.cut_s for d in s.durations):.0f} s of recorded steps after it not replayed)"
        )
    return lines


#: the command that regenerates the table shipped with the package (pytest_super/durations.py)
WRITE_COMMAND = "python benchmarks/bench_cluster_sim.py --write-durations pytest_super/data/super_durations.json"


def durations_table(
    runs: dict[str, RunSummary], episodes: dict[str, list[Episode]], agent: str, params: Params
) -> dict:
    """SUPER's task ids -> seconds a task holds its slot (task_duration: the published Expert
    episodes of `agent` and the Masked ones of react-super), for the shipped table."""
    seconds: dict[str, float] = {}
    used = [f"{MODEL}_{agent}_expert", f"{MODEL}_react-super_masked"]
    for run in used:
        for episode, duration in zip(episodes[run], runs[run].durations, strict=True):
            seconds[episode.task_id] = round(duration.seconds, 1)
    return {
        "about": "seconds each SUPER task holds its slot, from the paper's published episodes "
        "(benchmarks/bench_cluster_sim.py: start + cells + model time, compute limit applied)",
        "command": WRITE_COMMAND,
        "runs": used,
        "parameters": {
            "compute_limit_s": params.compute_limit_s,
            "start_s": params.start_s,
            "model_scale": params.model_scale,
        },
        "seconds": dict(sorted(seconds.items())),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", default=",".join(map(str, NODES)), help="N values (1,4,16,64)")
    p.add_argument("--slots", type=int, default=8, help="task slots per node S (8)")
    p.add_argument("--repeats", type=int, default=1, help="runs per task, seeds x agents (1)")
    p.add_argument("--in-flight", type=int, help="at most K tasks at once (default N x S)")
    p.add_argument("--seed", type=int, default=0, help="seed of the drawn durations (0)")
    p.add_argument("--agent", choices=["react-super", "swe-agent"], default="react-super")
    p.add_argument("--auto-from", choices=["masked", "expert"], default="masked")
    p.add_argument("--compute-limit", type=float, default=1800.0, help="seconds of cells (1800)")
    p.add_argument("--start-s", type=float, default=2.0, help="container start+removal s (2)")
    p.add_argument("--model-scale", type=float, default=1.0, help="x every model time (1)")
    p.add_argument("--runs", type=Path, help="a folder of published runs (default: the repo's)")
    p.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    p.add_argument(
        "--write-durations",
        type=Path,
        metavar="FILE",
        help="write the task-duration table the package ships (pytest_super/durations.py) and exit",
    )
    args = p.parse_args(argv)
    args.node_list = [int(n) for n in args.nodes.split(",")]
    if args.slots < 1 or args.repeats < 1 or min(args.node_list) < 1:
        p.error("--slots, --repeats and --nodes must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    params = Params(args.compute_limit, args.start_s, args.model_scale)
    folder = args.runs or published_runs_folder()
    episodes = {p.name: read_run(p) for p in sorted(folder.iterdir()) if p.is_dir()}
    episodes = {k: v for k, v in episodes.items() if v}
    runs = {k: summarize_run(k, v, params) for k, v in episodes.items()}
    used = [f"{MODEL}_{args.agent}_expert", f"{MODEL}_react-super_masked"]
    missing = [u for u in used if u not in runs]
    if missing:
        print(f"no published run {missing} in {folder}", file=sys.stderr)
        return 2

    def build(seed: int) -> tuple[dict[str, list[Item]], dict[str, int]]:
        return build_sets(
            runs,
            episodes,
            agent=args.agent,
            auto_from=args.auto_from,
            seed=seed,
            repeats=args.repeats,
        )

    if args.write_durations:
        table = durations_table(runs, episodes, args.agent, params)
        args.write_durations.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {len(table['seconds'])} task durations to {args.write_durations}")
        return 0
    sets, drawn = build(args.seed)
    result = simulate(sets, args.node_list, args.slots, args.in_flight)
    spread: dict[int, list[float]] = {n: [] for n in args.node_list}
    for seed in range(SPREAD_SEEDS):
        other, _ = build(seed)
        everything = [i.seconds for items in other.values() for i in items]
        for n in args.node_list:
            spread[n].append(wall_time(everything, n, args.slots, args.in_flight))

    parameters = {
        "slots_per_node": args.slots,
        "repeats": args.repeats,
        "in_flight": args.in_flight,
        "seed": args.seed,
        "expert_agent": args.agent,
        "auto_from": args.auto_from,
        "compute_limit_s": args.compute_limit,
        "start_s": args.start_s,
        "model_scale": args.model_scale,
        "collection_order": [SET_FILES[k] for k in sets],
        "drawn": drawn,
    }
    if args.json:
        json.dump(
            {
                "parameters": parameters,
                "measured": {k: runs[k].as_dict() for k in used},
                "sets": result,
                "all_sets_fifo_s_over_seeds": {
                    str(n): {"min": min(v), "max": max(v), "seeds": SPREAD_SEEDS}
                    for n, v in spread.items()
                },
            },
            sys.stdout,
            indent=2,
        )
        print()
        return 0

    print("Measured from the published episodes (cell = End - Start of each step; model =")
    print("Start - the previous End, before steps the agent chose):\n")
    print("\n".join(measured_lines(runs, used)))
    expert = f"{SET_SIZES['expert'] - drawn['expert']} published ({args.agent})"
    if drawn["expert"]:
        expert += f" + {drawn['expert']} drawn"
    print(
        f"\nSets: Expert {expert}; Masked {SET_SIZES['masked'] - drawn['masked']} published + "
        f"{drawn['masked']} drawn; Auto {drawn['auto']} drawn from the "
        f"{args.auto_from.capitalize()} durations (seed {args.seed}). Repeats {args.repeats}. "
        f"Collection order: {', '.join(parameters['collection_order'])}. Per task: "
        f"{args.start_s:g} s start + cells + model time x {args.model_scale:g}, compute limit "
        f"{args.compute_limit:g} s.\n"
    )
    print(markdown(result, args.slots))
    ranges = ", ".join(f"N={n} {hmm(min(v))}-{hmm(max(v))}" for n, v in spread.items())
    print(f"\nAll three sets, FIFO wall over seeds 0-{SPREAD_SEEDS - 1}: {ranges}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
