"""Attacks, round 5 (issue 41), the Docker side: causes 1 and 7.

1. Images the run did not build were trusted: a registry's image under our tag was pulled and
   run, and the reaper (which holds the engine's socket) ran the task image's `python`.
7. The disk watch could be walked around: it opened every sub-folder before walking any, and past
   the open-file limit the opens failed in silence, so those folders were never counted.

On the real engine (a second engine of the module's own for the reaper: the shared engine's
reaper may already run), a real registry on 127.0.0.1 (tests/support/registry_server.py) and
real folders. Every name made here carries a uuid; everything is removed however a test ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from pytest_super.kernels.docker.image import IMAGE_REPOSITORY
from pytest_super.kernels.docker.registry import provide_image, pull_image, remote_name
from tests.support.projects import make_project, only_run_dir, task_yaml
from tests.support.second_engine import SECOND_HOST

REPO = Path(__file__).resolve().parents[2]


# -- cause 1: a registry's image under our tag ------------------------------------------------------
def _forged_image(client: docker.DockerClient, remote: str, inputs: str) -> None:
    """Push a one-file image to the registry as `remote`, labelled as if built from `inputs`
    (a label anyone can set), without pytest-super's push: a registry's own image."""
    with tempfile.TemporaryDirectory(prefix="pytest-super-forged-") as context:
        Path(context, "Dockerfile").write_text(
            f'FROM scratch\nCOPY owned /owned\nLABEL pytest-super.inputs="{inputs}"\n'
        )
        Path(context, "owned").write_text("a forged kernel image\n")
        image, _ = client.images.build(path=context, tag=remote, rm=True)
    repository, _, version = remote.rpartition(":")
    try:
        for chunk in client.api.push(repository, tag=version, stream=True, decode=True):
            assert "error" not in chunk, chunk
    finally:
        client.api.remove_image(image.id, force=True)  # the pull must fetch it


@pytest.fixture
def registry() -> Iterator[str]:
    from tests.support.registry_server import running_registry

    with running_registry() as server:
        yield server.address


def _gone(client: docker.DockerClient, *names: str) -> None:
    for name in names:
        with contextlib.suppress(docker.errors.DockerException):
            client.api.remove_image(name, force=True)


@pytest.mark.docker
def test_a_registrys_image_under_our_tag_is_refused_and_never_tagged(
    engine: docker.DockerClient, image: str, registry: str
) -> None:
    """Red on 20480cf: the forged image (its inputs label even right) was pulled and tagged
    `pytest-super-kernel:default-<hex>`, and every later run on the engine ran in it. The rule
    keeps the registry's use: an image this machine pushed is still pulled and tagged."""
    from pytest_super.kernels.docker.registry import push_image

    inputs = uuid.uuid4().hex[:12]
    tag = f"{IMAGE_REPOSITORY}:default-{inputs}"
    remote = remote_name(registry, tag)
    pushed = f"{IMAGE_REPOSITORY}:default-{uuid.uuid4().hex[:12]}"
    try:
        _forged_image(engine, remote, inputs)
        provided = provide_image(tag, registry=registry, profile=None)
        assert provided.how == "missing", provided  # not ours to build: nothing stands there
        assert f"refused the registry's image {remote}" in provided.fallback, provided
        assert "label matches, but a label proves nothing" in provided.fallback
        assert "docs/security.md" in provided.fallback
        with pytest.raises(docker.errors.ImageNotFound):
            engine.images.get(tag)
        with pytest.raises(docker.errors.ImageNotFound):
            engine.images.get(remote)  # the registry's name removed too
        engine.api.tag(image, *pushed.rsplit(":", 1))
        push_image(engine, pushed, registry, log=lambda line: None)
        engine.api.remove_image(pushed, noprune=True)
        assert pull_image(engine, pushed, registry, log=lambda line: None) is None
        assert engine.images.get(pushed).id == engine.images.get(image).id
    finally:
        _gone(engine, tag, remote, remote_name(registry, pushed))
        with contextlib.suppress(docker.errors.DockerException):
            engine.api.remove_image(pushed, noprune=True)  # the kernel image itself stays


@pytest.mark.docker
def test_the_reaper_tag_and_a_wrong_label_are_refused_too(
    engine: docker.DockerClient, registry: str
) -> None:
    """Siblings: the engine-wide reaper tag cannot be moved by a registry, and a label that does
    not match is named in the refusal."""
    reaper_tag = f"pytest-super-reaper:{uuid.uuid4().hex[:12]}"
    kernel_tag = f"{IMAGE_REPOSITORY}:default-{uuid.uuid4().hex[:12]}"
    names = [reaper_tag, kernel_tag, remote_name(registry, reaper_tag)]
    names.append(remote_name(registry, kernel_tag))
    try:
        _forged_image(engine, remote_name(registry, reaper_tag), "x")
        _forged_image(engine, remote_name(registry, kernel_tag), "0123456789ab")
        problem = pull_image(engine, reaper_tag, registry, log=lambda line: None)
        assert problem is not None and "refused" in problem, problem
        problem = pull_image(engine, kernel_tag, registry, log=lambda line: None)
        assert problem is not None and "label is '0123456789ab', not" in problem, problem
        for name in (reaper_tag, kernel_tag):
            with pytest.raises(docker.errors.ImageNotFound):
                engine.images.get(name)
    finally:
        _gone(engine, *names)


# -- cause 1: the reaper never runs a task image's code ---------------------------------------------
#: the task image's `python`: when it finds the engine's socket it creates a container through it
#: (the proof it held it), then runs the real interpreter
WRAPPER = """#!/bin/sh
if [ -n "$PYTEST_SUPER_ENGINE_SOCKET" ]; then
  REAL -c '
import http.client, json, os, socket
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["PYTEST_SUPER_ENGINE_SOCKET"])
c = http.client.HTTPConnection("engine")
c.sock = s
c.request("POST", "/containers/create?name=MARKER", json.dumps({"Image": "IMAGE", "Cmd": ["true"]}),
          {"Content-Type": "application/json"})
print(c.getresponse().status)
'
fi
exec REAL "$@"
"""
ATTACK_DOCKERFILE = """FROM {image}
COPY python /usr/local/bin/python
RUN real=$(readlink -f /usr/bin/python3) && sed -i "s#REAL#$real#g" /usr/local/bin/python \\
 && chmod 755 /usr/local/bin/python \\
 && for p in /usr/local/bin/python3 /opt/venv/bin/python /opt/venv/bin/python3; do \\
      rm -f $p; cp /usr/local/bin/python $p; done
"""


@pytest.mark.docker
@pytest.mark.slow
def test_a_task_images_python_never_runs_with_the_engines_socket(second_engine, image) -> None:
    """Red on 20480cf: the reaper was made from the lease's image (the task's, --super-image)
    and its `python` ran with the engine's socket: the wrapper created a container through it.
    Now the reaper runs from an image of ours, by its id, and the wrapper never runs."""
    from pytest_super.kernels.docker.lease import Lease
    from pytest_super.kernels.docker.reaper import reaper_name

    client = second_engine
    marker = f"pytest-super-attack-{uuid.uuid4().hex[:12]}"
    attack = f"pytest-super-attack-image:{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="pytest-super-attack-") as context:
        Path(context, "Dockerfile").write_text(ATTACK_DOCKERFILE.format(image=image))
        wrapper = WRAPPER.replace("MARKER", marker).replace("IMAGE", attack)
        Path(context, "python").write_text(wrapper)
        client.images.build(path=context, tag=attack, rm=True)
    for old in client.containers.list(all=True, filters={"name": "pytest-super-reaper"}):
        old.remove(force=True)  # a reaper of this module's earlier tests: it must be made now
    lease = Lease(client, attack, "attack", address=SECOND_HOST, switch=True)
    try:
        reaper = client.api.inspect_container(reaper_name())
        deadline = time.monotonic() + 20  # the wrapper acts first thing, if it runs at all
        while time.monotonic() < deadline:
            with pytest.raises(docker.errors.NotFound):
                client.api.inspect_container(marker)
            time.sleep(1)
        assert reaper["Image"] != client.images.get(attack).id
        from pytest_super.kernels.docker import trust
        from pytest_super.kernels.docker.reaper import REAPER_ENTRYPOINT, reaper_tag

        assert trust.trusted(reaper_tag(), reaper["Image"]), reaper["Image"]
        assert reaper["Config"]["Entrypoint"] == REAPER_ENTRYPOINT
        running = client.api.inspect_container(reaper_name())["State"]
        assert running["Running"], running  # and it works: it runs its sweeps
    finally:
        lease.release()
        for name in (marker, reaper_name()):
            with contextlib.suppress(docker.errors.DockerException):
                client.api.remove_container(name, force=True)
        with contextlib.suppress(docker.errors.DockerException):
            client.api.remove_image(attack, force=True)


@pytest.mark.docker
def test_a_reaper_tag_moved_to_another_image_is_built_over(second_engine, image) -> None:
    """Sibling: `pytest-super-reaper:<version>` pointed at a task image on the engine (by a user
    or a pull) is not trusted: the reaper's image is built again from its own context."""
    from pytest_super.kernels.docker.reaper import reaper_image, reaper_tag

    client = second_engine
    client.api.tag(image, *reaper_tag().split(":"), force=True)
    built = reaper_image(client)
    assert built != client.images.get(image).id
    assert client.images.get(reaper_tag()).id == built
    history = [layer.get("CreatedBy", "") for layer in client.api.history(built)]
    assert any("reaper.py" in step for step in history), history


# -- cause 7: the disk watch walked around ----------------------------------------------------------
#: run in a subprocess: its open-file limit set low, the watch's walk of a folder of `n` sibling
#: folders of 64 KiB each; prints what it measured
SIBLINGS = """
import json, os, resource, sys
sys.path.insert(0, {repo!r})
from pytest_super.kernels.docker.diskwatch import folder_use
top, n, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
block = os.urandom(64 << 10)
for i in range(n):
    os.mkdir(f"{{top}}/d{{i}}")
    with open(f"{{top}}/d{{i}}/f", "wb") as f:
        f.write(block)
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
use = folder_use(top)
print(json.dumps(use.__dict__ if use else None))
"""


def _walk_siblings(tmp_path: Path, n: int, limit: int) -> dict[str, object]:
    top = tmp_path / "layer"
    top.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", SIBLINGS.format(repo=str(REPO)), str(top), str(n), str(limit)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert isinstance(measured, dict), done.stdout
    return measured


def test_more_sibling_folders_than_open_files_are_all_counted(tmp_path: Path) -> None:
    """The attack's shape, scaled: 4,000 sibling folders of 64 KiB (the attack: 40,000) under an
    open-file limit of 256. Red on 20480cf: the walk opened every sub-folder before walking any,
    the opens past the limit failed in silence and about 3,750 folders were never counted."""
    n = 4000
    use = _walk_siblings(tmp_path, n, 256)
    assert use["inodes"] == 1 + 2 * n, use
    assert use["bytes"] >= n * (64 << 10), use


def test_a_walk_that_cannot_open_files_is_unknown_not_small(tmp_path: Path) -> None:
    """Sibling: with no descriptor left at all (a limit of this host), the size is UNKNOWN and
    says so, as an environment error; red on 20480cf, where it was None or a small count."""
    use = _walk_siblings(tmp_path, 50, 3)
    assert use["bytes"] == -1 and use["environment"] is True, use
    assert "errno 24" in str(use["why"]), use


RLIMITED_PYTEST = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


@pytest.mark.docker
def test_sibling_folders_past_the_open_file_limit_end_a_task_as_disk_limit(
    tmp_path: Path, image: str
) -> None:
    """End to end: a task makes 2,000 sibling folders of 64 KiB (136 MiB of blocks) under
    --super-disk=64m while the harness may hold 512 files open. Red on 20480cf: the walk counted
    the ~490 folders it could open (31 MiB) and the task passed."""
    code = (
        "import os, time\nblock = os.urandom(64 << 10)\nfor i in range(2000):\n"
        "    os.mkdir(f'/content/s{i}')\n"
        "    with open(f'/content/s{i}/f', 'wb') as f:\n        f.write(block)\n"
        "time.sleep(10)  # the watch polls every 1-5 s\nprint('{\"x\": 1}')"
    )
    project = make_project(tmp_path, {"expert/siblings": task_yaml("siblings", code)})
    args = ["tasks", "--super-agent=gold", "--super-disk=64m", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, "-c", RLIMITED_PYTEST, *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
    )
    out = (done.stdout + done.stderr)[-3000:]
    lines = (only_run_dir(project) / "results.jsonl").read_text().splitlines()
    (result,) = [json.loads(line) for line in lines]
    assert result["exit_status"] == "disk_limit", out
    assert done.returncode == 1, out


@pytest.mark.docker
def test_a_fill_between_two_walks_is_seen_by_the_cheap_check(
    engine: docker.DockerClient, image: str, tmp_path: Path
) -> None:
    """The watch's interval may stretch to POLL_MAX_S for a layer that is slow to walk (600,000
    files: its cost within budget); a filler must not get that long. A box's layer grows by more
    than it had left under its limit after a walk: the statvfs check says so at once (red on
    20480cf: there was no such check, the interval alone).

    The check is asked here alone: the watch's own thread, which asks it every second and walks
    when it says yes, does not run. Issue 42: beside four busy loops the 80 MiB write outlasted
    that second, the thread saw the fill first (its check, its walk, a new mark) and this one then
    rightly saw no growth since the thread's walk."""
    from pytest_super.kernels.docker.diskwatch import DiskWatch

    class CheckedByTheTestAlone(DiskWatch):
        def _run(self) -> None:
            return  # no background polls: the test polls and checks by itself

    box = engine.containers.create(image, ["true"], name=f"pytest-super-fill-{uuid.uuid4().hex}")
    # the box's folder on a file system of this test's own (a tmpfs): what other tests of the
    # host write or free meanwhile (a shared engine's layers) moves nothing the check reads there
    mount = tmp_path / "box-folder"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)], check=True)
    try:
        stopped: list[object] = []
        watch = CheckedByTheTestAlone(engine.api)
        end = watch.watch(
            box.id, 64 << 20, lambda use, limits: stopped.append(use), host_dirs=[str(mount)]
        )
        try:
            uses = watch.poll(box.id)
            assert uses[box.id].bytes < 64 << 20 and not stopped, uses
            assert not watch.filling()
            with open(mount / "fill", "wb") as f:  # the box's folder, 80 MiB
                for _ in range(80):
                    f.write(os.urandom(1 << 20))
                f.flush()
                os.fsync(f.fileno())
            assert watch.filling()
            watch.poll(box.id)
            assert stopped, "the walk after the check stops the box"
        finally:
            end()
    finally:
        box.remove(force=True)
        subprocess.run(["umount", "-l", str(mount)], check=False)
