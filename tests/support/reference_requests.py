"""The reference agent's requests and prompts for the request-by-request replay tests.

`EXPECTED`: the files scripts/reference-requests.py wrote from an upstream checkout (tests/data/
super-reference/requests/, with upstream's licence beside the runs). `reference_prompt_dir`: a
folder holding SUPER's prompt.yaml and the protocol.yaml of the reference's protocol strings, both
rebuilt from the shipped notebooks (tests/support/reference_prompts.py): the repository holds no
copy of upstream's prose.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.published_data import DATA, published_runs
from tests.support.reference_prompts import rebuild_prompt_yaml, rebuild_protocol_yaml

REACT_RUNS = ("gpt-4o-2024-08-06_react-super_expert", "gpt-4o-2024-08-06_react-super_masked")
EXPECTED = {run: DATA / "requests" / f"{run}.jsonl.xz" for run in REACT_RUNS}


def reference_prompt_dir(folder: Path) -> Path:
    """`folder`/prompt.yaml and `folder`/protocol.yaml, as the published ReAct-SUPER runs used
    them; returns the prompt.yaml."""
    runs = [published_runs() / run for run in REACT_RUNS]
    notebook = sorted(runs[0].glob("*/history.ipynb"))[0]
    rebuild_protocol_yaml(runs, folder / "protocol.yaml")
    return rebuild_prompt_yaml(notebook, folder / "prompt.yaml")
