"""SUPER's prompt.yaml rebuilt from a shipped notebook, for the tests that need the reference's
prompts (the repository holds no copy of upstream prose: the published notebooks carry it).

A ReAct-SUPER notebook's `### Prompt` cell holds the system message the reference's agent built
from its prompt.yaml: `system_prompt` with `{{commands}}` (the action list, numbered `(1)` to
`(3)`) and `{{edit_demonstration}}` (the last demonstration, from the last `Query:` on) replaced.
`rebuild_prompt_yaml` cuts the message back into those three fields by that structure and writes
them in SUPER's format; it checks that our loader rebuilds the exact message from the file.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from pytest_super.prompt_check import recorded_prompt
from pytest_super.prompts import load_prompts

#: the action list: the sentence that ends with ":" before `(1) `, through the `(3) ` line
_COMMANDS = re.compile(r"(?<=\. )[^.\n]*:\n\(1\) .*?\n\(3\) [^\n]*\n", re.DOTALL)


def prompt_yaml_text(fields: dict[str, str]) -> str:
    """SUPER's prompt.yaml layout: each field a literal block (`key: |`) indented by two spaces,
    blank lines left empty; `|-` for a text without a final line break."""
    parts = []
    for key, value in fields.items():
        body, chomp = (value[:-1], "|") if value.endswith("\n") else (value, "|-")
        lines = "".join(f"  {line}\n" if line else "\n" for line in body.split("\n"))
        parts.append(f"{key}: {chomp}\n{lines}")
    text = "".join(parts)
    if yaml.safe_load(text) != fields:
        raise ValueError("these prompt fields cannot be written as YAML literal blocks")
    return text


def reference_fields(system_message: str) -> dict[str, str]:
    """The system message cut into SUPER's prompt.yaml fields."""
    commands = _COMMANDS.search(system_message)
    last_query = system_message.rfind("\nQuery: ")
    if commands is None or last_query < commands.end():
        raise ValueError("the system message has no numbered action list before its last Query:")
    template = (
        system_message[: commands.start()]
        + "{{commands}}"
        + system_message[commands.end() : last_query + 1]
        + "{{edit_demonstration}}"
    )
    return {
        "system_prompt": template,
        "commands": commands.group(0),
        "edit_demonstration": system_message[last_query + 1 :],
    }


def rebuild_prompt_yaml(notebook: Path, out: Path) -> Path:
    """Write SUPER's prompt.yaml for the system message of `notebook`'s `### Prompt` to `out`."""
    system = recorded_prompt(notebook)[0]
    if system["role"] != "system":
        raise ValueError(f"{notebook}: the first message of its prompt is not the system prompt")
    out.write_text(prompt_yaml_text(reference_fields(system["content"])), encoding="utf-8")
    rebuilt = load_prompts(out).react_system(with_edit=True, cell_timeout_s=300)
    if rebuilt != system["content"]:
        raise AssertionError(f"{out} does not rebuild the system message of {notebook}")
    return out


def upstream_prompt_yaml(notebook: Path, out: Path) -> Path:
    """Upstream's prompt.yaml at the pinned commit, rebuilt from `notebook`'s prompt: the file
    the published runs used differs from it in four places, undone here (`reference_files.PROMPT_SHA256`
    is the result's hash). Upstream's edit action ends in a line without the list marker and the
    sentence after its first; its action list ends with a line break before `Always`; the
    demonstrations' observations before the edit demonstration are one line each, their line breaks
    written as `\\n`; the system prompt ends with a blank line."""
    fields = reference_fields(recorded_prompt(notebook)[0]["content"])
    template = re.sub(
        r"(Observation: ```\n)(.*?)(\n```)",
        lambda m: m[1] + m[2].replace("\n", "\\n") + m[3],
        fields["system_prompt"],
        flags=re.DOTALL,
    )
    upstream = {
        "system_prompt": template.replace("{{commands}}", "{{commands}}\n") + "\n",
        "commands": re.sub(
            r"^  - ([^\n]*?\.) [^\n]*\n(?=\(3\) )", r"\1\n", fields["commands"], flags=re.M
        ),
        "edit_demonstration": fields["edit_demonstration"],
    }
    out.write_text(prompt_yaml_text(upstream), encoding="utf-8")
    return out


#: where each protocol string shows in a ReAct-SUPER notebook: the observation of a step of that
#: kind (the format error: a step with an empty thought and action)
_STILL_RUNNING = re.compile(r"\n\nYour command has already run for (\d+) seconds\..*\Z", re.DOTALL)


def protocol_fields(*run_dirs: Path) -> dict[str, str]:
    """The reference's protocol strings (prompts.PROTOCOL_FIELDS) as the notebooks of the
    ReAct-SUPER runs `run_dirs` show them."""
    from pytest_super.published_runs import read_run
    from pytest_super.replay.script import INVALID_ACTION, INVALID_SUBMISSION
    from pytest_super.trajectory import Action

    found: dict[str, str] = {}
    for episode in (e for run_dir in run_dirs for e in read_run(run_dir)):
        for step in episode.steps:
            obs = step.observation
            if step.action == Action.FORMAT_ERROR and obs.startswith(INVALID_ACTION):
                found.setdefault("invalid_action", INVALID_ACTION)
            elif step.action == Action.FORMAT_ERROR and obs == INVALID_SUBMISSION:
                found.setdefault("invalid_submission", obs)
                found.setdefault("invalid_submission_action", _raw_action(episode.folder, obs))
            elif step.action == Action.FORMAT_ERROR:
                found.setdefault("format_error", obs)
            elif step.action == Action.INTERRUPT and not step.pre_executed:
                found.setdefault("interrupted", obs)
            elif (note := _STILL_RUNNING.search(obs)) is not None:
                found.setdefault("timeout", note[0].replace(note[1], "{seconds}", 1))
    return found


def _raw_action(folder: Path, observation: str) -> str:
    """The action name a notebook of `folder` gives the step observed as `observation`."""
    import json

    cells = json.loads((folder / "history.ipynb").read_text(encoding="utf-8"))["cells"]
    action = ""
    for cell in cells:
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown" and text.startswith("**Action ("):
            action = text[len("**Action (") :].split(")**", 1)[0]
        outputs = cell.get("outputs") or []
        data = outputs[0].get("data", {}).get("text/plain", "") if outputs else ""
        if cell["cell_type"] == "code" and "".join(data) == observation:
            return action
    raise ValueError(f"{folder}: no step observed as {observation!r}")


def rebuild_protocol_yaml(run_dirs: list[Path], out: Path) -> Path:
    """Write the protocol.yaml of the reference's protocol strings (from the notebooks of the
    ReAct-SUPER runs `run_dirs`)."""
    out.write_text(prompt_yaml_text(protocol_fields(*run_dirs)), encoding="utf-8")
    return out
