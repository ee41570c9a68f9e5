"""Running a demo task's gold solution as tests/test_demo_repos.py does, and as
benchmarks/bench_demo_gold.py times it: a fresh virtualenv (so `pip install -r requirements.txt`
gets today's packages) whose python finds ipykernel in a shared base virtualenv, a local kernel
started from it in a fresh working directory, git redirected to the demo repositories' mirrors,
the project's own runner (`runner.run_episode`) with the gold agent."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_super.agents.gold import GoldAgent
from pytest_super.kernels.jupyter.runtime import JupyterKernel
from pytest_super.kernels.local import LocalBox
from pytest_super.runner import EpisodeSettings, TaskResult, run_episode
from pytest_super.tasks import load_yaml_task

ROOT = Path(__file__).resolve().parents[2]
TASKS_DIR = ROOT / "tasks"
REPOS_DIR = TASKS_DIR / "repos"
#: the demo tasks' files: the Expert, Masked and Auto sets
TASK_FILES = sorted(TASKS_DIR.glob("[ema]*/*.yaml"))


def _load_build_mirrors() -> ModuleType:
    """tasks/repos/build_mirrors.py, loaded from its file (it is not a package)."""
    spec = importlib.util.spec_from_file_location("build_mirrors", REPOS_DIR / "build_mirrors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module = sys.modules.setdefault("build_mirrors", module)  # dataclasses look it up here
    if not hasattr(module, "build_mirrors"):
        spec.loader.exec_module(module)
    return module


mirrors = _load_build_mirrors()


def task_set(path: Path) -> str:
    return path.parent.name


def site_packages(venv: Path) -> str:
    """The site-packages folder of the virtualenv `venv`."""
    return subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def make_base_site(venv: Path) -> Path:
    """A virtualenv at `venv` with ipykernel and no numpy; its site-packages folder."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "ipykernel"],
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
        check=True,
    )
    site = site_packages(venv)
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import numpy"], capture_output=True
    )
    assert probe.returncode != 0, "the base virtualenv must not hold numpy"
    return Path(site)


def make_venv(base_site: Path, workdir: Path) -> Path:
    """A fresh virtualenv whose python finds ipykernel (only) in the shared base virtualenv."""
    venv = workdir / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = site_packages(venv)
    # appended to sys.path after the task's own site-packages
    (Path(site) / "_super_demo_base.pth").write_text(f"{base_site}\n")
    return venv


def run_gold(path: Path, venv: Path, mirror_dir: Path, workdir: Path) -> TaskResult:
    """One gold episode of the task file at `path` through the project's runner, in a local
    kernel of `venv` whose shell commands (`!pip`) find the venv first."""
    with pytest.MonkeyPatch.context() as env:  # the kernel's environment is taken from ours
        for name in [
            n for n in os.environ if n.startswith(("PYTHON", "PIP_FIND_LINKS", "JUPYTER"))
        ]:
            env.delenv(name)
        env.setenv("PATH", f"{venv / 'bin'}:{os.environ.get('PATH', '')}")
        env.setenv("VIRTUAL_ENV", str(venv))
        env.setenv("PIP_CONFIG_FILE", os.devnull)  # like a container: no local wheels or indexes
        mirror_map = {mirrors.URL_PREFIX: str(mirror_dir)}

        def new_kernel() -> JupyterKernel:
            box = LocalBox(
                task_id=path.stem, git_mirrors=mirror_map, python=str(venv / "bin" / "python")
            )
            return JupyterKernel(box)

        return run_episode(
            load_yaml_task(path),
            GoldAgent(),
            new_kernel,
            EpisodeSettings(),
            workdir / "trajectory.json",
        )
