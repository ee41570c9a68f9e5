"""Every error explains itself (issue 44, item 3): an errored task's results.jsonl line and
JUnit properties carry the error's text (`detail`), the trajectory (its notebook), the steps,
tokens and cost spent; its HTML page shows the error text and the partial episode with a link to
its notebook. A react-super episode (the local kernel backend, a real endpoint on 127.0.0.1)
acts twice, then the endpoint refuses the key."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.support.openai_server import FakeOpenAIServer, Status
from tests.support.projects import junit_properties

TASK = """\
id: counter
query: 'Count the files and report {"count": 0}.'
answer: {count: 12}
solution:
  - execute: |
      print('{"count": 12}')
"""

ACT = "Thought: look first.\nAction: execute\n<content>\nprint('looked {}')\n"


def test_an_errored_task_explains_itself_everywhere(
    pytester: pytest.Pytester, openai_server: FakeOpenAIServer
) -> None:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    path = pytester.path / "tasks" / "expert" / "counter.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(TASK))
    refused = Status(401, body={"error": {"message": "Incorrect API key provided"}})
    openai_server.script([ACT.format(1), ACT.format(2), refused])
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "tasks",
        "--super-agent=react-super",
        "--super-model=gpt-4o",
        f"--super-base-url={openai_server.base_url}",
        "--super-backend=local",
        f"--junitxml={junit}",
        "--super-report-dir=out",
    )
    result.assert_outcomes(errors=1)
    (run_dir,) = (pytester.path / "out").iterdir()
    (row,) = map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    assert row["outcome"] == "error" and row["exit_status"] == "llm_error"
    assert row["detail"].startswith("LLMRefused: ") and "401" in row["detail"], row
    assert row["trajectory"] == f"out/{run_dir.name}/trajectories/counter.ipynb"
    assert (pytester.path / row["trajectory"]).is_file()
    assert row["steps"] == 2 and row["prompt_tokens"] > 0 and row["completion_tokens"] > 0
    assert isinstance(row["cost_usd"], float) and row["cost_usd"] > 0  # gpt-4o has a price
    props = junit_properties(junit)["counter"]
    assert props["super.trajectory"] == row["trajectory"]
    assert props["super.prompt_tokens"] == str(row["prompt_tokens"])
    assert props["super.cost_usd"] == repr(row["cost_usd"])
    assert props["super.detail"] == row["detail"]
    page = (run_dir / "tasks" / "counter.html").read_text()
    assert "no readable trajectory file" not in page
    assert "LLMRefused" in page and "Incorrect API key provided" in page  # the error text
    assert "looked 2" in page and "counter.ipynb" in page  # the partial episode, its notebook
