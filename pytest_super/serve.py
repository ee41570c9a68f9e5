"""`pytest-super serve`: a stand-in model, an OpenAI-compatible endpoint on 127.0.0.1 for dry runs
(CI, a new agent, a demo without a key) (issue 44, item 5).

It answers `POST /v1/chat/completions` (the replay endpoint's server, replay/endpoint.py) by one of
three policies:

- `submit`: every request gets the same reply, a submission of `--answer` (default `{}`) in the
  agent's format (`--agent react-super` or `swe`): each task ends after one model call;
- `script FILE`: the replies of a JSON list of texts, in order, one per request (a request after
  the last is answered 400, which the client does not retry: the episode ends as `llm_error`);
- `run RUN`: a published run's recorded replies (a run folder, a run `import-trajectories` wrote,
  or a shipped `.tar.xz`), rebuilt in its agent's format as `replay-run` rebuilds them: a request
  gets the reply of the episode whose task query its messages hold, at the position of the
  request's assistant messages (so tasks run in parallel each get their own episode).

The plugin's preflight request is answered `ok` whatever the policy.
"""

from __future__ import annotations

import argparse
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

from pytest_super.llm import PREFLIGHT_PROMPT
from pytest_super.replay.endpoint import ChatServer, completion_body, cut_at_stop
from pytest_super.replay.script import Reply, episode_script, react_reply, swe_reply
from pytest_super.trajectory import Action, Step

#: the agents whose reply format the submit policy writes
FORMATS: dict[str, Callable[[Step], str]] = {"react-super": react_reply, "swe": swe_reply}


class ServeError(Exception):
    """What `serve` was given cannot be served (the message names it and what to do)."""


class Policy:
    """The reply to one request's body: (text, prompt tokens, completion tokens) or None (no
    reply: answered 400)."""

    def reply(self, body: dict[str, object]) -> tuple[str, int, int] | None:
        raise NotImplementedError


class SubmitPolicy(Policy):
    def __init__(self, agent: str, answer: str) -> None:
        if agent not in FORMATS:
            raise ServeError(f"--agent {agent!r}: use one of {', '.join(FORMATS)}")
        step = Step(thought="Submitting the answer.", action=Action.SUBMIT, content=answer)
        self.text = FORMATS[agent](step)

    def reply(self, body: dict[str, object]) -> tuple[str, int, int] | None:
        return self.text, _tokens(body), max(1, len(self.text) // 4)


class ScriptPolicy(Policy):
    def __init__(self, path: Path) -> None:
        try:
            replies = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ServeError(f"--script {path}: cannot be read as JSON ({exc})") from None
        if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
            raise ServeError(f"--script {path}: give a JSON list of reply texts")
        self.replies = list(replies)
        self.served = 0

    def reply(self, body: dict[str, object]) -> tuple[str, int, int] | None:
        if self.served >= len(self.replies):
            return None
        text = self.replies[self.served]
        self.served += 1
        return text, _tokens(body), max(1, len(text) // 4)


class RunPolicy(Policy):
    def __init__(self, run_dir: Path) -> None:
        from pytest_super.replay.imported import read_episodes

        if not run_dir.is_dir():
            raise ServeError(f"--run {run_dir}: no such folder; give a run folder or a .tar.xz")
        self.episodes: list[tuple[str, list[Reply]]] = []
        for episode in read_episodes(run_dir).episodes:
            self.episodes.append((episode.query.strip(), episode_script(episode).replies))
        if not self.episodes:
            raise ServeError(f"--run {run_dir}: no episode found in it")
        self.episodes.sort(key=lambda e: -len(e[0]))  # the longest query first: the most specific

    def reply(self, body: dict[str, object]) -> tuple[str, int, int] | None:
        found = body.get("messages")
        messages = found if isinstance(found, list) else []
        text = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        replies = next((r for q, r in self.episodes if q and q in text), None)
        position = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        if replies is None or position >= len(replies):
            return None
        found = replies[position]
        return found.text, found.prompt_tokens, found.completion_tokens


def _tokens(body: dict[str, object]) -> int:
    """About four characters a token, as the usage of a stand-in."""
    return max(1, len(json.dumps(body.get("messages") or [])) // 4)


class StandInEndpoint(ChatServer):
    """The endpoint `serve` runs: the replay endpoint's server answering by a `Policy`."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.requests = 0
        super().__init__()

    def answer(self, body: dict[str, object]) -> tuple[int, object]:
        if body.get("messages") == [{"role": "user", "content": PREFLIGHT_PROMPT}]:
            return 200, completion_body(body, "ok", 1, 1)
        self.requests += 1
        found = self.policy.reply(body)
        if found is None:
            message = "pytest-super serve: no reply for this request under its policy"
            return 400, {"error": {"message": message, "type": "invalid_request_error"}}
        text, prompt, completion = found
        return 200, completion_body(body, cut_at_stop(text, body.get("stop")), prompt, completion)


def unpacked_run(path: Path, work: Path) -> Path:
    """The run folder `path` names: a shipped `.tar.xz` of one is unpacked into `work` (its one
    top folder); any other path is returned as it is (its reader says what is wrong with it)."""
    if not path.name.endswith(".tar.xz"):
        return path
    if not path.is_file():
        raise ServeError(f"{path}: no such file; give a run folder or a shipped run's .tar.xz")
    try:
        with tarfile.open(path, "r:xz") as archive:
            archive.extractall(work, filter="data")  # no links out, no absolute paths
    except (OSError, tarfile.TarError) as exc:
        raise ServeError(f"{path}: cannot be unpacked ({exc})") from None
    tops = [p for p in work.iterdir() if p.is_dir()]
    return tops[0] if len(tops) == 1 else work


def make_policy(args: argparse.Namespace, work: Path) -> Policy:
    """The policy the command line names (`--run`, `--script`, else `submit`)."""
    if args.run is not None:
        return RunPolicy(unpacked_run(args.run, work))
    if args.script is not None:
        return ScriptPolicy(args.script)
    return SubmitPolicy(args.agent, args.answer)


def serve(
    args: argparse.Namespace, work: Path, *, ready: Callable[[str], None] = print
) -> StandInEndpoint:
    """Start the endpoint `args` describe (a shipped run unpacked in `work`); `ready` gets its
    base URL (written to `--url-file` too). The caller serves until it stops the endpoint."""
    endpoint = StandInEndpoint(make_policy(args, work))
    if args.url_file is not None:
        args.url_file.write_text(endpoint.base_url + "\n", encoding="utf-8")
    ready(endpoint.base_url)
    return endpoint
