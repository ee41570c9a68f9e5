"""The reference agent's requests and prompts for the request-by-request replay tests.

`EXPECTED`: the files scripts/reference-requests.py (ReAct-SUPER) and
scripts/reference-requests-swe.py (SWE-agent, and the SWE-agent Masked samples) wrote from upstream checkouts (tests/data/
super-reference/requests/, with upstream's licence beside the runs). `reference_prompt_dir`: a
folder holding SUPER's prompt.yaml and the protocol.yaml of the reference's protocol strings, both
rebuilt from the shipped notebooks (tests/support/reference_prompts.py): the repository holds no
copy of upstream's prose. `swe_reference_prompt_dir`: a folder of templates for the SWE-agent of
the published runs: the system prompt its notebooks show, the task message SWE-agent's template
made (cut from the expected requests' first message, the query put back as `{query}`), and the
same protocol.yaml.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from pytest_super.prompts import PARTS, ours
from pytest_super.published_runs import read_run
from pytest_super.replay.expected import read_expected
from tests.support.published_data import DATA, published_runs
from tests.support.reference_prompts import rebuild_prompt_yaml, rebuild_protocol_yaml

REACT_RUNS = ("gpt-4o-2024-08-06_react-super_expert", "gpt-4o-2024-08-06_react-super_masked")
SWE_RUN = "gpt-4o-2024-08-06_swe-agent_expert"
#: the four shipped samples of the SWE-agent Masked run (tests/data/super-reference/samples/)
SWE_SAMPLES = "gpt-4o-2024-08-06_swe-agent_masked"
EXPECTED = {run: DATA / "requests" / f"{run}.jsonl.xz" for run in (*REACT_RUNS, SWE_RUN)}
EXPECTED[SWE_SAMPLES] = DATA / "requests" / f"{SWE_SAMPLES}-samples.jsonl.xz"
#: ReAct without the edit tool: upstream's Agent(allow_edit=False, add_edit_prompt=False) on the
#: Expert episodes whose model never edited (scripts/reference-requests.py --no-edit)
REACT_NO_EDIT = "gpt-4o-2024-08-06_react_expert"
EXPECTED[REACT_NO_EDIT] = DATA / "requests" / f"{REACT_NO_EDIT}.jsonl.xz"
#: the state prompt that ends the SWE-agent's task message
_STATE = re.compile(r"\n\(Open file: [^\n]*\)\n\(Current directory: [^\n]*\)\nIn \[ \]\Z")
_SYSTEM = re.compile(r"\A### System Prompt\n<details>\n(.*)\n</details>\n?\Z", re.DOTALL)


def reference_prompt_dir(folder: Path) -> Path:
    """`folder`/prompt.yaml and `folder`/protocol.yaml, as the published ReAct-SUPER runs used
    them; returns the prompt.yaml."""
    runs = [published_runs() / run for run in REACT_RUNS]
    notebook = sorted(runs[0].glob("*/history.ipynb"))[0]
    rebuild_protocol_yaml(runs, folder / "protocol.yaml")
    return rebuild_prompt_yaml(notebook, folder / "prompt.yaml")


def swe_reference_prompt_dir(folder: Path) -> Path:
    """`folder` holding our template files but the SWE-agent's system prompt and task message as
    the published SWE-agent run had them, and the reference's protocol.yaml; returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for part in PARTS.values():
        (folder / part.file).write_text(ours().templates[part.file[: -len(".txt")]])
    run = published_runs() / SWE_RUN
    notebook = sorted(run.glob("*/history.ipynb"))[0]
    first = json.loads(notebook.read_text(encoding="utf-8"))["cells"][0]["source"]
    system = _SYSTEM.match("".join(first) if isinstance(first, list) else first)
    assert system is not None, f"{notebook}: its first cell is not the system prompt"
    (folder / "swe_system.txt").write_text(system[1])
    episode = next(e for e in read_run(run) if e.task_id == notebook.parent.name)
    task = read_expected(EXPECTED[SWE_RUN]).episodes[episode.task_id][0]["messages"][1]["content"]
    state = _STATE.search(task)
    assert state is not None and episode.query in task, "the expected task message has changed"
    (folder / "swe_instance.txt").write_text(
        task[: state.start()].replace(episode.query, "{query}")
    )
    # the still-running note in the SWE-agent run's words (its notebooks), the rest as ReAct's
    runs = [published_runs() / r for r in (SWE_RUN, *REACT_RUNS)]
    rebuild_protocol_yaml(runs, folder / "protocol.yaml")
    shutil.rmtree(folder / "__pycache__", ignore_errors=True)
    return folder
