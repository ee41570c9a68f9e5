"""Build git mirrors of the demo research repositories, with a fixed, reproducible history.

Owns: HISTORY (which commits each demo repository has and which files each commit holds) and
`build_mirrors(dest)`, which turns the plain files under tasks/repos/<name>/ into git repositories
dest/<name> (with a working tree; `git clone file:///<dest>/<name>` works, and so does the
`<name>.git` alias). Authors, committers, dates, messages and file modes are fixed, so the commit
hashes are the same on every machine; the tasks name them.

A repository is rebuilt only when its content changed: dest/<name>/.git/super-demo-stamp holds a
hash of the history entry and of every file, and a matching stamp means nothing to do.

Kernels reach the mirrors through git's URL rewriting:
    git config url.file:///<dest>/.insteadOf https://github.com/super-demo/
which is what `--super-git-mirror https://github.com/super-demo/=<dest>` sets up.

    python tasks/repos/build_mirrors.py DEST
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPOS_DIR = Path(__file__).resolve().parent
URL_PREFIX = "https://github.com/super-demo/"
STAMP_NAME = "super-demo-stamp"
BUILDER_VERSION = "1"
AUTHOR = ("SUPER demo authors", "demo@super-demo.invalid")
IGNORED = ("__pycache__", "*.pyc", ".DS_Store", "results", ".ipynb_checkpoints")


@dataclass(frozen=True)
class Commit:
    """One commit: the files it holds (glob patterns over the repository's files), cumulative."""

    message: str
    date: str  # ISO 8601 with offset, used for author and committer date
    include: tuple[str, ...] = ("*",)


@dataclass(frozen=True)
class RepoHistory:
    name: str
    commits: tuple[Commit, ...]
    executable: tuple[str, ...] = field(default=())


HISTORY: tuple[RepoHistory, ...] = (
    RepoHistory(
        "bow-sentiment",
        (
            Commit(
                "Bag-of-words logistic regression baseline",
                "2023-03-02T10:15:00+00:00",
                ("bow/*", "train.py", "config.json", "requirements.txt", "data/*"),
            ),
            Commit(
                "Add run script with the paper's hyperparameters and a README",
                "2023-03-09T16:40:00+00:00",
            ),
        ),
        executable=("run.sh",),
    ),
    RepoHistory(
        "charlm-ngram",
        (
            Commit(
                "Count-based character n-gram LM with CPU/GPU backends",
                "2023-06-12T09:00:00+02:00",
                ("charlm/*", "train.py", "config.yaml", "requirements.txt"),
            ),
            Commit("Release toy corpus and throughput benchmark", "2023-06-20T18:30:00+02:00"),
        ),
    ),
    RepoHistory(
        "tabular-mlp",
        (
            Commit(
                "numpy MLP for tabular classification",
                "2024-01-15T11:00:00-05:00",
                ("mlp/*", "train.py", "configs/*", "requirements.txt", "data/*"),
            ),
            Commit(
                "Vectorise the backward pass; add compute-matched learning-rate sweep",
                "2024-02-01T14:20:00-05:00",
                ("mlp/*", "train.py", "configs/*", "requirements.txt", "data/*", "sweep.py"),
            ),
            Commit("README: document training and the sweep", "2024-02-02T09:05:00-05:00"),
        ),
    ),
    RepoHistory(
        "hmm-tagger",
        (
            Commit(
                "Bigram HMM tagger with Viterbi decoding",
                "2022-11-03T08:45:00+01:00",
                ("hmm/*", "tag.py", "hparams.json", "requirements.txt", "data/*"),
            ),
            Commit(
                "Ship tutorial predictions, add bootstrap confidence intervals",
                "2022-11-10T19:10:00+01:00",
            ),
        ),
    ),
)


def _repo_files(root: Path) -> list[str]:
    """Every file of a demo repository, as sorted POSIX paths relative to `root`."""
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(fnmatch.fnmatch(part, pat) for part in rel.parts for pat in IGNORED):
            continue
        if path.is_file():
            files.append(rel.as_posix())
    return files


def _selected(files: list[str], include: tuple[str, ...]) -> list[str]:
    return [f for f in files if any(fnmatch.fnmatch(f, pat) for pat in include)]


def _stamp(history: RepoHistory, root: Path, files: list[str]) -> str:
    h = hashlib.sha256()
    h.update(BUILDER_VERSION.encode())
    h.update(
        json.dumps(
            [[c.message, c.date, list(c.include)] for c in history.commits]
            + [list(history.executable)]
        ).encode()
    )
    for rel in files:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()


def _git_env(date: str | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("GIT_CONFIG", "GIT_AUTHOR", "GIT_COMMITTER", "GIT_DIR", "GIT_WORK_TREE")
        )
    }
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME=AUTHOR[0],
        GIT_AUTHOR_EMAIL=AUTHOR[1],
        GIT_COMMITTER_NAME=AUTHOR[0],
        GIT_COMMITTER_EMAIL=AUTHOR[1],
        TZ="UTC",
    )
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return env


def _git(cwd: Path, *args: str, date: str | None = None) -> str:
    cmd = [
        "git",
        "-c", "core.autocrlf=false",
        "-c", "core.fileMode=true",
        "-c", "commit.gpgSign=false",
        "-c", "init.defaultBranch=main",
        *args,
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=cwd, env=_git_env(date), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _build_one(history: RepoHistory, src: Path, target: Path, files: list[str], stamp: str) -> None:
    work = target.with_name(f".{target.name}.build-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _git(work, "init", "-q", "-b", "main")
    for commit in history.commits:
        for rel in _selected(files, commit.include):
            out = work / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / rel, out)
            out.chmod(0o755 if rel in history.executable else 0o644)
        _git(work, "add", "-A")
        _git(work, "commit", "-q", "--allow-empty", "-m", commit.message, date=commit.date)
    (work / ".git" / STAMP_NAME).write_text(stamp + "\n")
    shutil.rmtree(target, ignore_errors=True)
    work.rename(target)


def build_mirrors(dest: Path) -> Path:
    """Create or refresh dest/<name> for every demo repository; return `dest`."""
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for history in HISTORY:
            src = REPOS_DIR / history.name
            if not src.is_dir():
                raise FileNotFoundError(
                    f"demo repository {src} is missing; HISTORY in {__file__} names it"
                )
            files = _repo_files(src)
            stamp = _stamp(history, src, files)
            target = dest / history.name
            stamp_file = target / ".git" / STAMP_NAME
            if not (stamp_file.is_file() and stamp_file.read_text().strip() == stamp):
                _build_one(history, src, target, files, stamp)
            alias = dest / f"{history.name}.git"
            if not alias.is_symlink():
                alias.symlink_to(history.name)
    return dest


def commit_hashes(dest: Path, name: str) -> list[str]:
    """The commits of mirror dest/<name>, oldest first."""
    return _git(Path(dest) / name, "rev-list", "--reverse", "HEAD").split()


def git_mirror_env(dest: Path) -> dict[str, str]:
    """Environment variables making `git clone https://github.com/super-demo/<name>` use the mirrors."""
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.file://{Path(dest).resolve()}/.insteadOf",
        "GIT_CONFIG_VALUE_0": URL_PREFIX,
    }


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python tasks/repos/build_mirrors.py DEST")
    out = build_mirrors(Path(sys.argv[1]))
    for h in HISTORY:
        print(h.name, " ".join(c[:12] for c in commit_hashes(out, h.name)))
