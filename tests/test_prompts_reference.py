"""The reference's prompts on request (issue 31 item 3): `--super-prompts`, the prompts check and
`pytest-super download prompts`.

The prompt files these tests need are rebuilt from the shipped notebooks, which carry the prompt the
paper's agent sent (tests/support/reference_prompts.py): the repository holds no copy of upstream's
prose. Runs use the local kernel backend and the scripted endpoint on 127.0.0.1, except the demo's
scripted ReAct-SUPER episode, which runs in a container as in test_integration_agents.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_super.agents.react import ReActSuperAgent
from pytest_super.prompt_check import check_run_prompts, checks_prompts, recorded_prompt
from pytest_super.prompts import OURS, PARTS, PromptFileError, load_prompts, ours
from pytest_super.reference_files import (
    LICENSE_FILE,
    PROMPT_FILE,
    PROMPT_SHA256,
    PROMPTS_COMMIT,
    PROMPTS_REPO,
)
from tests.support.projects import junit_properties as read_junit_properties
from tests.support.published_data import DATA, published_runs
from tests.support.reference_prompts import rebuild_prompt_yaml, upstream_prompt_yaml

REACT_RUNS = ("gpt-4o-2024-08-06_react-super_expert", "gpt-4o-2024-08-06_react-super_masked")
SWE_RUN = "gpt-4o-2024-08-06_swe-agent_expert"
KEY = "sk-test-prompts-0a1b2c"


def first_notebook(run: str) -> Path:
    return sorted((published_runs() / run).glob("*/history.ipynb"))[0]


@pytest.fixture(scope="module")
def reference_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SUPER's prompt.yaml as the published ReAct-SUPER runs used it."""
    out = tmp_path_factory.mktemp("reference") / "prompt.yaml"
    return rebuild_prompt_yaml(first_notebook(REACT_RUNS[0]), out)


# -- the prompts check ---------------------------------------------------------------------------
@pytest.mark.parametrize("run", REACT_RUNS)
def test_the_first_request_equals_every_shipped_episodes_prompt(run, reference_file):
    episodes = sorted((published_runs() / run).glob("*/history.ipynb"))
    assert len(episodes) == {"expert": 45, "masked": 144}[run.rsplit("_", 1)[1]]
    assert check_run_prompts(published_runs() / run, reference_file) == []
    # the check compared something: the task's query in the user message, the file's system prompt
    episode = episodes[-1]
    recorded = recorded_prompt(episode)
    assert [m["role"] for m in recorded] == ["system", "user"]
    assert recorded[1]["content"].startswith("Query: ") and len(recorded[1]["content"]) > 50


@pytest.mark.parametrize("run", REACT_RUNS)
def test_a_one_word_change_fails_the_check_naming_each_episode_and_message(
    run, reference_file, tmp_path
):
    text = reference_file.read_text()
    changed = text.replace(" notebook", " workbook", 1)
    assert changed != text
    (tmp_path / "prompt.yaml").write_text(changed)
    lines = check_run_prompts(published_runs() / run, tmp_path / "prompt.yaml")
    tasks = sorted(p.parent.name for p in (published_runs() / run).glob("*/history.ipynb"))
    assert [line.split(":", 1)[0] for line in lines] == tasks
    assert all(": message 1 (system): differs at character " in line for line in lines)
    assert "'workbook" in lines[0] and "'notebook" in lines[0]


def test_the_user_message_is_checked_too(reference_file, tmp_path):
    run = tmp_path / REACT_RUNS[0]
    shutil.copytree(first_notebook(REACT_RUNS[0]).parent, run / "demo")
    notebook = run / "demo" / "history.ipynb"
    data = json.loads(notebook.read_text())
    for cell in data["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if source.startswith("### Query"):
            cell["source"] = source.replace(" ", "  ", 1)  # the task's query, one space more
    notebook.write_text(json.dumps(data))
    (line,) = check_run_prompts(run, reference_file)
    assert line.startswith("demo: message 2 (user): differs at character ")


def test_an_episode_without_its_prompt_is_named(reference_file, tmp_path):
    run = tmp_path / REACT_RUNS[1]
    shutil.copytree(first_notebook(REACT_RUNS[1]).parent, run / "no_prompt")
    notebook = run / "no_prompt" / "history.ipynb"
    data = json.loads(notebook.read_text())
    data["cells"] = [c for c in data["cells"] if "### Prompt" not in "".join(c["source"])]
    notebook.write_text(json.dumps(data))
    assert check_run_prompts(run, reference_file) == [
        "no_prompt: no `### Prompt` cell in history.ipynb"
    ]


def test_our_own_prompts_differ_from_the_papers_from_the_first_character():
    lines = check_run_prompts(published_runs() / REACT_RUNS[0], Path(OURS))
    assert len(lines) == 45
    assert all("message 1 (system): differs at character 0 (line 1)" in line for line in lines)


def test_upstreams_pinned_prompt_file_is_not_the_one_the_papers_runs_used(tmp_path):
    """The pinned sha256 is the file rebuilt from a notebook with four differences undone; with
    it, every episode differs where the edit action's last line does (docs/agents.md)."""
    upstream = upstream_prompt_yaml(first_notebook(REACT_RUNS[0]), tmp_path / "prompt.yaml")
    assert hashlib.sha256(upstream.read_bytes()).hexdigest() == PROMPT_SHA256
    lines = check_run_prompts(published_runs() / REACT_RUNS[1], upstream)
    assert len(lines) == 144
    assert all("message 1 (system): differs at character 790 (line 13)" in x for x in lines)


def test_runs_of_other_agents_are_not_checked(reference_file):
    assert not checks_prompts(published_runs() / SWE_RUN)
    assert checks_prompts(published_runs() / REACT_RUNS[0])
    assert check_run_prompts(published_runs() / SWE_RUN, reference_file) == []


# -- loading: the folder of templates, SUPER's format, bad files ------------------------------
def ours_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir()
    for part in PARTS.values():
        shutil.copyfile(Path(ours_folder()) / part.file, folder / part.file)
    return folder


def ours_folder() -> str:
    from pytest_super.prompts import _ours_folder

    return _ours_folder()


def test_a_copy_of_our_folder_gives_our_prompts_with_its_path_and_hash(tmp_path):
    folder = ours_copy(tmp_path)
    copied = load_prompts(folder)
    assert copied.templates == ours().templates and copied.sha256 == ours().sha256
    assert copied.label == f"{folder.resolve()} (sha256 {ours().sha256})"
    assert copied.properties() == {
        "prompts": str(folder.resolve()),
        "prompts_sha256": ours().sha256,
    }
    assert ours().label == "ours" and ours().properties() == {"prompts": "ours"}
    agent = ReActSuperAgent()
    assert agent.prompt_messages(copied, "q?", 300) == agent.prompt_messages(ours(), "q?", 300)


def test_a_prompt_yaml_gives_react_the_same_text_as_react_super(reference_file):
    from pytest_super.agents.react import system_prompt

    prompts = load_prompts(reference_file)
    with_edit = system_prompt(with_edit=True, cell_timeout_s=300, prompts=prompts)
    assert system_prompt(with_edit=False, cell_timeout_s=60, prompts=prompts) == with_edit
    assert prompts.react_query("Do it.") == "Query: Do it."
    # the parts SUPER's file does not hold stay ours
    assert prompts.templates == ours().templates


BAD_FOLDERS = {
    "missing": (lambda f: (f / "swe_instance.txt").unlink(), ["file swe_instance.txt is missing"]),
    "placeholder": (
        lambda f: (f / "react_instance.txt").write_text("Query:\n"),
        ["react_instance.txt: the placeholder {query} is missing"],
    ),
    "stray": (
        lambda f: (f / "react_sytem.txt").write_text("x"),
        ["react_sytem.txt is not a prompt part", "rename it"],
    ),
    "not utf-8": (
        lambda f: (f / "swe_system.txt").write_bytes(b"\xff{command_docs}"),
        ["swe_system.txt: not UTF-8 text", "save it as UTF-8"],
    ),
}


@pytest.mark.parametrize("case", BAD_FOLDERS)
def test_a_bad_folder_names_the_file_and_what_to_do(case, tmp_path):
    spoil, expected = BAD_FOLDERS[case]
    folder = ours_copy(tmp_path)
    spoil(folder)
    with pytest.raises(PromptFileError) as info:
        load_prompts(folder)
    for text in expected:
        assert text in str(info.value)


BAD_FILES = {
    "unknown field": ("tips: |\n  x\n", ["field 'tips' is not one of SUPER's prompt.yaml fields"]),
    "missing field": (
        "system_prompt: |\n  x\ncommands: |\n  y\n",
        ["field 'edit_demonstration' is missing", "pytest-super download prompts"],
    ),
    "not text": (
        "system_prompt: [1]\ncommands: x\nedit_demonstration: y\n",
        ["field 'system_prompt' is list, not text", "(system_prompt: |)"],
    ),
    "not yaml": ("system_prompt: |\n  x\n bad: [\n", ["not a YAML file", "line"]),
    "not a mapping": ("- a\n- b\n", ["not a YAML mapping of prompt fields"]),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_prompt_yaml_names_the_file_the_field_and_what_to_do(case, tmp_path):
    text, expected = BAD_FILES[case]
    path = tmp_path / "prompt.yaml"
    path.write_text(text)
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    assert str(path) in str(info.value)
    for part in expected:
        assert part in str(info.value)


def test_a_bad_prompts_setting_is_a_usage_error(pytester):
    (pytester.path / "prompt.yaml").write_text("system_prompt: |\n  x\ncommands: 3\n")
    result = pytester.runpytest_subprocess(
        "--super-agent=gold", "--super-prompts=prompt.yaml", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--super-prompts 'prompt.yaml'*field 'commands' is int*"])
    result = pytester.runpytest_subprocess(
        "--super-agent=gold", "--super-prompts=nowhere", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*nowhere: no such file or folder*"])


# -- the agents take their text from the prompt set (local kernels, scripted endpoint) ---------
TASK = """\
id: adder
query: 'Add 2 and 3. Report the sum as a json structured as follows: {"sum": 0}.'
answer: {sum: 5}
landmarks: ['5']
"""
REACT_SUBMIT = 'Thought: It is 5.\nAction: submit\n<content>\n{"sum": 5}\n'
SWE_SUBMIT = 'DISCUSSION\nIt is 5.\n```\nsubmit {"sum": 5}\n```'


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("SUPER_API_KEY", KEY)
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    (pytester.path / "tasks/expert").mkdir(parents=True)
    (pytester.path / "tasks/expert/adder.yaml").write_text(TASK)
    return pytester


def run_local(project: pytest.Pytester, server, agent: str, *extra: str) -> pytest.RunResult:
    return project.runpytest_subprocess(
        "tasks",
        f"--super-agent={agent}",
        "--super-model=gpt-4o",
        f"--super-base-url={server.base_url}",
        "--super-backend=local",
        f"--junitxml={project.path / 'junit.xml'}",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::UserWarning",
        *extra,
    )


def marked_folder(tmp_path: Path) -> Path:
    """Our templates with a marker in every part an agent sends."""
    folder = ours_copy(tmp_path)
    for name in ("react_system", "react_edit_demonstration", "swe_system", "reflexion_system"):
        path = folder / PARTS[name].file
        path.write_text(f"MARK-{name}\n" + path.read_text())
    (folder / "react_instance.txt").write_text("Your task, MARK-react_instance: {query}\n")
    (folder / "swe_instance.txt").write_text("MARK-swe_instance\n{query}\n")
    edit = folder / "swe_edit_command.txt"
    edit.write_text("MARK-swe_edit_command " + edit.read_text())
    return folder


def test_react_super_sends_the_folders_prompts(project, openai_server, tmp_path):
    folder = marked_folder(tmp_path)
    openai_server.script([REACT_SUBMIT])
    result = run_local(project, openai_server, "react-super", f"--super-prompts={folder}")
    result.assert_outcomes(passed=1)
    system, user = openai_server.requests[0].messages[:2]
    assert system["content"].startswith("MARK-react_system\n")
    assert "MARK-react_edit_demonstration" in system["content"]
    assert user["content"] == "Your task, MARK-react_instance: " + TASK.split("'")[1]
    result.stdout.fnmatch_lines([f"pytest-super: prompts {folder.resolve()} (sha256 *)"])


def test_the_swe_agent_sends_the_folders_prompts(project, openai_server, tmp_path):
    folder = marked_folder(tmp_path)
    openai_server.script([SWE_SUBMIT])
    result = run_local(project, openai_server, "swe", f"--super-prompts={folder}")
    result.assert_outcomes(passed=1)
    system, user = openai_server.requests[0].messages[:2]
    assert system["content"].startswith("MARK-swe_system\n")
    assert "docstring: MARK-swe_edit_command replaces lines" in system["content"]
    assert user["content"].startswith("MARK-swe_instance\nAdd 2 and 3.")


def test_reflexion_sends_the_folders_reflection_prompt(project, openai_server, tmp_path):
    folder = marked_folder(tmp_path)
    openai_server.script(["no format", "Plan: submit 5 [END]", REACT_SUBMIT])
    result = run_local(
        project,
        openai_server,
        "reflexion",
        f"--super-prompts={folder}",
        "--super-attempts=2",
        "--super-steps=1",
    )
    result.assert_outcomes(passed=1)
    first, reflection, second = (r.messages for r in openai_server.requests)
    assert first[0]["content"].startswith("MARK-react_system\n")
    assert reflection[0]["content"].startswith("MARK-reflexion_system\n")
    assert "MARK-react_instance" in second[1]["content"] and "submit 5" in second[1]["content"]


def test_header_results_and_html_name_the_prompts(project, openai_server, reference_file):
    openai_server.script([REACT_SUBMIT, REACT_SUBMIT])
    digest = hashlib.sha256(reference_file.read_bytes()).hexdigest()
    result = run_local(project, openai_server, "react", f"--super-prompts={reference_file}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"pytest-super: prompts {reference_file} (sha256 {digest})"])
    (run_dir,) = (project.path / "reports").iterdir()
    (record,) = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert (record["prompts"], record["prompts_sha256"]) == (str(reference_file), digest)
    index = (run_dir / "index.html").read_text()
    assert f"prompts <code>{reference_file} (sha256 {digest})</code>" in index
    task_page = next((run_dir / "tasks").glob("*.html")).read_text()
    assert f"{reference_file} (sha256 {digest})" in task_page
    # the plain react agent sent the file's system prompt too (the reference's is one for both)
    expected = recorded_prompt(first_notebook(REACT_RUNS[0]))[0]["content"]
    assert openai_server.requests[0].messages[0]["content"] == expected
    # ours, by default
    result = run_local(project, openai_server, "react")
    result.stdout.fnmatch_lines(["pytest-super: prompts ours"])
    newest = max((project.path / "reports").iterdir(), key=lambda p: p.stat().st_mtime)
    (record,) = [json.loads(x) for x in (newest / "results.jsonl").read_text().splitlines()]
    assert record["prompts"] == "ours" and "prompts_sha256" not in record


def test_a_task_file_that_did_not_load_is_recorded_with_the_prompts(project, tmp_path):
    folder = ours_copy(tmp_path)
    (project.path / "tasks/expert/broken.yaml").write_text("id: broken\nquery: [\n")
    result = project.runpytest_subprocess(
        "tasks", "--super-agent=gold", "--super-backend=local", f"--super-prompts={folder}"
    )
    # the file that did not load, and the task the gold agent cannot run (it has no solution)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*TaskSetupError*has no expert solution*"])
    (run_dir,) = (project.path / "reports").iterdir()
    records = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for record in records:
        assert record["prompts"] == str(folder.resolve()), record
        assert record["prompts_sha256"] == ours().sha256


@pytest.mark.docker
def test_a_crashed_task_is_recorded_with_the_prompts(project_dir, engine, tmp_path):
    from pytest_super.kernels.docker.engine import LABEL_WORKER
    from tests.support.projects import (
        PytestRun,
        make_project,
        only_run_dir,
        pid_of,
        results,
        sleep_then_answer,
        task_yaml,
        wait_for_container,
    )

    folder = ours_copy(tmp_path)
    make_project(project_dir, {"expert/victim": task_yaml("victim", sleep_then_answer(120))})
    run = PytestRun(
        project_dir, "tasks", "--super-agent=gold", "-n", "1", f"--super-prompts={folder}"
    )
    try:
        box = wait_for_container(engine, project_dir, "victim")
        os.kill(pid_of(project_dir, box.labels[LABEL_WORKER]), signal.SIGKILL)
        run.wait(120)
    finally:
        run.kill_group()
    (victim,) = results(only_run_dir(project_dir))
    assert victim["exit_status"] == "worker_crashed", victim
    assert (victim["prompts"], victim["prompts_sha256"]) == (str(folder.resolve()), ours().sha256)


# -- the demo's scripted ReAct-SUPER episode in a container, with the reference's prompts ------
@pytest.mark.docker
def test_the_demo_scripted_episode_runs_with_the_references_prompt_file(
    pytester, openai_server, reference_file, monkeypatch, image
):
    from tests import test_integration_agents as demo

    monkeypatch.setenv("SUPER_API_KEY", demo.SECRET)
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    path = pytester.path / "tasks/masked/counter.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(demo.MASKED))
    openai_server.script(
        [demo.EDIT_WITH_WHITESPACE_MISTAKE, demo.EDIT_FIXED, demo.RUN, demo.SUBMIT]
    )
    result = demo.run(pytester, openai_server, f"--super-prompts={reference_file}")
    result.assert_outcomes(passed=1)
    published = recorded_prompt(first_notebook(REACT_RUNS[0]))[0]["content"]
    for request in openai_server.requests:
        system, user = request.messages[:2]
        assert system == {"role": "system", "content": published}
        assert user["content"].startswith("Query: I have already executed some of the required")
    (props,) = read_junit_properties(pytester.path / "junit.xml").values()
    assert props["super.prompts"] == str(reference_file)
    assert props["super.accuracy"] == "1.0" and int(props["super.steps"]) == 4


# -- pytest-super download prompts, against a stand-in for raw.githubusercontent.com -----------
class RawStandIn:
    """Serves `files` (path under /<repo>/<commit>/ -> bytes; `root`: that prefix, the
    reference's at its pinned commit by default); records each request's path."""

    def __init__(
        self, files: dict[str, bytes], root: str = f"/{PROMPTS_REPO}/{PROMPTS_COMMIT}/"
    ) -> None:
        self.files = files
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append(self.path)
                prefix = root
                data = server.files.get(self.path.removeprefix(prefix))
                if not self.path.startswith(prefix) or data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


LICENSE = (DATA / "LICENSE.md").read_bytes()  # upstream's own licence file, shipped with the data


@pytest.fixture
def upstream_bytes(tmp_path: Path) -> bytes:
    return upstream_prompt_yaml(first_notebook(REACT_RUNS[0]), tmp_path / "up.yaml").read_bytes()


@pytest.fixture
def stand_in() -> Iterator[RawStandIn]:
    server = RawStandIn({})
    yield server
    server.stop()


def download_prompts_cli(url: str, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SUPER_PROMPTS_BASE_URL": url, "XDG_CACHE_HOME": str(cache)}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1"
    return subprocess.run(
        [sys.executable, "-m", "pytest_super.cli", "download", "prompts", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_download_saves_the_pinned_prompt_and_its_license(stand_in, upstream_bytes, tmp_path):
    stand_in.files = {PROMPT_FILE: upstream_bytes, LICENSE_FILE: LICENSE}
    done = download_prompts_cli(stand_in.url, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "cache" / "pytest-super" / "prompts" / PROMPTS_COMMIT
    assert (folder / "prompt.yaml").read_bytes() == upstream_bytes
    assert (folder / "LICENSE.md").read_bytes() == LICENSE
    assert f"--super-prompts={folder / 'prompt.yaml'}" in done.stdout
    assert load_prompts(folder / "prompt.yaml").sha256 == PROMPT_SHA256
    # a second download finds it in the cache and asks nothing
    asked = len(stand_in.requests)
    assert download_prompts_cli(stand_in.url, tmp_path / "cache").returncode == 0
    assert len(stand_in.requests) == asked == 2


def test_download_refuses_a_file_with_another_hash(stand_in, reference_file, tmp_path):
    stand_in.files = {PROMPT_FILE: reference_file.read_bytes(), LICENSE_FILE: LICENSE}
    done = download_prompts_cli(stand_in.url, tmp_path / "cache")
    assert done.returncode == 2
    assert f"not the pinned {PROMPT_SHA256}" in done.stderr and "nothing was saved" in done.stderr
    assert not (tmp_path / "cache").exists()


def test_download_names_a_missing_file_and_writes_where_told(stand_in, upstream_bytes, tmp_path):
    stand_in.files = {PROMPT_FILE: upstream_bytes}
    done = download_prompts_cli(stand_in.url, tmp_path / "cache", "--out", str(tmp_path / "p"))
    assert done.returncode == 2
    assert f"/{LICENSE_FILE}: HTTP 404" in done.stderr
    stand_in.files[LICENSE_FILE] = LICENSE
    done = download_prompts_cli(stand_in.url, tmp_path / "cache", "--out", str(tmp_path / "p"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "p" / "prompt.yaml").read_bytes() == upstream_bytes
    assert not (tmp_path / "cache").exists()
