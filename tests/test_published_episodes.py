"""The paper's own published episodes as the oracle of scoring, the edit tool and the import.

Over every episode of the published runs kept in tests/data/super-reference/ (ReAct-SUPER
Expert 45 and Masked 144, SWE-agent Expert 45; a run added there is taken without an edit here): its pre-executed edits parse with our edit tool; our "submitted"
of its final action equals `metrics.json`; our script-executed over its observations equals
`metrics.json`'s `entrypoint` wherever the query names the script to run; and the means of the
imported results equal the means of the `metrics.json` files. The import and the replay of a
published episode run on episodes written here in the published notebook format (the real ones
clone GitHub repositories, which this machine cannot reach).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from pytest_super import report, scoring
from pytest_super.agents.base import ExitStatus
from pytest_super.agents.replay import ReplayAgent, replayed_steps
from pytest_super.cli import main as cli
from pytest_super.edit import parse_edit
from pytest_super.environment import AgentOptions
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.local import start_local_kernel
from pytest_super.published_runs import (
    PUBLISHED_PREFIX,
    entrypoint_from_query,
    episode_record,
    read_episode,
    read_run,
)
from pytest_super.runner import EpisodeSettings, run_episode
from pytest_super.tasks import Cell, Task
from pytest_super.trajectory import load_trajectory
from tests.support.published_data import published_runs, sample_runs

PUBLISHED = published_runs()
SAMPLES = sample_runs()
#: every run the data holds: the published runs, then the sample runs (a few episodes of a run)
RUNS = sorted(p for root in (PUBLISHED, SAMPLES) for p in root.iterdir() if p.is_dir())
EPISODES = sorted(n for run in RUNS for n in run.glob("*/history.ipynb"))
SWE_MASKED = SAMPLES / "gpt-4o-2024-08-06_swe-agent_masked"
#: what is known of the runs the data holds today; a run added to the data is checked by every
#: test without an entry here
PAPER_ACCURACY = {  # the paper's Table 4 / Table 6 and what the published files give
    "react-super_expert": 14.4,  # Table 4 exactly
    "swe-agent_expert": 16.7,  # Table 4: 16.3, a mean of three seeds
    "react-super_masked": 41.1,  # Table 6: 41.6 over 152; 144 episodes were published
}
SCRIPT_COMPARED = {"react-super_masked": 109}
#: our script-executed beside the paper's metric on every episode the data holds
#: (scripts/script-executed-agreement.py wrote it)
AGREEMENT = Path(__file__).parent / "data" / "super-reference" / "script-executed.jsonl"
AGREEMENT_SCRIPT = Path(__file__).parent.parent / "scripts" / "script-executed-agreement.py"


def _short(run: Path) -> str:
    return run.name.split("_", 1)[1]


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


def test_the_data_holds_the_published_runs_and_the_samples() -> None:
    """The oracle never skips: the data is in the repository, and each episode folder holds its
    scores (the runs' sizes come from the data, not from here)."""
    assert len(RUNS) >= 4 and len(EPISODES) >= 238
    for run in RUNS:
        folders = [p for p in run.iterdir() if p.is_dir()]
        assert folders and all((f / "metrics.json").is_file() for f in folders), run


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
        submitted = scoring.read_submission(final.content).submitted
    assert submitted == bool(metrics["submitted"]), final

    entrypoint = entrypoint_from_query(episode.query)
    if entrypoint is not None and metrics["entrypoint"] is not None:
        ours = scoring.score_script_executed(entrypoint, scoring.executed_cells(episode.steps))
        assert ours == metrics["entrypoint"], entrypoint


@pytest.mark.parametrize("run", RUNS, ids=_short)
def test_script_executed_is_checked_where_the_query_names_the_script(run: Path) -> None:
    """Masked queries say "your goal is to successfully run ```...```"; where they name exactly
    one script and the episode has a published entrypoint score, the test above compares ours."""
    compared = 0
    for episode in read_run(run):
        if entrypoint_from_query(episode.query) and episode.metrics["entrypoint"] is not None:
            compared += 1
    if _short(run) in SCRIPT_COMPARED:
        assert compared == SCRIPT_COMPARED[_short(run)]
    elif run.name.endswith("_masked"):
        assert compared > 0


def test_script_executed_agrees_with_the_papers_metric_on_every_episode_it_is_computed(tmp_path):
    """Regenerated from the shipped runs, the comparison of ours with the published `entrypoint`
    scores is the kept one, and ours agrees wherever it is computed: 112 of 112, where the rule
    that took only a query naming exactly one script computed 96 (no block of two scripts, no
    `python -m` module)."""
    import subprocess
    import sys

    out = tmp_path / "agreement.jsonl"
    done = subprocess.run(
        [sys.executable, str(AGREEMENT_SCRIPT), *map(str, RUNS), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == AGREEMENT.read_text(), done.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    computed = [r for r in rows if r["ours"] is not None]
    assert [r for r in computed if r["ours"] != r["published"]] == []
    assert (len(rows), len(computed)) == (227, 112)
    assert "ours computed on 112 (the query names the script): 112 of 112 agree" in done.stdout
    by_task = {(r["run"].split("_", 1)[1], r["task"]): r["entrypoint"] for r in rows}
    assert by_task["react-super_masked", "colbert_data"] == "colbert/train.py"
    assert by_task["swe-agent_masked", "amrbart_configuration"] == (
        "train-AMRBART-large-AMRParsing.sh"
    )


@pytest.mark.parametrize("run", RUNS, ids=_short)
def test_imported_results_have_the_means_of_the_metrics(run: Path, tmp_path: Path, capsys) -> None:
    assert cli(["import-trajectories", str(run), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    folders = [p for p in run.iterdir() if p.is_dir()]
    assert f"imported {len(folders)} episodes of {run.name}" in printed
    records = report.read_results(tmp_path / run.name / "results.jsonl")
    assert len(records) == len(folders)
    (row,) = [r for r in report.summarize(records) if r.group == run.name.rsplit("_", 1)[1]]
    expected = _metrics_means(run)
    assert row.submitted == pytest.approx(expected["submitted"], abs=1e-12)
    assert row.accuracy == pytest.approx(expected["output_match"], abs=1e-12)
    assert row.landmarks == pytest.approx(expected["checkpoints"], abs=1e-12)
    assert row.script_executed == pytest.approx(expected["entrypoint"], abs=1e-12)
    assert all(r.properties["agent"].startswith(PUBLISHED_PREFIX) for r in records)
    if _short(run) in PAPER_ACCURACY:
        assert round(100 * row.accuracy, 1) == PAPER_ACCURACY[_short(run)]
    if _short(run) == "react-super_masked":
        other = [r for r in records if r.properties["category"] in ("custom", "customgoal")]
        assert len(other) == 5
        groups = {r.group: r.tasks for r in report.summarize(records)}
        assert groups["masked:other"] == 5 and groups["masked:configuration"] == 18


@pytest.mark.parametrize("run", RUNS, ids=_short)
def test_imported_trajectories_replay_the_agents_actions(run: Path, tmp_path: Path) -> None:
    assert cli(["import-trajectories", str(run), "--out", str(tmp_path)]) == 0
    for episode in read_run(run):
        saved = load_trajectory(tmp_path / run.name / "trajectories" / f"{episode.task_id}.json")
        assert saved.task_id == episode.task_id and saved.query == episode.query
        own = [s for s in episode.steps if not s.pre_executed]
        skipped = {"format_error", "limit"}
        assert [(s.action, s.content) for s in replayed_steps(saved)] == [
            (s.action, s.content) for s in own if s.action not in skipped
        ]
        # nothing the runner did (prefix cells, its waits, pre-executed edits) is replayed, and
        # no limit ending is sent to the kernel as code
        assert not any(s.content.startswith(("EDITING `", "exit_")) for s in replayed_steps(saved))


# -- SWE-agent on Masked: the samples of its layout ---------------------------------------------


def _sample(task_id: str):
    return read_episode(
        SWE_MASKED / task_id, model="gpt-4o-2024-08-06", agent="swe-agent", set_name="masked"
    )


def test_swe_masked_pre_executed_edits_are_edits_with_path_before_and_after() -> None:
    episode = _sample("dpt_goal")
    edits = [s for s in episode.steps if s.pre_executed and s.action == "edit"]
    assert len(edits) == 3
    first = parse_edit(edits[0].content)
    assert first.file == "/content/dpt/data_utils.py"
    assert "def load_dataset(self, split):" in first.before
    assert "files = {" in first.after and "files = {" not in first.before
    assert all(s.cell_status == "ok" for s in edits)
    assert not any(s.content.startswith("EDITING") for s in episode.steps)
    # the prefix comes first: no pre-executed step after the agent's first own step
    flags = [s.pre_executed for s in episode.steps]
    assert flags == sorted(flags, reverse=True)


def test_swe_masked_continuations_are_the_prefixs_waits() -> None:
    episode = _sample("amrbart_configuration")
    (wait,) = [s for s in episode.steps if s.action == "continue_wait"]
    assert wait.pre_executed and wait.content == "" and wait.thought == "[continued after timeout]"
    assert not any(s.action == "format_error" for s in episode.steps)


@pytest.mark.parametrize(
    ("task_id", "status"),
    [
        ("dpt_goal", "compute_limit"),
        ("acqsurvey_issue", "budget_exceeded"),  # exit_context: the context window
        ("robust_prompt_classifier_cpu", "submitted"),
    ],
)
def test_swe_masked_endings_have_their_exit_status(task_id: str, status: str) -> None:
    episode = _sample(task_id)
    assert episode_record(episode).properties["exit_status"] == status
    if status != "submitted":
        assert episode.final_action.action == "limit"


def test_swe_masked_submission_that_is_not_json_counts_as_submitted_and_scores_nothing() -> None:
    episode = _sample("robust_prompt_classifier_cpu")
    final = episode.final_action
    assert final.action == "submit" and final.content.startswith("{22896: 9")
    read = scoring.read_submission(final.content)
    assert read.submitted and read.value is None and "not valid JSON" in read.problem
    record = episode_record(episode)
    assert record.properties["submitted"] is True  # as published (metrics.json: 1)


def test_a_folder_without_a_notebook_is_imported_from_its_metrics_and_named(
    tmp_path: Path, capsys
) -> None:
    run = tmp_path / "published" / SWE_MASKED.name
    shutil.copytree(SWE_MASKED, run)
    (run / "dpt_goal" / "history.ipynb").unlink()
    (run / "broken").mkdir()
    (run / "broken" / "metrics.json").write_text("{not json")
    assert cli(["import-trajectories", str(run), "--out", str(tmp_path / "out")]) == 1
    out, err = capsys.readouterr()
    assert f"imported 4 episodes of {run.name}" in out
    assert "budget_exceeded 2" in out and "submitted 1" in out
    assert f"{run / 'dpt_goal'}: no history.ipynb" in err
    assert f"{run / 'broken' / 'metrics.json'}: not readable JSON" in err
    records = report.read_results(tmp_path / "out" / run.name / "results.jsonl")
    assert sorted(r.task_id for r in records) == sorted(p.name for p in SWE_MASKED.iterdir())
    (dpt,) = [r for r in records if r.task_id == "dpt_goal"]
    assert dpt.properties["landmarks"] == pytest.approx(2 / 3) and dpt.properties["steps"] == 0


def test_rescore_lists_where_our_scorer_and_the_published_values_differ(
    tmp_path: Path, capsys
) -> None:
    run = tmp_path / "published" / SWE_MASKED.name
    shutil.copytree(SWE_MASKED, run)
    metrics = json.loads((run / "robust_prompt_classifier_cpu" / "metrics.json").read_text())
    metrics["entrypoint"] = 0.0  # ours is 1.0: the script ran for long without an error
    (run / "robust_prompt_classifier_cpu" / "metrics.json").write_text(json.dumps(metrics))
    assert cli(["import-trajectories", str(run), "--out", str(tmp_path), "--rescore"]) == 0
    out = capsys.readouterr().out
    assert "rescored: 1 differ from the published values" in out
    assert "robust_prompt_classifier_cpu: script_executed published 0.0, ours 1.0" in out
    records = report.read_results(tmp_path / run.name / "results.jsonl")
    (robust,) = [r for r in records if r.task_id == "robust_prompt_classifier_cpu"]
    assert robust.properties["rescored_script_executed"] == 1.0
    assert robust.properties["script_executed"] == 0.0  # the published value is kept


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

#: SWE-agent on Masked: a pre-executed edit written as `EDITING`, the runner's wait for a cell
#: left running, then the agent's own actions
SWE_MASKED_STEPS = [
    ("[pre-executed by user]", "None", "open('n.txt', 'w').write('6\\n')", "", 0),
    (
        "EXECUTED BY USER",
        "None",
        "EDITING `n.txt. CHANGING:\n\n\n6\n\n\nTO:\n\n\n8\n",
        "Edit was successful.",
        0,
    ),
    ("[continued after timeout]", "", "continue_wait", "", 0),
    ("Look at it.", "open", "open n.txt", "[File: n.txt (1 lines total)]", 0),
    ("Compute.", "None", "print(7 * int(open('n.txt').read()))", "42\n", 1),
    ("Done.", "submit", 'submit {"answer": 42}', "", 0),
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
        (
            "gpt-4o-2024-08-06_swe-agent_masked",
            SWE_MASKED_STEPS,
            {"answer": 42},  # 7 * 6: the published pre-executed edit (6 -> 8) is not replayed
            r"\(1 lines total\)",
            ["execute", "open", "execute", "submit"],
        ),
    ],
    ids=["react-super", "swe-agent", "swe-agent-masked"],
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
    settings = EpisodeSettings(
        agent="replay", options=AgentOptions(replay_path=str(imported / "trajectories"))
    )
    result = run_episode(task, ReplayAgent(), local_env, settings, tmp_path / "ours" / "tiny.json")
    assert result.exit_status is ExitStatus.SUBMITTED
    assert result.accuracy == 1.0 and result.submitted
    assert result.landmarks == 1.0
    done = load_trajectory(tmp_path / "ours" / "tiny.json").steps
    assert [s.action for s in done] == expected_actions
    assert [s.pre_executed for s in done][:1] == [masked]
    if run.endswith("react-super_masked"):
        assert "42" in done[1].output and done[2].observation.startswith("Edit was successful")
    elif masked:
        assert "(1 lines total)" in done[1].observation and "42" in done[2].output
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
