"""`--super-live`: each step printed as it happens, past pytest's output capture, the run's secrets
redacted (for a task run here, and for the steps a Ray node sends back), and no escape sequence or
control character of the task's output or the model's text let through (`console_text`)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from pytest_super import redaction
from pytest_super.kernels.jupyter.output import console_text
from pytest_super.trajectory import Action, Step


def live_printer(config: pytest.Config, task_id: str) -> Callable[[Step], None]:
    """A callback printing each step of task `task_id` as it is recorded, past pytest's capture."""
    capman = config.pluginmanager.getplugin("capturemanager")

    def show(step: Step) -> None:
        tail = (step.observation or step.output).strip().splitlines()[-5:]
        text = ["", f"[{task_id}] {step.action}: {step.thought.strip()[:200]}"]
        if step.content and step.action != Action.SUBMIT:
            text += ["    > " + ln for ln in step.content.strip().splitlines()[:10]]
        elif step.content:
            text.append(f"    > {step.content[:300]}")
        text += ["    | " + ln[:200] for ln in tail]
        if step.prompt_tokens:
            text.append(f"    ({step.prompt_tokens} prompt tokens this step)")
        shown = console_text(redaction.redact("\n".join(text)))
        if capman is not None:
            with capman.global_and_fixture_disabled():
                print(shown, flush=True)
        else:
            print(shown, file=sys.stderr, flush=True)

    return show
