"""The colab image: SUPER's reference environment, pin for pin and apt package for apt package
(except the deviations docs/environment.md lists), locked, chosen by the task, proven by a real
training run with the gold agent in a container.

The reference is upstream's `super/env/` (colab_pip_requirements.txt and the apt list of
start_modal_app.py), kept in tests/data/super-reference/env/.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super.errors import TaskFileError
from pytest_super.kernels.docker.image import (
    COLAB_LOCK,
    COLAB_REQUIREMENTS,
    build_hint,
    build_image,
    build_inputs,
    default_image_tag,
    image_for_task,
)
from pytest_super.report import TaskRecord, images_line
from pytest_super.tasks import iter_jsonl_tasks, load_yaml_task, task_to_dict
from tests.support.projects import junit_properties as read_junit_properties
from tests.support.published_data import REFERENCE_ENV

ROOT = Path(__file__).resolve().parents[1]
IMAGE_DIR = ROOT / "pytest_super" / "kernels" / "docker" / "image_context"
REFERENCE = REFERENCE_ENV
ENVIRONMENT_DOC = ROOT / "docs" / "environment.md"
COLAB_TASKS = ROOT / "tests" / "data" / "colab"
# What cannot exist here, each listed with its reason in docs/environment.md.
LEFT_OUT = {"en-core-web-sm"}
APT_STAND_INS = {"openjdk-11-jdk": "openjdk-17-jdk"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(==[^\s;\\]+|@ \S+)")


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(text: str) -> dict[str, str]:
    """name -> `==version` (or `@ url`) of a requirements text; options and comments skipped."""
    found = {}
    for line in text.splitlines():
        match = PIN.match(line.strip())
        if match:
            found[_name(match.group(1))] = match.group(2)
    return found


def _reference_pins() -> dict[str, str]:
    return _pins((REFERENCE / "colab_pip_requirements.txt").read_text())


def test_pip_set_is_the_reference_pin_for_pin_except_what_is_listed() -> None:
    ours = _pins((IMAGE_DIR / COLAB_REQUIREMENTS).read_text())
    reference = _reference_pins()
    assert len(reference) == 34
    expected = {name: pin for name, pin in reference.items() if name not in LEFT_OUT}
    assert ours == expected
    doc = ENVIRONMENT_DOC.read_text()
    for name in LEFT_OUT:
        assert name in doc
    assert "download.pytorch.org/whl/cpu" in doc  # the left-out index, and why


def test_lock_pins_every_package_with_hashes_and_keeps_the_reference_pins() -> None:
    lock = (IMAGE_DIR / COLAB_LOCK).read_text()
    entries = re.findall(
        r"^(\S+)==(\S+?)(?: ;[^\\\n]*)? \\\n((?:\s+--hash=sha256:[0-9a-f]{64}.*\n)+)", lock, re.M
    )
    requirement_lines = [ln for ln in lock.splitlines() if ln and not ln.startswith((" ", "#"))]
    assert len(entries) == len(requirement_lines) > 150  # every line pinned with == and hashes
    locked = {_name(name): f"=={version}" for name, version, _ in entries}
    for name, pin in _pins((IMAGE_DIR / COLAB_REQUIREMENTS).read_text()).items():
        assert locked[name] == pin, name
    assert locked["pip"] == "==24.0"  # fairseq-era installs break on pip >= 24.1
    assert locked["ipykernel"].startswith("==6.")
    # absences the masked task relies on: the reference does not install these
    assert "datasets" not in locked and "accelerate" not in locked
    # the pins of issue 10's broken image: pyarrow is not there, NumPy stays 1.x
    assert locked["numpy"] == "==1.25.2" and "pyarrow" not in locked


def _reference_apt() -> list[str]:
    tree = ast.parse((REFERENCE / "start_modal_app.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "apt_packages":
            return ast.literal_eval(node.value)
    raise AssertionError("no apt_packages in start_modal_app.py")


def test_apt_packages_are_the_reference_list_with_jdk_17() -> None:
    dockerfile = (IMAGE_DIR / "Dockerfile.colab").read_text()
    command = re.search(
        r"apt-get install -y --no-install-recommends ((?:[^&]|\\\n)+)&&", dockerfile
    )
    assert command is not None
    ours = command.group(1).replace("\\", " ").split()
    expected = [APT_STAND_INS.get(name, name) for name in _reference_apt()]
    assert ours == expected
    doc = ENVIRONMENT_DOC.read_text()
    assert "openjdk-17-jdk" in doc and "openjdk-11-jdk" in doc


def test_colab_tag_covers_its_lock_and_the_default_image(tmp_path: Path, monkeypatch) -> None:
    colab = build_inputs(profile="colab")
    assert colab.parent == build_inputs()
    assert dict(colab.files)[COLAB_LOCK] == (IMAGE_DIR / COLAB_LOCK).read_text()
    assert colab.tag().startswith("pytest-super-kernel:colab-")
    changed = build_inputs(profile="colab").__class__(
        **{**colab.__dict__, "files": ((COLAB_LOCK, "torch==9.9.9\n"),)}
    )
    assert changed.digest() != colab.digest()
    assert build_inputs(profile="colab", base="debian:bookworm").tag() != colab.tag()
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nother\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert default_image_tag("colab") != colab.tag()  # through the default image it is built on


def test_a_task_names_its_image_and_super_image_overrides(tmp_path: Path) -> None:
    demo = load_yaml_task(ROOT / "tasks" / "expert" / "tabular-mlp.yaml")
    assert demo.image == "default"
    colab = load_yaml_task(COLAB_TASKS / "expert" / "colab-tiny-bert.yaml")
    assert colab.image == "colab"
    assert image_for_task(demo.image) == default_image_tag()
    assert image_for_task(colab.image) == default_image_tag("colab")
    assert image_for_task(colab.image, "my/image:1") == "my/image:1"

    bad = tmp_path / "bad.yaml"
    bad.write_text("id: bad\nset: expert\nquery: q\nanswer: 1\nimage: gpu\n")
    with pytest.raises(TaskFileError) as caught:
        load_yaml_task(bad)
    message = str(caught.value)
    assert "image" in message and "gpu" in message and "default, colab" in message


def test_a_missing_image_names_its_own_build_command() -> None:
    assert build_hint(default_image_tag("colab")) == (
        "`pytest-super image build --profile colab` (or `make image-colab`)"
    )
    assert build_hint(default_image_tag()) == "`pytest-super image build` (or `make image`)"


def test_super_rows_run_in_colab_and_import_keeps_it(tmp_path: Path) -> None:
    rows = tmp_path / "expert.jsonl"
    rows.write_text(json.dumps({"task_id": "t", "query": "q", "answer": "{}"}) + "\n")
    (task,) = iter_jsonl_tasks(rows)
    assert task.image == "colab"
    assert task_to_dict(task)["image"] == "colab"
    assert "image" not in task_to_dict(load_yaml_task(ROOT / "tasks/expert/tabular-mlp.yaml"))


def test_images_line_counts_tasks_per_image() -> None:
    records = [
        TaskRecord("a", "passed", {"image": "x:colab-1"}),
        TaskRecord("b", "failed", {"image": "x:colab-1"}),
        TaskRecord("c", "error", {"image": "x:default-2"}),
        TaskRecord("d", "skipped", {"image": "x:default-2"}),
    ]
    assert images_line(records) == "images: x:colab-1 (2 tasks), x:default-2 (1 task)"
    assert images_line([]) == ""


# -- in the engine -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def colab_image() -> str:
    """Built once per content hash (minutes from scratch; `make test` builds it before the suite)."""
    return build_image(profile="colab", offline=True, log=lambda line: None)


def _run_gold(paths: list[str], tmp_path: Path, *extra: str) -> tuple[str, dict, Path]:
    junit = tmp_path / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *paths,
            "--super-agent=gold",
            f"--rootdir={ROOT}",
            "-c",
            str(ROOT / "pyproject.toml"),
            "-p",
            "no:cacheprovider",
            f"--super-report-dir={tmp_path}",
            f"--junitxml={junit}",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    properties = read_junit_properties(junit)
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return proc.stdout + proc.stderr, properties, run_dir


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.colab
def test_gold_trains_a_tiny_bert_in_the_colab_image(colab_image: str, tmp_path: Path) -> None:
    tasks = [
        "tests/data/colab/expert/colab-tiny-bert.yaml",
        "tests/data/colab/masked/colab-tiny-bert_dependencies.yaml",
    ]
    output, properties, run_dir = _run_gold(tasks, tmp_path, "-n", "2", "-q")
    assert "2 passed" in output, output[-6000:]
    for task_id in ("colab-tiny-bert", "colab-tiny-bert_dependencies"):
        assert properties[task_id]["super.image"] == colab_image
        assert properties[task_id]["super.accuracy"] == "1.0"
        assert properties[task_id]["super.landmarks"] == "1.0"
    assert f"images: {colab_image} (2 tasks)" in output
    assert f"images: {colab_image} (2 tasks)" in (run_dir / "summary.md").read_text()
    # the masked prefix met the reference's absence the way SUPER's dependencies tasks do
    steps = json.loads(
        (run_dir / "trajectories" / "colab-tiny-bert_dependencies.json").read_text()
    )["steps"]
    prefix = [s for s in steps if s.get("pre_executed")]
    assert "No module named 'datasets'" in prefix[-1]["output"]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.colab
def test_super_rows_default_to_colab_and_super_image_overrides(
    colab_image: str, tmp_path: Path
) -> None:
    solution = [
        "import importlib.util, json, sys",
        'print(json.dumps({"torch": importlib.util.find_spec("torch") is not None}))',
    ]
    rows = tmp_path / "rows" / "expert.jsonl"
    rows.parent.mkdir()
    rows.write_text(
        json.dumps(
            {
                "task_id": "has-torch",
                "query": "Is torch installed? Answer {'torch': true}.",
                "answer": json.dumps({"torch": True}),
                "solution": ["\n".join(solution)],
            }
        )
        + "\n"
    )
    output, properties, _ = _run_gold([str(rows)], tmp_path / "colab", "-q")
    assert "1 passed" in output, output[-4000:]
    assert properties["has-torch"]["super.image"] == colab_image

    default = build_image(offline=True, log=lambda line: None)
    output, properties, _ = _run_gold(
        [str(rows)], tmp_path / "override", "-q", f"--super-image={default}"
    )
    # the small image has no torch: the gold answer is not reproduced, an environment error
    assert "1 error" in output and "did not reproduce the gold answer" in output, output[-4000:]
    assert properties["has-torch"]["super.image"] == default
