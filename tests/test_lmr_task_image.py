"""An LMR task's own environment through the backend's image contract (issue 46, item 2): the
folder's Dockerfile, with its build args, built once and cached by content, then our kernel layer
FROM it (`kernels/docker/task_image.py`); the agent's kernel runs in it, in the repository's
folder. A folder without a Dockerfile runs in the default image; `--super-image` overrides; a
base the engine cannot get is an environment error naming it; the local backend says it cannot.

The Docker tests use a copy of a demo task with a Dockerfile in upstream's shape (build args
UID, GID, DIR before FROM, a user, `COPY . .`, its logs folder, `USER user`; not its pip install of
the repository's requirements, which would need an index), FROM
our default kernel image (offline). Each Dockerfile holds a fresh uuid, so its images' tags are
this test's alone; they are removed however the test ends."""

from __future__ import annotations

import contextlib
import json
import shutil
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker.errors
import pytest

from pytest_super.errors import EnvironmentFault
from pytest_super.kernels import needs_own_image, prepare_task_image, settings_for_task
from pytest_super.kernels.base import ImageSpec, KernelSettings, TaskImageUnsupported
from pytest_super.kernels.docker.engine import docker_client
from pytest_super.kernels.docker.image import build_image, image_exists
from pytest_super.kernels.docker.task_image import base_images, context_files, task_image_tags
from pytest_super.tasks import lmr_tasks

DEMO = Path(__file__).resolve().parents[1] / "tasks" / "lmr" / "01-NgramMetrics"
ONE = "lmr/01-NgramMetrics/info.json::01-NgramMetrics/1"

#: upstream's Dockerfile shape (benchmark/01-DPO/Dockerfile at da757c9), on our default image
UPSTREAM_SHAPE = """\
ARG UID
ARG GID
ARG DIR=ngram-lm

FROM {base}

ARG UID
ARG GID
ARG DIR

RUN groupadd -g ${{GID}} usergroup \\
    && useradd -m -u ${{UID}} -g usergroup user
WORKDIR /workspace
COPY . .
RUN echo "{marker} ${{DIR}} ${{UID}}:${{GID}}" > /etc/lmr-task-marker \\
    && mkdir -p /workspace/${{DIR}}/unit_test/logs \\
    && chown -R user:usergroup /workspace/${{DIR}}/unit_test/logs
USER user
"""

PROBE = '''
from pytest_super.agents.lmr_gold import place_golden
from pytest_super.trajectory import Action, Step

LOOK = """import getpass, os, subprocess
print("marker:", open("/etc/lmr-task-marker").read().strip() if os.path.exists("/etc/lmr-task-marker") else "none")
print("cwd:", os.getcwd(), "user:", getpass.getuser())
print("golden:", subprocess.run("find / -xdev -iname '*golden*' 2>/dev/null", shell=True,
      capture_output=True, text=True).stdout.split())
"""


class Probe:
    """Looks at the box it runs in, then puts the golden function in place."""

    name = "probe"
    needs_llm = False

    def run(self, env):
        seen = env.kernel.execute(LOOK, 120)
        env.record(Step(thought="look", action=Action.EXECUTE, content="look", observation=seen.output))
        return place_golden(env, env.task)
'''


def _spec_folder(root: Path, base: str) -> tuple[Path, str]:
    """A copy of the demo task with a Dockerfile FROM `base`; the folder and its marker."""
    folder = root / "01-NgramMetrics"
    shutil.copytree(DEMO, folder)
    marker = f"lmr-image-{uuid.uuid4().hex}"
    (folder / "Dockerfile").write_text(UPSTREAM_SHAPE.format(base=base, marker=marker))
    return folder, marker


def _remove_images(*tags: str) -> None:
    api = docker_client(KernelSettings()).api
    for tag in tags:
        with contextlib.suppress(docker.errors.NotFound):  # absent: never built
            api.remove_image(tag, force=True)


# -- without an engine ----------------------------------------------------------------------------


def test_a_folder_with_a_dockerfile_carries_its_image_spec_with_upstreams_build_args(tmp_path):
    folder, _ = _spec_folder(tmp_path, "python:3.10-slim")
    (task, _) = lmr_tasks(folder / "info.json")
    assert task.image_spec == ImageSpec(
        context=str(folder.resolve()),
        dockerfile="Dockerfile",
        build_args=(("UID", "1000"), ("GID", "1000"), ("DIR", "ngram-lm")),
        exclude=("golden_files",),
    )
    # the demo set has no Dockerfile: the default image
    assert all(t.image_spec is None for t in lmr_tasks(DEMO / "info.json"))


def test_the_context_leaves_the_golden_files_out_and_the_tag_follows_the_content(tmp_path):
    folder, _ = _spec_folder(tmp_path, "python:3.10-slim")
    (task, _) = lmr_tasks(folder / "info.json")
    spec = task.image_spec
    assert spec is not None
    sent = context_files(spec)
    assert "ngram-lm/lm/metrics.py" in sent and "Dockerfile" in sent
    assert not [p for p in sent if "golden" in p]
    own, kernel = task_image_tags(spec)
    assert own.startswith("pytest-super-task-own:01-ngrammetrics-")
    assert kernel.startswith("pytest-super-task:01-ngrammetrics-")
    task_image_tags.cache_clear()
    (folder / "golden_files" / "metrics_golden.py").write_text("# changed\n")
    assert task_image_tags(spec) == (own, kernel)  # not in the context: the same image
    task_image_tags.cache_clear()
    (folder / "ngram-lm" / "lm" / "metrics.py").write_text("# changed\n")
    assert task_image_tags(spec)[0] != own
    task_image_tags.cache_clear()
    changed = ImageSpec(spec.context, spec.dockerfile, (("UID", "1001"),), spec.exclude)
    assert task_image_tags(changed)[0] != task_image_tags(spec)[0]


def test_the_bases_are_read_as_docker_fills_them(tmp_path):
    (tmp_path / "Dockerfile").write_text(
        textwrap.dedent(
            """\
            # upstream 01-DPO: global ARGs, FROM a PyTorch base
            ARG UID
            ARG TAG=2.0.1-cuda11.7-cudnn8-runtime
            FROM pytorch/pytorch:${TAG} AS build
            FROM --platform=linux/amd64 build
            FROM scratch
            FROM $REPO/x:1
            FROM python:3.10-slim \\
                AS last
            """
        )
    )
    spec = ImageSpec(str(tmp_path))
    assert base_images(spec) == [
        "pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime",
        "python:3.10-slim",
    ]
    given = ImageSpec(str(tmp_path), build_args=(("TAG", "2.1.0"),))
    assert base_images(given)[0] == "pytorch/pytorch:2.1.0"


def test_nothing_is_built_until_the_task_runs_and_super_image_overrides():
    spec = ImageSpec("/nowhere")
    run = KernelSettings(backend="local")
    assert needs_own_image(run, spec) and not needs_own_image(run, None)
    assert settings_for_task(run, "default", spec) == run  # no image yet, nothing asked
    named = KernelSettings(backend="local", image="mine:1")
    assert not needs_own_image(named, spec)


def test_the_local_backend_says_it_cannot_run_a_task_that_needs_an_image(tmp_path):
    folder, _ = _spec_folder(tmp_path, "python:3.10-slim")
    (task, _) = lmr_tasks(folder / "info.json")
    assert task.image_spec is not None
    with pytest.raises(TaskImageUnsupported, match="not supported: this task needs an image") as e:
        prepare_task_image(KernelSettings(backend="local"), task.image_spec)
    assert "--super-backend=docker" in str(e.value) and not e.value.retryable


# -- on the real engine ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_image() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture
def project(pytester: pytest.Pytester, default_image: str) -> Iterator[pytest.Pytester]:
    (pytester.path / "lmr_probe.py").write_text(PROBE)
    pytester.makeini("[pytest]\npythonpath = .\n")
    made: list[str] = []
    pytester.made_images = made  # type: ignore[attr-defined]
    yield pytester
    _remove_images(*made)


def _run(project: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, list[dict]]:
    for old in (project.path / "reports").glob("*"):
        shutil.rmtree(old)
    result = project.runpytest_subprocess(
        *args, "--super-report-dir=reports", "-p", "no:cacheprovider", "--super-mem=1g"
    )
    (run_dir,) = (project.path / "reports").iterdir()
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    steps = [
        step
        for trajectory in sorted((run_dir / "trajectories").glob("*.json"))
        for step in json.loads(trajectory.read_text())["steps"]
    ]
    for record in records:  # one task per run here
        record["look"] = "".join(s["observation"] for s in steps if s["content"] == "look")
    return result, records


@pytest.mark.docker
def test_the_task_runs_in_the_image_its_dockerfile_builds_once(project, default_image):
    folder, marker = _spec_folder(project.path / "lmr", default_image)
    (task, _) = lmr_tasks(folder / "info.json")
    assert task.image_spec is not None
    own, kernel = task_image_tags(task.image_spec)
    project.made_images.extend([own, kernel])

    result, (record,) = _run(project, ONE, "--super-agent=lmr_probe:Probe")
    result.assert_outcomes(passed=1)
    assert record["image"] == kernel
    look = record["look"]
    assert f"marker: {marker} ngram-lm 1000:1000" in look  # the folder's image, its build args
    assert "cwd: /content/ngram-lm user: root" in look  # our kernel, in the repository's folder
    assert "golden: []" in look  # `COPY . .` copied the folder, less its golden files
    api = docker_client(KernelSettings()).api
    built = api.inspect_image(kernel)["Id"]
    # asked again (the next run, another worker): found by its content, nothing built again
    again = prepare_task_image(KernelSettings(), task.image_spec)
    assert again.image == kernel and api.inspect_image(kernel)["Id"] == built


@pytest.mark.docker
def test_super_image_overrides_the_folders_dockerfile(project, default_image):
    folder, _ = _spec_folder(project.path / "lmr", default_image)
    (task, _) = lmr_tasks(folder / "info.json")
    assert task.image_spec is not None
    tags = task_image_tags(task.image_spec)
    project.made_images.extend(tags)
    result, (record,) = _run(
        project, ONE, "--super-agent=lmr_probe:Probe", f"--super-image={default_image}"
    )
    result.assert_outcomes(passed=1)
    assert record["image"] == default_image
    assert "marker: none" in record["look"]
    client = docker_client(KernelSettings())
    assert not [tag for tag in tags if image_exists(client, tag)]  # the Dockerfile never built


@pytest.mark.docker
def test_a_base_the_engine_cannot_get_is_an_environment_error_naming_it(project):
    # a registry on a closed port of this machine: the pull is refused at once, offline too
    base = f"127.0.0.1:1/pytest-super-missing-{uuid.uuid4().hex}:none"
    folder, _ = _spec_folder(project.path / "lmr", base)
    (task, _) = lmr_tasks(folder / "info.json")
    assert task.image_spec is not None
    project.made_images.extend(task_image_tags(task.image_spec))
    assert base_images(task.image_spec) == [base]
    with pytest.raises(EnvironmentFault, match=f"the base image '{base}' of .*cannot be pulled"):
        prepare_task_image(KernelSettings(), task.image_spec)

    result, (record,) = _run(
        project, "lmr/01-NgramMetrics/info.json::01-NgramMetrics/1", "--super-agent=gold"
    )
    result.assert_outcomes(errors=1)  # the environment's fault, never the agent's
    assert record["exit_status"] == "environment_error"
    result.stdout.fnmatch_lines([f"*EnvironmentFault: the base image '{base}'*cannot be pulled*"])
