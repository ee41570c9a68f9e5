"""End to end on the real Docker engine: a masked task whose prefix has execute and edit cells runs
in its own container with the gold agent, scores perfectly, and leaves no container behind; a
task whose gold answer is not reproduced (an environment error) can be kept for debugging; a
missing image is an error that names the build command.
"""

from __future__ import annotations

import json
import textwrap

import docker
import pytest

from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker.cleanup import cleanup_containers
from pytest_super.kernels.docker.engine import docker_client
from pytest_super.kernels.docker.image import build_image
from tests.support.projects import junit_properties as read_junit_properties

pytestmark = pytest.mark.docker

MASKED = """\
id: counter_configuration,cpu
query: I have already executed some of the required steps. Now, run the counter and report the count.
answer: {count: 12, device: cpu}
landmarks: ['wrote settings', 'counting on cpu', 'count=12']
pre_executed:
  - execute: |
      %%writefile settings.ini
      device = cuda
      repeat = 3
  - execute: |
      import os
      print("wrote settings", os.getcwd())
  - edit:
      file: settings.ini
      before: |
        device = cuda
      after: |
        device = cpu
solution:
  - execute: |
      !sed -i 's/repeat = 3/repeat = 4/' settings.ini
  - execute: |
      import json
      conf = dict(line.split(" = ") for line in open("settings.ini").read().splitlines())
      print(f"counting on {conf['device']}")
      count = 3 * int(conf["repeat"])
      print(f"count={count}")
      print(json.dumps({"count": count, "device": conf["device"]}))
"""

WRONG = """\
id: wrong
query: Report x.
answer: {x: 1}
solution:
  - execute: |
      print('{"x": 2}')
"""


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture
def engine(image: str) -> docker.DockerClient:
    return docker_client(KernelSettings())


def run_ids(pytester: pytest.Pytester) -> list[str]:
    return [p.name for p in (pytester.path / "reports").iterdir()]


def containers_of(client: docker.DockerClient, run_id: str) -> list[str]:
    return [
        c.name
        for c in client.containers.list(all=True, filters={"label": f"pytest-super.run={run_id}"})
    ]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    for rel, text in {
        "tasks/masked/counter.yaml": MASKED,
        "tasks/expert/wrong.yaml": WRONG,
    }.items():
        path = pytester.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return pytester


def test_masked_task_with_prefix_cells_scores_perfectly_in_a_container(project, engine):
    junit = project.path / "junit.xml"
    result = project.runpytest_subprocess(
        "tasks/masked",
        "--super-agent=gold",
        f"--junitxml={junit}",
        "--super-mem=1g",
        "--super-cpus=1",
    )
    result.assert_outcomes(passed=1)
    (props,) = read_junit_properties(junit).values()
    assert props["super.accuracy"] == "1.0"
    assert props["super.landmarks"] == "1.0"
    assert props["super.category"] == "configuration,cpu"
    trajectory = json.loads(
        (project.path / props["super.trajectory"]).with_suffix(".json").read_text()
    )
    prefix = [s for s in trajectory["steps"] if s["pre_executed"]]
    assert [s["action"] for s in prefix] == ["execute", "execute", "edit"]
    assert all(s["thought"] == "[pre-executed by user]" for s in prefix)
    assert "/content" in prefix[1]["output"]  # the working directory of a docker kernel
    (run_id,) = run_ids(project)
    assert containers_of(engine, run_id) == []


def test_keep_leaves_a_gold_miss_container_and_says_how_to_get_in(project, engine):
    result = project.runpytest_subprocess("tasks/expert", "--super-agent=gold", "--super-keep")
    result.assert_outcomes(errors=1)  # the gold answer not reproduced: the environment's
    result.stdout.fnmatch_lines(["*EnvironmentFault*did not reproduce the gold answer*"])
    (run_id,) = run_ids(project)
    try:
        kept = containers_of(engine, run_id)
        assert len(kept) == 1
        result.stdout.fnmatch_lines(
            [f"*docker exec -it {kept[0]}*", "*jupyter console --existing*"]
        )
    finally:
        cleanup_containers(engine, run_id=run_id)


def test_missing_image_is_an_error_that_names_the_build_command(project, engine):
    result = project.runpytest_subprocess(
        "tasks/expert", "--super-agent=gold", "--super-image=pytest-super-kernel:nope"
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ImageMissing*pytest-super image build*"])
