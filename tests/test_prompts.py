"""The prompts say what SUPER's reference prompt says and no more (issue 9, item 5).

The reference (`super/agent/prompt.yaml`) never mentions the hardware: a line such as "there is no
GPU" would hint the answer of the Masked `cpu` category (the task is to notice that the code asks
for CUDA). Its three demonstrations are a cloned evaluation harness, a CSV read and a config edit.
"""

from __future__ import annotations

import re

import pytest

from pytest_super.agents.react import system_prompt
from pytest_super.agents.swe import INSTANCE_PROMPT, SYSTEM_PROMPT

#: words that would tell the agent about the machine's accelerators
HARDWARE_HINT = re.compile(r"\b(gpus?|cpus?|accelerators?|cuda available|no cuda)\b", re.I)


def _prompts() -> dict[str, str]:
    return {
        "react": system_prompt(with_edit=False, cell_timeout_s=300),
        "react-super": system_prompt(with_edit=True, cell_timeout_s=300),
        "swe-system": SYSTEM_PROMPT,
        "swe-instance": INSTANCE_PROMPT,
    }


@pytest.mark.parametrize("name", ["react", "react-super", "swe-system", "swe-instance"])
def test_no_prompt_hints_at_the_hardware(name: str) -> None:
    hits = HARDWARE_HINT.findall(_prompts()[name])
    assert not hits, f"{name} prompt mentions {hits}"


def test_react_super_has_the_references_three_demonstrations_and_react_two() -> None:
    with_edit = system_prompt(with_edit=True, cell_timeout_s=300)
    without = system_prompt(with_edit=False, cell_timeout_s=300)
    # one demonstration per "Query:" line, each ending in a submit
    assert with_edit.count("\nQuery: ") + with_edit.startswith("Query: ") == 3
    assert without.count("\nQuery: ") + without.startswith("Query: ") == 2
    assert "Action: edit" in with_edit and "Action: edit" not in without
    assert with_edit.count("Action: submit") == 3
    assert "5-minute timeout" in with_edit
