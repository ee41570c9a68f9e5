"""The LLM agents on LMR-Bench's tasks (issue 46, item 4), each scripted against a real
OpenAI-compatible server on 127.0.0.1, on the demo set in real Docker containers:

- the no-agent baseline (`--super-agent=noagent`): one model call whose function is written in
  place (a fenced reply passes, a method given alone passes, a wrong function fails as the
  agent's failure, a reply that is not Python is written nowhere and fails);
- ReAct (through an execute cell), ReAct-SUPER (through the edit tool), SWE-agent (through its
  edit command) and Reflexion (two attempts: the first runs out of steps, the second starts in a
  fresh box and fills the function) each pass a demo task. ReAct's, the SWE-agent's and
  Reflexion's runs are `long` (make test-all): make test keeps ReAct-SUPER's and the baseline's.

Each task prompt is built from the instruction, the goal and the paper's text."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from pytest_super.agents.noagent import cut_reply, definition, prompt
from pytest_super.errors import TaskSetupError
from pytest_super.kernels.docker.image import build_image
from pytest_super.lmr.golden import put_function
from pytest_super.tasks import lmr_tasks
from tests.support.lmr_runs import run_lmr

DEMO = Path(__file__).resolve().parents[1] / "tasks" / "lmr"
NGRAM = "lmr/01-NgramMetrics/info.json::01-NgramMetrics/1"

PERPLEXITY = textwrap.dedent(
    """\
    def perplexity(log_probs):
        _check(log_probs)
        return math.exp(-sum(log_probs) / len(log_probs))
    """
)
FORWARD = textwrap.dedent(
    """\
    def forward(self, log_probs, targets):
        eps = self.smoothing
        total = 0.0
        for row, target in zip(log_probs, targets):
            total += -((1.0 - eps) * row[target] + eps * sum(row) / len(row))
        return total / len(targets)
    """
)


# -- the no-agent baseline's reply, without an engine ---------------------------------------------


def test_the_reply_is_cut_as_upstream_cuts_it_and_its_function_put_in_place():
    ngram, _ = lmr_tasks(DEMO / "01-NgramMetrics" / "info.json")
    masked = (ngram.repo_path / ngram.goal_file).read_text()
    fenced = f"```python\n{PERPLEXITY}```"
    placed = put_function(
        masked, definition(cut_reply(fenced), ngram), "perplexity", None, where="x"
    )
    assert "return math.exp(-sum(log_probs) / len(log_probs))" in placed
    assert placed.count("def perplexity") == 1 and "def bits_per_char" in placed
    assert placed.startswith('"""The metrics of a language model')  # the rest kept as it was
    with pytest.raises(TaskSetupError, match="no function 'perplexity' at module level"):
        definition("def other():\n    return 1\n", ngram)
    with pytest.raises(TaskSetupError, match="not valid Python"):
        definition("Here is the function: it returns exp(mean).", ngram)
    (smoothing,) = lmr_tasks(DEMO / "02-LabelSmoothing" / "info.json")
    whole_class = "class LabelSmoothingLoss:\n" + textwrap.indent(FORWARD, "    ")
    assert definition(whole_class, smoothing) == FORWARD
    assert definition(FORWARD, smoothing) == FORWARD


def test_the_prompt_holds_the_file_the_paper_the_instruction_and_the_related_files(tmp_path):
    shutil.copytree(DEMO / "01-NgramMetrics", tmp_path / "t")
    info = tmp_path / "t" / "info.json"
    data = json.loads(info.read_text())
    del data["implementations"][0]["retrieval_context"]
    data["implementations"][0]["retrieval_content"] = ["unit_test/unit_test_1.py"]
    info.write_text(json.dumps(data))
    task = lmr_tasks(info)[0]
    masked = (task.repo_path / task.goal_file).read_text()
    text = prompt(task, masked)
    assert "`perplexity`" in text and masked.rstrip() in text
    paper = json.loads((task.repo_path / "paper.json").read_text())
    assert json.dumps(paper, indent=2) in text  # the paper as upstream sends it
    assert task.instruction in text
    assert "# Path: unit_test/unit_test_1.py\n" in text and "class TestPerplexity" in text


# -- on the real engine ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture
def project(pytester: pytest.Pytester, image: str, monkeypatch) -> pytest.Pytester:
    shutil.copytree(DEMO, pytester.path / "lmr")
    pytester.makeini("[pytest]\npythonpath = .\n")
    monkeypatch.setenv("SUPER_API_KEY", "sk-test-lmr-agents")
    return pytester


def _run(project, server, *args: str) -> tuple[pytest.RunResult, dict[str, dict]]:
    return run_lmr(project, *args, "--super-model=gpt-4o", f"--super-base-url={server.base_url}")


@pytest.mark.docker
def test_the_noagent_baseline_writes_the_replys_function_in_place_and_the_unit_test_decides(
    project, openai_server
):
    openai_server.script(
        [
            f"```python\n{PERPLEXITY}```",  # 01/1: fenced, as models answer: passes
            "def bits_per_char(log_probs):\n    return 0.0\n",  # 01/2: wrong: fails
            FORWARD,  # 02/1: the method alone: passes
        ]
    )
    result, records = _run(project, openai_server, "lmr", "--super-agent=noagent")
    result.assert_outcomes(passed=2, failed=1)  # a wrong function is the agent's failure
    assert records["01-NgramMetrics/1"]["outcome"] == "passed"
    assert records["02-LabelSmoothing/1"]["outcome"] == "passed"
    wrong = records["01-NgramMetrics/2"]
    assert (wrong["outcome"], wrong["tests_failed"], wrong["exit_status"]) == (
        "failed",
        1,
        "submitted",
    )
    assert len(openai_server.requests) == 3  # one model call per task
    first = openai_server.requests[0]
    assert [m["role"] for m in first.messages] == ["user"]
    assert "Implement the `perplexity` function in lm/metrics.py" in first.prompt_text
    assert "def bits_per_char(log_probs):" in first.prompt_text  # the whole masked file
    assert "Perplexity is the exponential of the average negative log-probability" in (
        first.prompt_text
    )


@pytest.mark.docker
def test_a_noagent_reply_that_is_not_python_is_written_nowhere_and_fails(project, openai_server):
    openai_server.script(["I would compute the exponential of the mean negative log-probability."])
    result, records = _run(project, openai_server, NGRAM, "--super-agent=noagent")
    result.assert_outcomes(failed=1)
    assert records["01-NgramMetrics/1"]["exit_status"] == "no_submission"
    result.stdout.fnmatch_lines(["*NameError: name 'ppl' is not defined*"])  # still masked


REACT_FILL = textwrap.dedent(
    """\
    Thought: I write the perplexity into the goal file with a cell.
    Action: execute
    <content>
    path = "lm/metrics.py"
    text = open(path).read()
    body = "    _check(log_probs)\\n    ppl = math.exp(-sum(log_probs) / len(log_probs))\\n"
    open(path, "w").write(text.replace("\\n    return ppl\\n", "\\n" + body + "    return ppl\\n", 1))
    """
)
FILL = textwrap.dedent(
    """\
    Thought: The perplexity is the exponential of the mean negative log-probability.
    Action: edit
    <content>
    lm/metrics.py
    <<<BEFORE_EDIT>>>
        return ppl
    <<<AFTER_EDIT>>>
        _check(log_probs)
        ppl = math.exp(-sum(log_probs) / len(log_probs))
        return ppl
    """
)
SUBMIT = 'Thought: Done.\nAction: submit\n<content>\n{"done": true}\n'


def swe(command: str) -> str:
    return f"DISCUSSION\nNext.\n```\n{command}\n```\n"


SWE_EDIT = "edit 17:18\n    _check(log_probs)\n    ppl = math.exp(-sum(log_probs) / len(log_probs))\n    return ppl\nend_of_edit"


@pytest.mark.docker
@pytest.mark.parametrize(
    ("agent", "script"),
    [
        pytest.param("react", [REACT_FILL, SUBMIT], marks=pytest.mark.long),
        ("react-super", [FILL, SUBMIT]),  # through the edit tool (make test keeps this one)
        pytest.param(
            "swe",
            [swe("open lm/metrics.py"), swe(SWE_EDIT), swe('submit {"done": true}')],
            marks=pytest.mark.long,
        ),
    ],
)
def test_an_llm_agent_fills_the_function_and_passes(project, openai_server, agent, script):
    openai_server.script(script)
    result, records = _run(project, openai_server, NGRAM, f"--super-agent={agent}")
    result.assert_outcomes(passed=1)
    assert records["01-NgramMetrics/1"]["tests_run"] == 1
    first = openai_server.requests[0].prompt_text
    assert "Implement the `perplexity` function in lm/metrics.py" in first  # the instruction
    assert "the function `perplexity` in `lm/metrics.py`" in first  # the goal
    assert "Perplexity is the exponential of the average negative log-probability" in first


WRONG_TRY = textwrap.dedent(
    """\
    Thought: Maybe the perplexity is the mean log-probability itself.
    Action: execute
    <content>
    path = "lm/metrics.py"
    text = open(path).read()
    open(path, "w").write(text.replace("\\n    return ppl\\n", "\\n    return sum(log_probs)\\n", 1))
    """
)
LOOK = 'Thought: I look at the file.\nAction: execute\n<content>\nprint(open("lm/metrics.py").read())\n'


@pytest.mark.docker
@pytest.mark.long
def test_reflexion_fills_the_function_in_its_second_attempt_in_a_fresh_box(project, openai_server):
    openai_server.script(
        [
            WRONG_TRY,
            LOOK,
            LOOK,  # the step limit (3) ends the first attempt without a submission
            "Plan: the perplexity is exp of the mean negative log-probability. [END]",
            LOOK,  # the second attempt's box holds the masked file again, not the wrong try
            REACT_FILL,
            SUBMIT,
        ]
    )
    result, records = _run(
        project,
        openai_server,
        NGRAM,
        "--super-agent=reflexion",
        "--super-attempts=2",
        "--super-steps=3",
    )
    result.assert_outcomes(passed=1)
    assert records["01-NgramMetrics/1"]["tests_run"] == 1
    second_look = openai_server.requests[4].prompt_text
    assert "the perplexity is exp of the mean negative log-probability" in second_look
    (run_dir,) = (project.path / "reports").iterdir()
    (trajectory,) = (run_dir / "trajectories").glob("*.json")
    steps = json.loads(trajectory.read_text())["steps"]
    looks = [s for s in steps if s["content"].startswith("print(open(")]
    assert [s["attempt"] for s in looks] == [1, 1, 2]
    assert "return sum(log_probs)" in looks[0]["observation"]
    assert "return sum(log_probs)" not in looks[2]["observation"]
    assert "    return ppl" in looks[2]["observation"]
