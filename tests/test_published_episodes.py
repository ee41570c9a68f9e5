"""The paper's own published episodes as the oracle of scoring, the edit tool and the import.

Over every episode in `../shared/super-reference/trajectories/` (ReAct-SUPER Expert 45 and
Masked 144, SWE-agent Expert 45): its pre-executed edits parse with our edit tool; our "submitted"
of its final action equals `metrics.json`; our script-executed over its observations equals
`metrics.json`'s `entrypoint` wherever the query names the script to run; and the means of the
imported results equal the means of the `metrics.json` files. The import and the replay of a
published episode run on episodes written here in the published notebook format (the real ones
clone GitHub repositories, which this machine cannot reach).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from pytest_super import report, scoring
from pytest_super.agents.base import ExitStatus
from pytest_super.agents.replay import ReplayAgent, replayed_steps
from pytest_super.cli import main as cli
from pytest_super.edit import parse_edit
from pytest_super.episodes import (
    PUBLISHED_PREFIX,
    entrypoint_from_query,
    read_episode,
    read_run,
)
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.local import start_local_kernel
from pytest_super.runner import RunSettings, run_task
from pytest_super.tasks import Cell, Task
from pytest_super.trajectory import load_trajectory

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "super-reference"
PUBLISHED = REFERENCE / "trajectories"
EPISODES = sorted(PUBLISHED.glob("*/*/history.ipynb")) if PUBLISHED.is_dir() else []
#: the three published runs hold 45 + 144 + 45 episodes (ABOUT.md)
EPISODE_COUNT = 234


def _require_reference() -> None:
    """The reference is part of the workspace; without CI a missing copy skips, with CI fails."""
    if not PUBLISHED.is_dir() and not os.environ.get("CI"):
        pytest.skip(f"SUPER's published episodes are not at {PUBLISHED}")


def _episode(notebook: Path):
    run = notebook.parent.parent.name
    model, agent, set_name = run.rsplit("_", 2)
    return read_episode(notebook.parent, model=model, agent=agent, set_name=set_name)


def _metrics_means(run: Path) -> dict[str, float]:
    metrics = [json.loads(p.read_text()) for p in sorted(run.glob("*/metrics.json"))]
    means = {}
    for key in ("submitted", "output_match", "checkpoints", "entrypoint"):
        values = [m[key] for m in metrics if m[key] is not None]
        means[key] = sum(values) / len(values)
    return means


def test_the_published_episodes_are_all_there() -> None:
    _require_reference()
    assert len(EPISODES) == EPISODE_COUNT


@pytest.mark.parametrize(
    "notebook", EPISODES, ids=[f"{p.parent.parent.name[18:]}/{p.parent.name}" for p in EPISODES]
)
def test_episode_scores_as_its_metrics(notebook: Path) -> None:
    episode = _episode(notebook)
    metrics = episode.metrics

    for step in episode.steps:
        if step.pre_executed and step.action == "edit":
            parse_edit(step.content)  # raises EditFormatError if our tool cannot read it

    final = episode.final_action
    submitted = False
    if final is not None and final.action == "submit":
        submitted = scoring.is_submitted(scoring.parse_submission(final.content))
    assert submitted == bool(metrics["submitted"]), final

    entrypoint = entrypoint_from_query(episode.query)
    if entrypoint is not None and metrics["entrypoint"] is not None:
        ours = scoring.score_script_executed(entrypoint, scoring.executed_cells(episode.steps))
        assert ours == metrics["entrypoint"], entrypoint


def test_script_executed_is_checked_on_every_episode_whose_query_names_the_script() -> None:
    """Masked queries say "your goal is to successfully run ```...```"; 94 of them name exactly
    one script and have a published entrypoint score (the others name none or several)."""
    _require_reference()
    compared = 0
    for notebook in EPISODES:
        episode = _episode(notebook)
        if entrypoint_from_query(episode.query) and episode.metrics["entrypoint"] is not None:
            compared += 1
    assert compared == 94


def test_imported_results_have_the_means_of_the_metrics(tmp_path: Path, capsys) -> None:
    _require_reference()
    assert cli(["import-trajectories", str(PUBLISHED), "--out", str(tmp_path)]) == 0
    runs = sorted(p for p in PUBLISHED.iterdir() if p.is_dir())
    assert len(runs) == 3
    accuracy = {}
    for run in runs:
        records = report.read_results(tmp_path / run.name / "results.jsonl")
        assert len(records) == len(list(run.glob("*/metrics.json")))
        (row,) = [r for r in report.summarize(records) if r.group == run.name.rsplit("_", 1)[1]]
        expected = _metrics_means(run)
        assert row.submitted == pytest.approx(expected["submitted"], abs=1e-12)
        assert row.accuracy == pytest.approx(expected["output_match"], abs=1e-12)
        assert row.landmarks == pytest.approx(expected["checkpoints"], abs=1e-12)
        assert row.script_executed == pytest.approx(expected["entrypoint"], abs=1e-12)
        accuracy[run.name.split("_", 1)[1]] = round(100 * row.accuracy, 1)
        assert all(r.properties["agent"].startswith(PUBLISHED_PREFIX) for r in records)
    # The paper's Table 4: ReAct-SUPER Expert accuracy 14.4 (this folder is that run). The other
    # folders are stated, not tuned: SWE-agent Expert 16.7 vs the paper's 16.3 (a mean of three
    # seeds), ReAct-SUPER Masked 41.1 vs 41.6 (Table 6; 144 of 152 episodes were published).
    assert accuracy == {
        "react-super_expert": 14.4,
        "swe-agent_expert": 16.7,
        "react-super_masked": 41.1,
    }
    masked = report.read_results(tmp_path / runs[1].name / "results.jsonl")
    other = [r for r in masked if r.properties["category"] in ("custom", "customgoal")]
    assert len(other) == 5
    groups = {r.group: r.tasks for r in report.summarize(masked)}
    assert groups["masked:other"] == 5 and groups["masked:configuration"] == 18


def test_imported_trajectories_replay_the_agents_actions(tmp_path: Path) -> None:
    _require_reference()
    for run in sorted(p for p in PUBLISHED.iterdir() if p.is_dir()):
        assert cli(["import-trajectories", str(run), "--out", str(tmp_path)]) == 0
        for episode in read_run(run):
            saved = load_trajectory(
                tmp_path / run.name / "trajectories" / f"{episode.task_id}.json"
            )
            assert saved.task_id == episode.task_id and saved.query == episode.query
            own = [s for s in episode.steps if not s.pre_executed]
            skipped = {"format_error", "limit"}
            assert [s.content for s in replayed_steps(saved)] == [
                s.content for s in own if s.action not in skipped
            ]


# -- import and replay of episodes in the published format ------------------------------------------


def _published_notebook(query: str, steps: list[tuple[str, str, str, str, int]]) -> str:
    """A history.ipynb as SUPER writes it: (thought, action type, content, observation, seconds)."""
    nb = v4.new_notebook()
    nb.cells.append(v4.new_markdown_cell(f"### Query\n{query}"))
    nb.cells.append(v4.new_markdown_cell("### Prompt\n<details>\n[...]\n</details>\n"))
    for number, (thought, kind, content, observation, seconds) in enumerate(steps, start=1):
        nb.cells.append(v4.new_markdown_cell(f"### Step {number}"))
        nb.cells.append(
            v4.new_markdown_cell(
                f"Execution Start time: 10:00:00, End time: 10:00:{seconds:02} "
                f"(duration: {seconds} seconds)"
            )
        )
        nb.cells.append(v4.new_markdown_cell(f"**Thought**: {thought}"))
        nb.cells.append(v4.new_markdown_cell(f"**Action ({kind})**:"))
        output = v4.new_output("execute_result", data={"text/plain": [observation]})
        nb.cells.append(v4.new_code_cell(source=content, outputs=[output]))
    return nbformat.writes(nb)


QUERY = 'Report the answer as a json structured as follows: {"answer": 0}'


def _write_published(root: Path, run: str, task_id: str, steps, metrics: dict) -> Path:
    folder = root / run / task_id
    folder.mkdir(parents=True)
    (folder / "history.ipynb").write_text(_published_notebook(QUERY, steps))
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return root / run


REACT_STEPS = [
    ("[pre-executed by user]", "execute", "open('n.txt', 'w').write('6\\n')", "", 0),
    ("I compute.", "execute", "print(7 * int(open('n.txt').read()))", "42\n", 1),
    ("Fix it.", "edit", "n.txt\n<<<BEFORE_EDIT>>>\n6\n<<<AFTER_EDIT>>>\n7\n\n", "Edit was ok", 0),
    ("", "", "", "Thought or action not provided in the correct format.", 0),
    ("Done.", "submit", "{'answer': 42}", "", 0),
]
SWE_STEPS = [
    ("Make a file.", "None", "open('m.py', 'w').write('x = 6\\nprint(x * 7)\\n')", "", 0),
    ("Look at it.", "open", "open m.py", "[File: m.py (2 lines total)]", 0),
    ("Change it.", "edit", "edit 1:1\nx = 7\nend_of_edit", "File updated.", 0),
    ("Run it.", "None", "!python m.py", "49\n", 1),
    ("Done.", "submit", 'submit {"answer": 49}', "", 0),
]


@pytest.fixture
def local_env(tmp_path: Path):
    kernels = []

    def new_kernel():
        kernels.append(start_local_kernel(KernelSettings(backend="local"), task_id="tiny"))
        return kernels[-1]

    yield new_kernel
    for kernel in kernels:
        kernel.close()


PREFIX = (Cell(kind="execute", code="open('n.txt', 'w').write('6\\n')"),)


@pytest.mark.parametrize(
    ("run", "steps", "answer", "landmark", "expected_actions"),
    [
        (
            "gpt-4o-2024-08-06_react-super_masked",
            REACT_STEPS,
            {"answer": 42},
            r"Edit was successful",  # only the edit feedback says it (issue 9, item 10)
            ["execute", "execute", "edit", "submit"],
        ),
        (
            "gpt-4o-2024-08-06_swe-agent_expert",
            SWE_STEPS,
            {"answer": 49},
            r"\(2 lines total\)",  # only the file viewer says it
            ["execute", "open", "edit", "execute", "submit"],
        ),
    ],
    ids=["react-super", "swe-agent"],
)
def test_replay_agent_replays_an_imported_published_episode(
    tmp_path: Path, local_env, run: str, steps, answer, landmark, expected_actions
) -> None:
    metrics = {"submitted": 1, "output_match": 1.0, "checkpoints": 0.5, "entrypoint": None}
    published = _write_published(tmp_path / "published", run, "tiny", steps, metrics)
    assert cli(["import-trajectories", str(published), "--out", str(tmp_path / "reports")]) == 0
    imported = tmp_path / "reports" / run
    (record,) = report.read_results(imported / "results.jsonl")
    assert record.properties["accuracy"] == 1.0 and record.properties["landmarks"] == 0.5
    assert record.outcome == "passed" and record.properties["submitted"] is True

    masked = "masked" in run
    task = Task(
        id="tiny",
        set="masked" if masked else "expert",
        query=QUERY,
        answer=answer,
        landmarks=(landmark,),
        pre_executed=PREFIX if masked else (),  # the runner replays the task's own prefix
    )
    settings = RunSettings(agent="replay", options={"replay_path": str(imported / "trajectories")})
    result = run_task(task, ReplayAgent(), local_env, settings, tmp_path / "ours" / "tiny.json")
    assert result.exit_status is ExitStatus.SUBMITTED
    assert result.accuracy == 1.0 and result.submitted
    assert result.landmarks == 1.0
    done = load_trajectory(tmp_path / "ours" / "tiny.json").steps
    assert [s.action for s in done] == expected_actions
    assert [s.pre_executed for s in done][:1] == [masked]
    if masked:
        assert "42" in done[1].output and done[2].observation.startswith("Edit was successful")
    else:
        assert "(2 lines total)" in done[1].observation and "49" in done[3].output


def test_report_shows_our_run_next_to_the_papers_agents_task_by_task(tmp_path: Path, capsys):
    metrics = {"submitted": 1, "output_match": 1.0, "checkpoints": 0.5, "entrypoint": None}
    run = "gpt-4o-2024-08-06_react-super_expert"
    published = _write_published(tmp_path / "published", run, "tiny", REACT_STEPS, metrics)
    (published / "other").mkdir()
    (published / "other" / "history.ipynb").write_text(_published_notebook(QUERY, REACT_STEPS[:2]))
    (published / "other" / "metrics.json").write_text(
        json.dumps({"submitted": 0, "output_match": 0.0, "checkpoints": 0.0, "entrypoint": None})
    )
    assert cli(["import-trajectories", str(published), "--out", str(tmp_path / "reports")]) == 0
    ours = tmp_path / "ours.jsonl"
    writer = report.ResultsWriter(ours)
    writer.write(
        report.TaskRecord(
            "tiny",
            "failed",
            {
                "set": "expert",
                "agent": "react-super",
                "model": "gpt-4o",
                "accuracy": 0.5,
                "landmarks": 1.0,
                "submitted": True,
                "script_executed": None,
            },
        )
    )
    writer.close()
    capsys.readouterr()
    assert (
        cli(["report", "--by-task", str(ours), str(tmp_path / "reports" / run / "results.jsonl")])
        == 0
    )
    table = capsys.readouterr().out.splitlines()
    header = table[0]
    assert "A:acc%" in header and "B:acc%" in header  # runs are letters, named under the table
    assert table[-2:] == ["A: react-super/gpt-4o", "B: published:react-super/gpt-4o-2024-08-06"]
    (tiny,) = [line.split() for line in table if line.startswith("tiny")]
    assert tiny[1:] == ["failed", "50.0", "100.0", "1", "-", "passed", "100.0", "50.0", "1", "-"]
    (other,) = [line.split() for line in table if line.startswith("other")]
    assert other[1:6] == ["-"] * 5 and other[6:8] == ["failed", "0.0"]


def test_import_names_a_folder_that_is_not_a_published_run(tmp_path: Path, capsys) -> None:
    (tmp_path / "x").mkdir()
    assert cli(["import-trajectories", str(tmp_path / "x")]) == 2
    assert "no published episodes" in capsys.readouterr().err
