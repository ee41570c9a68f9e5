"""The masked repository put in the task's box, and the kernel's working folder set to it.

The repository folder (`task.repo_path`) is packed on the host into one tar archive, written into
the box, unpacked beside the kernel's working folder and the kernel moved into it. Only the
repository goes in: the golden files stand beside it in the task folder and never enter the box.
The unit tests go in as upstream's runs showed them to the agent (OpenHands mounted the whole
repository, `unit_test/` included); before scoring they are restored from the task folder
(`unit_tests.restore`).
"""

from __future__ import annotations

import io
import tarfile

from pytest_super.errors import InfrastructureError, TaskSetupError
from pytest_super.kernels.base import Kernel
from pytest_super.tasks.lmr import LmrTask

ARCHIVE = ".pytest-super-lmr-repo.tar"
SETUP_TIMEOUT_S = 300.0

_UNPACK = """
def _pytest_super_unpack(archive, folder):
    import os, tarfile
    with tarfile.open(archive) as packed:
        try:
            packed.extractall(".", filter="data")
        except TypeError:  # Python before the extraction filters
            packed.extractall(".")
    os.remove(archive)
    os.chdir(folder)
    print(os.getcwd())
_pytest_super_unpack({archive!r}, {folder!r})
del _pytest_super_unpack
"""


def pack(task: LmrTask) -> bytes:
    """The repository folder as a tar archive (its folder name at the top)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        archive.add(task.repo_path, arcname=task.repo_folder)
    return data.getvalue()


def prepare(task: LmrTask, kernel: Kernel) -> str:
    """Put the masked repository into the box and the kernel into it; the folder's path."""
    try:
        packed = pack(task)
    except OSError as exc:
        raise TaskSetupError(
            f"{task.source}: cannot pack the repository {task.repo_path}: {exc}"
        ) from None
    kernel.write_bytes(ARCHIVE, packed)
    result = kernel.execute(
        _UNPACK.format(archive=ARCHIVE, folder=task.repo_folder), SETUP_TIMEOUT_S
    )
    if result.status == "died" or result.status == "timeout":
        raise InfrastructureError(
            f"task {task.id}: unpacking the repository in the box did not finish "
            f"({result.status}): {result.output[-1000:]}"
        )
    if result.status != "ok":
        raise TaskSetupError(
            f"task {task.id}: the repository {task.repo_folder} could not be unpacked in the "
            f"box: {result.output[-1000:]}"
        )
    return result.output.strip().splitlines()[-1]
