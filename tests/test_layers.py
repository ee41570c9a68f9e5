"""The package's layers, read from its import graph: no module imports one above it, and no
import cycles (docs/design.md draws the layers). Every import counts: at module level, inside a
function, or for the type checker only."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_super"

#: top to bottom; a module belongs to the layer of the longest prefix that names it or a package
#: of it (agents.llm is below the other agents)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "pytest glue and commands",
        (
            "plugin",
            "cli",
            "executors.pytest_side",
            "executors.local",
            "executors.ray",
            "live",
            "conformance",
        ),
    ),
    (
        "settings, collection, the run's records and reports",
        (
            "options",
            "collect",
            "recorder",
            "junit",
            "run_record",
            "interrupts",
            "progress",
            "timeouts",
            "thirdparty",
            "tracebacks",
            "report",
            "html",
            "published_runs",
            "published_steps",
            "prompt_check",
            "replay",
            "lmr_report",
            "serve",
        )
        + ("download", "lmr_download", "lmr_import", "durations", "last_failed"),
    ),
    (
        "one task, anywhere",
        (
            "settings",
            "execute",
            "outcome",
            "executors",
            "executors.ray.cluster",
            "executors.ray.watch",
            "executors.ray.sweep",
            "executors.ray.driver",
            "executors.ray.node",
            "executors.ray.nodefiles",
            "executors.ray.watchdog",
            "executors.ray.connect",
            "executors.ray.settings",
        ),
    ),
    ("one episode", ("runner",)),
    ("the agents", ("agents",)),
    ("the environment an agent acts in", ("environment",)),
    ("the model client", ("llm",)),
    (
        "the task model and scoring",
        (
            "tasks",
            "scoring",
            "lmr",
            "edit",
            "trajectory",
            "prompts",
            "reference_files",
            "reference_protocol",
            "netfaults",
        ),
    ),
    ("the kernels", ("kernels",)),
    (
        "foundations",
        (
            "errors",
            "atomic",
            "strictjson",
            "safe_read",
            "deadlines",
            "redaction",
            "http_policy",
            "sinks",
            "names",
            "stats",
            "registry",
            "ordering",
            "locks",
            "scratch",
            "defaults",
            "paths",
            "process_identity",
            "deadman",
        ),
    ),
]


def module_name(path: Path, root: Path = PACKAGE.parent) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def absolute_name(path: Path, root: Path, node: ast.ImportFrom) -> str:
    """What `from <dots><module> import ...` in `path` names, as Python resolves it: against the
    importing module's package (the module itself for an `__init__.py`), one level up per dot
    after the first."""
    if node.level == 0:
        return node.module or ""
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    bits = package.rsplit(".", node.level - 1)
    assert len(bits) >= node.level, f"{path}: relative import beyond the top-level package"
    return f"{bits[0]}.{node.module}" if node.module else bits[0]


def imports_of(
    path: Path, modules: Collection[str] = MODULES, root: Path = PACKAGE.parent
) -> set[str]:
    """The modules of `modules` that `path` imports (a name imported from a package is the
    package's `__init__` unless it is a submodule; a relative import is resolved as Python does)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = absolute_name(path, root, node)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in modules}


GRAPH = {name: imports_of(path) for name, path in MODULES.items()}


def layer_of(module: str) -> int:
    short = module.removeprefix("pytest_super.")
    matches = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if short == prefix or short.startswith(prefix + ".")
    ]
    assert matches, f"{module} is in no layer: add it to LAYERS (and to docs/design.md)"
    return max(matches)[1]


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        if module != "pytest_super":
            layer_of(module)


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    return [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in graph.items()
        if module != "pytest_super"
        for target in sorted(targets)
        if layer_of(target) < layer_of(module)
    ]


def test_no_module_imports_one_above_it() -> None:
    assert upward_imports(GRAPH) == []


def test_no_import_cycles() -> None:
    cycles = []
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = "open"
        path.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target) :] + [target]))
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert cycles == []


#: modules that run inside the kernel, shipped there as source: they import nothing of the package
SHIPPED_INTO_THE_KERNEL = (
    "pytest_super.kernels.inside.message_cap",
    "pytest_super.kernels.inside.channel_relay",
    "pytest_super.kernels.inside.file_access",
    "pytest_super.kernels.inside.closed_stdin",
    "pytest_super.kernels.inside.swe_kernel_tools",
    "pytest_super.kernels.inside.reaper",
)


@pytest.mark.parametrize("module", SHIPPED_INTO_THE_KERNEL)
def test_modules_shipped_into_the_kernel_import_nothing_of_the_package(module: str) -> None:
    assert GRAPH[module] == set()


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The graph reader finds imports inside functions and under TYPE_CHECKING too."""
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pytest_super.runner import TaskResult\n"
        "def f():\n    from pytest_super.kernels import provision_kernel\n"
    )
    assert imports_of(source) == {"pytest_super.runner", "pytest_super.kernels"}


def test_the_check_resolves_relative_imports(tmp_path: Path) -> None:
    """A relative import counts as the absolute one it resolves to, an upward one included."""
    files = {
        "__init__.py": "",
        "runner.py": "",
        "kernels/__init__.py": "from .docker import backend\nfrom .. import runner\n",
        "kernels/base.py": "",
        "kernels/docker/__init__.py": "from . import engine\n",
        "kernels/docker/engine.py": "from .. import base\n",
        "kernels/docker/backend.py": (
            "from .engine import docker_client\n"
            "from ..base import Kernel\n"
            "def f():\n    from ...runner import TaskResult\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / "pytest_super" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pytest_super" / name).write_text(text)
    paths = {module_name(p, tmp_path): p for p in (tmp_path / "pytest_super").rglob("*.py")}
    graph = {name: imports_of(path, paths, tmp_path) for name, path in paths.items()}
    assert graph["pytest_super.kernels"] == {
        "pytest_super.kernels.docker.backend",
        "pytest_super.runner",
    }
    assert graph["pytest_super.kernels.docker"] == {"pytest_super.kernels.docker.engine"}
    assert graph["pytest_super.kernels.docker.engine"] == {"pytest_super.kernels.base"}
    assert graph["pytest_super.kernels.docker.backend"] == {
        "pytest_super.kernels.docker.engine",
        "pytest_super.kernels.base",
        "pytest_super.runner",
    }
    assert upward_imports(graph) == [
        "pytest_super.kernels (the kernels) imports pytest_super.runner (one episode)",
        "pytest_super.kernels.docker.backend (the kernels) imports pytest_super.runner (one episode)",
    ]


@pytest.mark.parametrize(
    "module", [m for m, p in MODULES.items() if (p.parent / "__init__.py").exists()]
)
def test_each_module_imports_alone(module: str) -> None:
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, timeout=120)


#: the first layer that runs outside pytest: a task runs on a Ray node, or from a script
NO_PYTEST_FROM = next(i for i, (name, _) in enumerate(LAYERS) if name == "one task, anywhere")


def test_nothing_from_one_task_down_imports_pytest() -> None:
    """run_one_task and all below it run where pytest is not (a Ray worker, a plain script)."""
    offenders = []
    for name, path in MODULES.items():
        if name == "pytest_super" or layer_of(name) < NO_PYTEST_FROM:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            offenders += [f"{name} imports {r}" for r in roots if r in ("pytest", "_pytest")]
    assert offenders == []


#: modules above the one-task layer that a script without pytest imports (`run_tasks`)
PYTEST_FREE_ABOVE = (
    "pytest_super.run_record",
    "pytest_super.settings",
    "pytest_super.tasks",
    # the executors a script submits to (`run_tasks`), and the outcomes they give
    "pytest_super.executors.local",
    "pytest_super.executors.ray",
    "pytest_super.executors.ray.outcomes",
    "pytest_super.outcome",
)


@pytest.mark.parametrize("module", PYTEST_FREE_ABOVE)
def test_a_script_recording_a_run_loads_no_pytest(module: str) -> None:
    """The run record below pytest (run_record.py) and all it imports, loaded in a plain
    process, bring no pytest module with them."""
    code = (
        f"import sys, {module}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


#: the package that holds every executor's own code: only there may a cluster library be named
EXECUTORS_PACKAGE = PACKAGE / "executors"


def word_parts(text: str) -> list[str]:
    """The words of an identifier or a text, lower-cased: `RAY_ADDRESS`, `--super-ray-address`
    and `RayDispatcher` hold "ray"; `array` and `stray` do not."""
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", text)]


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def _names_of(node: ast.AST) -> list[tuple[str, str]]:
    """(what, name) of each identifier `node` holds: imports, names, attributes, keywords,
    parameters, definitions."""
    if isinstance(node, ast.Import):
        return [("imports", alias.name) for alias in node.names] + [
            ("imports as", alias.asname) for alias in node.names if alias.asname
        ]
    if isinstance(node, ast.ImportFrom):
        found = [("imports", node.module or "")]
        for alias in node.names:
            found.append(("imports the name", alias.name))
            if alias.asname:
                found.append(("imports as", alias.asname))
        return found
    if isinstance(node, ast.Name):
        return [("the name", node.id)]
    if isinstance(node, ast.Attribute):
        return [("the attribute", node.attr)]
    if isinstance(node, ast.keyword) and node.arg:
        return [("the keyword", node.arg)]
    if isinstance(node, ast.arg):
        return [("the parameter", node.arg)]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [("the definition", node.name)]
    if isinstance(node, ast.Global | ast.Nonlocal):
        return [("the name", name) for name in node.names]
    return []


def executor_names_in(path: Path, names: Collection[str]) -> list[str]:
    """Where `path`'s code names one of the executors `names`: an import of it (`import ray`,
    `from pytest_super.executors.ray ...`), an identifier, attribute, keyword or parameter with the
    name as one of its words (`ray.get`, `run.ray_concurrency`, `RAY_ADDRESS`, `ray_address=`), or
    a string with it as a word (`backend == "ray"`, `"--super-ray-address"`, an f-string's text).
    Docstrings and comments are not code."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstrings(tree)
    wanted = {n.lower() for n in names}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", 0)
        for what, name in _names_of(node):
            if wanted & set(word_parts(name)):
                found.append((lineno, f"line {lineno}: {what} {name}"))
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and wanted & set(word_parts(node.value))
        ):
            found.append((lineno, f"line {lineno}: the string {node.value!r}"))
    return [where for _, where in sorted(found)]


def test_no_module_outside_executors_names_a_cluster_executor() -> None:
    """Where a task runs is the executors' business: the plugin asks the chosen executor and has
    no branch of its own for one, and no setting, option or message of one (issue 30 item 3)."""
    from pytest_super.executors import CLUSTER_EXECUTORS

    remote = list(CLUSTER_EXECUTORS)
    assert "ray" in remote
    offenders = [
        f"{name}: {where}"
        for name, path in MODULES.items()
        if EXECUTORS_PACKAGE not in path.parents and path.parent != EXECUTORS_PACKAGE
        for where in executor_names_in(path, remote)
    ]
    assert offenders == []


def test_the_check_sees_an_executor_named_in_code(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""ray in a docstring is fine."""\nimport ray\n'
        "from pytest_super.executors.ray import cluster\n"
        'remote = backend == "ray"\nray.get(1)\n# ray in a comment\n'
    )
    assert executor_names_in(module, ["ray"]) == [
        "line 2: imports ray",
        "line 3: imports pytest_super.executors.ray",
        "line 4: the string 'ray'",
        "line 5: the name ray",
    ]


def test_the_check_sees_an_executors_setting_named_outside_it(tmp_path: Path) -> None:
    """Its settings, options, environment variables and messages are the executor's too; words
    that merely contain the letters (array, stray, bytearray) are not."""
    module = tmp_path / "m.py"
    module.write_text(
        '"""A RAY_ADDRESS in a docstring is fine."""\n'
        "address = run.ray_address  # a Ray node: a comment is fine\n"
        'flag = "--super-ray-address"\n'
        "RAY_ADDRESS = 'auto'\n"
        "SuperRun.resolve(ray_concurrency=3)\n"
        "def f(ray_address, stray, array):\n"
        '    """ray_address here is a docstring."""\n'
        '    return f"at {ray_address}: {bytearray()} Ray node"\n'
        "class RayThing: pass\n"
        'os.environ.get("RAY_ADDRESS")\n'
    )
    assert executor_names_in(module, ["ray"]) == [
        "line 2: the attribute ray_address",
        "line 3: the string '--super-ray-address'",
        "line 4: the name RAY_ADDRESS",
        "line 5: the keyword ray_concurrency",
        "line 6: the parameter ray_address",
        "line 8: the name ray_address",
        "line 8: the string ' Ray node'",
        "line 9: the definition RayThing",
        "line 10: the string 'RAY_ADDRESS'",
    ]


#: the one adapter to other plugins' internals, the only module that reads xdist's attributes
ADAPTER = "pytest_super.thirdparty"


def xdist_reads_in(path: Path) -> list[str]:
    """Where `path` reads an attribute xdist sets (`thirdparty.XDIST_ATTRIBUTES`): as an attribute
    (`config.workerinput`, `node.workeroutput`, `config.option.numprocesses`) or by its name in a
    string (`getattr(config, "workerinput", None)`, `hasattr(config, "workerinput")`)."""
    from pytest_super.thirdparty import XDIST_ATTRIBUTES

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in XDIST_ATTRIBUTES:
            found.append((node.lineno, f"line {node.lineno}: .{node.attr}"))
        elif isinstance(node, ast.Constant) and node.value in XDIST_ATTRIBUTES:
            found.append((node.lineno, f"line {node.lineno}: {node.value!r}"))
    return [where for _, where in sorted(found)]


def test_every_xdist_attribute_is_read_through_the_adapter() -> None:
    """Issue 45 item 6: xdist's attributes (`workerinput`, `workeroutput`, `numprocesses`,
    `dist`, `maxschedchunk`) are read in thirdparty.py only, where the versions are checked; the
    repository's own conftest.py asks it too."""
    read_by = {name: path for name, path in MODULES.items() if name != ADAPTER}
    read_by["conftest.py (the repository's)"] = PACKAGE.parent / "conftest.py"
    offenders = [
        f"{name}: {where}" for name, path in read_by.items() for where in xdist_reads_in(path)
    ]
    assert offenders == []


def test_the_check_sees_a_direct_xdist_read(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "workerinput = getattr(config, 'workerinput', None)\n"
        "n = config.option.numprocesses\n"
        "node.workeroutput['x'] = 1\n"
        "if hasattr(config, 'workerinput'):\n    pass\n"
        "def f(maxschedchunk, dist):\n    return maxschedchunk\n"
    )
    assert xdist_reads_in(module) == [
        "line 1: 'workerinput'",
        "line 2: .numprocesses",
        "line 3: .workeroutput",
        "line 4: 'workerinput'",
    ]


#: the one module that reads a process's /proc/<pid>/stat (issue 45 item 5); the reaper, shipped
#: into its own container with nothing of the package, keeps a copy (tests/test_dead_man_switch.py
#: checks it reads the same)
PROCESS_IDENTITY = "pytest_super.process_identity"


def proc_stat_reads_in(path: Path) -> list[str]:
    """Where `path`'s code names a process's stat file: a string (not a docstring) that ends in
    "/stat" (`f"/proc/{pid}/stat"`, `glob("[0-9]*/stat")`), or is "stat" in a module that names
    /proc (`Path("/proc") / pid / "stat"`; `stat` the command is another thing)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstrings(tree)
    texts = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]
    names_proc = any(str(node.value).startswith("/proc") for node in texts)
    return sorted(
        f"line {node.lineno}: {node.value!r}"
        for node in texts
        if str(node.value).endswith("/stat") or (names_proc and node.value == "stat")
    )


def test_only_process_identity_reads_a_processs_stat_file() -> None:
    offenders = [
        f"{name}: {where}"
        for name, path in MODULES.items()
        if name != PROCESS_IDENTITY and name not in SHIPPED_INTO_THE_KERNEL
        for where in proc_stat_reads_in(path)
    ]
    assert offenders == []


def test_the_check_sees_a_stat_file_read(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Reads /proc/<pid>/stat (a docstring: fine)."""\n'
        'a = open(f"/proc/{pid}/stat").read()\n'
        'b = Path("/proc").glob("[0-9]*/stat")\n'
        'c = Path("/proc") / str(pid) / "stat"\n'
        "d = os.stat(path)\n"
    )
    assert proc_stat_reads_in(module) == [
        "line 2: '/stat'",
        "line 3: '[0-9]*/stat'",
        "line 4: 'stat'",
    ]


#: Docker's package: nothing outside it imports the Docker SDK or it (issue 45 item 2); the rest
#: of the code asks the backend contract (`pytest_super.kernels`)
DOCKER_PACKAGE = "pytest_super.kernels.docker"
#: modules outside it that still import it, each with what is left to move to the contract; the
#: list only shrinks (a module that no longer imports it must leave the list)
DOCKER_IMPORTERS_LEFT: dict[str, str] = {}


def docker_imports_in(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """Where `path` imports the Docker SDK (`docker`, `docker.errors`, ...) or the Docker backend's
    package (absolute or relative, at module level or in a function)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute_name(path, root, node)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == "docker" or name.startswith("docker.") or name == DOCKER_PACKAGE:
                found.append((node.lineno, f"line {node.lineno}: imports {name}"))
                break
            if name.startswith(DOCKER_PACKAGE + "."):
                found.append((node.lineno, f"line {node.lineno}: imports {name}"))
                break
    return [where for _, where in sorted(found)]


def test_nothing_outside_the_docker_backend_imports_docker() -> None:
    outside = {
        name: where
        for name, path in MODULES.items()
        if name != DOCKER_PACKAGE and not name.startswith(DOCKER_PACKAGE + ".")
        for where in [docker_imports_in(path)]
        if where
    }
    assert {n: w for n, w in outside.items() if n not in DOCKER_IMPORTERS_LEFT} == {}
    assert sorted(set(DOCKER_IMPORTERS_LEFT) - set(outside)) == [], "remove them from the list"


def test_the_check_sees_a_docker_import(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "kernels/__init__.py": "",
        "kernels/docker/__init__.py": "",
        "kernels/docker/engine.py": "",
        "executors/__init__.py": "",
        "executors/node.py": (
            '"""import docker in a docstring is fine."""\n'
            "import docker.errors\n"
            "from docker.utils import parse_bytes\n"
            "def f():\n    from ..kernels.docker import engine\n"
            "from pytest_super.kernels import docker\n"
            "from pytest_super.kernels import kernel_backend\n"
            "BACKEND = 'pytest_super.kernels.docker.backend:DockerBackend'\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / "pytest_super" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pytest_super" / name).write_text(text)
    node = tmp_path / "pytest_super/executors/node.py"
    assert docker_imports_in(node, tmp_path) == [
        "line 2: imports docker.errors",
        "line 3: imports docker.utils",
        "line 5: imports pytest_super.kernels.docker",
        "line 6: imports pytest_super.kernels.docker",
    ]


#: the package whose modules may ask a run whether its tasks run elsewhere (`SuperRun.remote`):
#: every other module asks the run's executor (issue 45)
EXECUTORS_MODULE = "pytest_super.executors"


def remote_tests(source: str) -> list[int]:
    """The lines of `source` that ask a run whether its tasks run elsewhere: `run.remote`,
    `self.run.remote`, `getattr(run, "remote", ...)`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "remote":
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id == "run") or (
                isinstance(owner, ast.Attribute) and owner.attr == "run"
            ):
                found.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "getattr"
            and any(isinstance(a, ast.Constant) and a.value == "remote" for a in node.args)
        ):
            found.append(node.lineno)
    return found


def test_no_module_outside_the_executors_asks_a_run_whether_it_is_remote() -> None:
    """The plugin, the run's record and the report header (options.py) submit through the
    executor, have it clean up and have it say where it runs tasks; the one question they may
    ask is the executor's declared `remote` (xdist, the progress line)."""
    outside = {
        name: path
        for name, path in MODULES.items()
        if name != EXECUTORS_MODULE and not name.startswith(EXECUTORS_MODULE + ".")
    }
    assert {"pytest_super.plugin", "pytest_super.recorder", "pytest_super.options"} <= set(outside)
    found = {name: remote_tests(path.read_text()) for name, path in outside.items()}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_check_sees_a_run_asked_whether_it_is_remote() -> None:
    source = "if run.remote:\n    pass\nx = self.run.remote\ny = getattr(run, 'remote', False)\n"
    assert remote_tests(source) == [1, 3, 4]
    assert remote_tests("executor.remote\n") == []
