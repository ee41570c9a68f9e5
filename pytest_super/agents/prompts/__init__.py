"""The agents' prompt texts, one file each: ReAct's system prompt, its action list and its edit
demonstration (`react_*.txt`), the SWE-agent's system and task prompts (`swe_*.txt`). Placeholders
are `{name}` words replaced by the agent that loads them; literal braces stay as they are."""

from __future__ import annotations

from importlib import resources


def load_prompt(name: str) -> str:
    """The text of the prompt file `name` (e.g. "react_system.txt")."""
    return resources.files(__name__).joinpath(name).read_text("utf-8")
