"""The reference's protocol strings, read from its own code at the pinned commit (`--super-prompts
reference`): what its agent shows the model besides the prompt.yaml.

`protocol_of(folder)` parses the two files `reference_files.download_reference` saved there with
`ast` (never importing or running them) and takes their literal strings, by where they stand in
the code, not by what they say:

- `format_error`: `agent.py`'s correction, the `content` of the `user` message `Agent.next_action`
  adds after a reply it cannot parse;
- `timeout`: `jupyter_env.py`'s `self.timeout_message`, its one placeholder (the cell timeout)
  written `{seconds}`;
- `interrupted`: the observation `JupyterEnv._step` gives an `interrupt` action;
- `invalid_action`: the literal start of the observation it gives an action type it does not
  know (the type follows).

The pinned agent has no step for a submission that is not JSON: its parser refuses it, so it is a
format error (`invalid_submission_action` and `invalid_submission` are absent). How the published
runs differ from this, and why, is in docs/fidelity.md ("The paper's agent in one word").
"""

from __future__ import annotations

import ast
from pathlib import Path

from pytest_super.errors import SuperError

AGENT_FILE = "agent.py"
ENV_FILE = "jupyter_env.py"
#: the placeholder the cell timeout takes in the still-running note (agents/reference.py)
SECONDS = "{seconds}"


class ProtocolSourceError(SuperError):
    """A reference file that does not hold a protocol string where the pinned commit has it."""


def protocol_of(folder: Path) -> dict[str, str]:
    """The protocol strings (`prompts.PROTOCOL_FIELDS`, less the two the pinned agent has not)."""
    agent = _parse(folder / AGENT_FILE)
    env = _parse(folder / ENV_FILE)
    return {
        "format_error": _format_error(agent, folder / AGENT_FILE),
        "timeout": _timeout_note(env, folder / ENV_FILE),
        "interrupted": _observation(env, "interrupt", folder / ENV_FILE),
        "invalid_action": _observation(env, None, folder / ENV_FILE),
    }


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ProtocolSourceError(f"{path}: cannot be read as Python ({exc})") from None


def _literal(node: ast.expr) -> str | None:
    """A string literal, or an f-string with each replacement field written `{seconds}`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = [_literal(v) if isinstance(v, ast.Constant) else SECONDS for v in node.values]
        return "".join(p or "" for p in parts)
    return None


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None
    )


def _format_error(tree: ast.Module, path: Path) -> str:
    """The `content` of the dict `{"role": "user", "content": ...}` in `Agent.next_action`."""
    function = _function(tree, "next_action")
    for node in ast.walk(function) if function else ():
        if not isinstance(node, ast.Dict):
            continue
        fields = {
            k.value: v
            for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
        role, content = fields.get("role"), fields.get("content")
        if role is not None and _literal(role) == "user" and content is not None:
            text = _literal(content)
            if text is not None:
                return text
    raise ProtocolSourceError(f"{path}: no user message with a literal content in next_action")


def _timeout_note(tree: ast.Module, path: Path) -> str:
    """The value assigned to `self.timeout_message`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "timeout_message" for t in node.targets
        ):
            text = _literal(node.value)
            if text is not None:
                return text
    raise ProtocolSourceError(f"{path}: no literal assigned to self.timeout_message")


def _observation(tree: ast.Module, action: str | None, path: Path) -> str:
    """The literal `observation` `_step` gives action type `action` (None: an unknown type; an
    f-string's literal start)."""
    function = _function(tree, "_step")
    branch = _branch(function.body if function else [], action)
    for node in branch:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "observation" for t in node.targets
        ):
            if action is None and isinstance(node.value, ast.JoinedStr):
                first = node.value.values[0] if node.value.values else None
                text = _literal(first) if isinstance(first, ast.Constant) else None
            else:
                text = _literal(node.value)
            if text is not None:
                return text
    what = f"the {action!r} action" if action else "an unknown action type"
    raise ProtocolSourceError(f"{path}: no literal observation for {what} in _step")


def _branch(body: list[ast.stmt], action: str | None) -> list[ast.stmt]:
    """The statements of the `if action["type"] == <action>` branch of the chain in `body`, or
    of its final `else` (action None)."""
    chain = next((n for n in body if isinstance(n, ast.If)), None)
    while chain is not None:
        test = chain.test
        if (
            action is not None
            and isinstance(test, ast.Compare)
            and any(_literal(c) == action for c in test.comparators)
        ):
            return chain.body
        if len(chain.orelse) == 1 and isinstance(chain.orelse[0], ast.If):
            chain = chain.orelse[0]
            continue
        return chain.orelse if action is None else []
    return []
