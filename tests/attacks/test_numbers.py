"""Round four of attacks (issue 29, cause 2): every number of every setting and of every task
file's limits is finite and in range, checked once. A bad setting is a usage error (exit 4) naming
the setting, where it came from, the value and the accepted range; a bad task file is a collection
error of that task alone; deadlines computed from limits never overflow a timer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pytest_super.errors import TaskFileError
from pytest_super.runner import EpisodeSettings, task_timeout_s
from pytest_super.tasks import Task, load_yaml_task
from pytest_super.tasks.model import Limits

TASK = """\
id: {id}
query: 'Report x as a json structured as follows: {{"x": 0}}.'
answer: {{x: 1}}
solution:
  - execute: |
      print('{{"x": 1}}')
"""
#: an API key that is never printed, whatever its error
KEY = "sk-secret-attack-key"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    (pytester.path / "tasks" / "expert").mkdir(parents=True)
    (pytester.path / "tasks" / "expert" / "ok.yaml").write_text(TASK.format(id="ok"))
    return pytester


# -- settings ------------------------------------------------------------------------------------
#: (option, value, the range its error states): the issue's values and their siblings
BAD_SETTINGS = [
    ("disk", "inf", "1m"),
    ("disk", "nan", "1m"),
    ("disk", "1e400g", "1m"),
    ("disk", "99999999t", "1m"),
    ("compute-limit", "inf", "2592000"),
    ("compute-limit", "1e300", "2592000"),
    ("compute-limit", "nan", "2592000"),
    ("compute-limit", "0", "2592000"),
    ("cell-timeout", "nan", "2592000"),
    ("cell-timeout", "inf", "2592000"),
    ("cell-timeout", "0", "2592000"),
    ("cell-timeout", "-1", "2592000"),
    ("tolerance", "nan", "0 to"),
    ("tolerance", "inf", "0 to"),
    ("tolerance", "-0.5", "0 to"),
    ("pass-threshold", "nan", "0 to 1"),
    ("pass-threshold", "1.5", "0 to 1"),
    ("pass-threshold", "-inf", "0 to 1"),
    ("mem", "abc", "6m"),
    ("mem", "-1g", "6m"),
    ("mem", "0", "6m"),
    ("mem", "1e400g", "6m"),
    ("mem", "nan", "6m"),
    ("mem", "99999999999999999999g", "6m"),
    ("cpus", "nan", "1024"),
    ("cpus", "inf", "1024"),
    ("cpus", "0", "1024"),
    ("cpus", "1e9", "1024"),
    ("cpus", "0.001", "0.01 to 1024"),
    ("steps", str(10**18), "1 to 10000"),
    ("steps", "0", "1 to 10000"),
    ("steps", "nan", "1 to 10000"),
    ("token-budget", str(10**18), "1 to 1000000000"),
    ("token-budget", "0", "1 to 1000000000"),
    ("token-budget", "-1", "1 to 1000000000"),
    ("attempts", str(10**18), "1 to 100"),
    ("format-errors", str(10**18), "1 to 10000"),
    ("retries", str(10**18), "0 to 100"),
    ("retries", "-1", "0 to 100"),
    ("repeat", str(10**18), "at most 1000"),
    ("max-containers", str(10**18), "1 to 10000"),
    ("ray-concurrency", str(10**18), "1 to 100000"),
]


def _assert_usage_error(result: pytest.RunResult, *parts: str) -> str:
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output, output
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    for part in parts:
        assert part in result.stderr.str(), (part, output)
    return output


@pytest.mark.parametrize(("name", "value", "bound"), BAD_SETTINGS)
def test_a_bad_number_on_the_command_line_is_a_usage_error(project, name, value, bound):
    """Red on eb4ffc2: each was accepted (exit 0 with --collect-only), or an OverflowError /
    ValueError deep in the run (INTERNALERROR, or an error in every task)."""
    result = project.runpytest_subprocess(
        "--super-agent=gold", "--collect-only", f"--super-{name}={value}"
    )
    _assert_usage_error(result, f"--super-{name}", value, bound)


@pytest.mark.parametrize(
    ("key", "value", "bound"),
    [("disk", "1e400g", "1m"), ("compute_limit", "1e300", "2592000"), ("mem", "-1g", "6m")],
)
def test_a_bad_number_in_the_ini_file_names_the_ini_key(project, key, value, bound):
    project.makeini(f"[pytest]\nsuper_tasks = tasks\nsuper_{key} = {value}\n")
    result = project.runpytest_subprocess("--super-agent=gold", "--collect-only")
    _assert_usage_error(result, f"ini super_{key} (tox.ini)", value, bound)


@pytest.mark.parametrize(
    ("args", "env", "ini", "source"),
    [
        (["--timeout=inf"], None, "", "--timeout inf"),
        (["--timeout=1e300"], None, "", "--timeout 1e+300"),
        (["--timeout=nan"], None, "", "--timeout nan"),
        ([], "inf", "", "environment variable PYTEST_TIMEOUT inf"),
        ([], None, "timeout = 1e300\n", "ini timeout (tox.ini) 1e+300"),
    ],
)
def test_a_timeout_no_timer_takes_is_a_usage_error(project, monkeypatch, args, env, ini, source):
    """Red on eb4ffc2: pytest-timeout's timer overflowed when the first task started (an
    INTERNALERROR: OverflowError), and NaN set no timeout at all."""
    if env is None:
        monkeypatch.delenv("PYTEST_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("PYTEST_TIMEOUT", env)
    project.makeini("[pytest]\nsuper_tasks = tasks\n" + ini)
    result = project.runpytest_subprocess("--super-agent=gold", "--collect-only", *args)
    _assert_usage_error(result, source, "31536000")


@pytest.mark.parametrize("price", ["-2.5,-10", "nan,nan", "inf,1", "1,2,-1", "1e400,1"])
def test_a_bad_price_is_a_usage_error(project, price):
    """Red on eb4ffc2: negative or NaN prices were taken, and every cost was negative or NaN."""
    result = project.runpytest_subprocess(
        "--super-agent=react",
        "--super-model=m",
        "--super-base-url=http://127.0.0.1:9/v1",
        "--collect-only",
        f"--super-price={price}",
    )
    _assert_usage_error(result, "--super-price", "0 to 1000000")


@pytest.mark.parametrize("variable", ["SUPER_API_KEY", "OPENAI_API_KEY"])
@pytest.mark.parametrize("bad", ["\u00e9", "\n", "\x1b", " \t"])
def test_an_api_key_that_is_not_printable_ascii_is_named_but_never_shown(
    project, monkeypatch, variable, bad
):
    """Red on eb4ffc2: a non-ASCII key was an INTERNALERROR (UnicodeEncodeError) at the first
    request; a newline in it reached the HTTP layer."""
    monkeypatch.delenv("SUPER_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv(variable, KEY + bad)
    result = project.runpytest_subprocess(
        "--super-agent=react", "--super-model=m", "--collect-only"
    )
    output = _assert_usage_error(result, f"environment variable {variable}")
    assert KEY not in output and "secret" not in output


def test_good_numbers_still_read(project):
    args = [
        "--super-disk=500m",
        "--super-compute-limit=2592000",
        "--super-cell-timeout=0.5",
        "--super-tolerance=0",
        "--super-pass-threshold=0",
        "--super-mem=1.5g",
        "--super-cpus=0.5",
        "--super-steps=10000",
        "--super-retries=0",
    ]
    result = project.runpytest_subprocess("--super-agent=gold", "--collect-only", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()


MEMORY_SIZES = ["4g", "4G", "4gb", "4 gb", "512m", "6m", "1.5g", "1073741824", "7000k", " 2g"]


@pytest.mark.parametrize("size", MEMORY_SIZES)
def test_memory_sizes_read_as_the_docker_sdk_reads_them(size):
    """--super-mem is checked by parse_bytes' own rules: what it takes the engine takes."""
    from docker.utils import parse_bytes

    from pytest_super.options import memory_size

    assert memory_size(size) == size
    assert parse_bytes(size) >= 6 * 2**20


@pytest.mark.parametrize("size", [v for n, v, _ in BAD_SETTINGS if n == "mem"] + ["4t", "4tb"])
def test_memory_sizes_refused_are_those_the_docker_sdk_cannot_use(size):
    """What --super-mem refuses, parse_bytes refuses too (or reads as under 6m or absurd)."""
    from docker.errors import DockerException
    from docker.utils import parse_bytes

    from pytest_super.options import MEMORY_BOUNDS, memory_size

    with pytest.raises(ValueError, match="6m to 16384g"):
        memory_size(size)
    try:
        size_bytes = parse_bytes(size)
    except (DockerException, OverflowError):
        return
    assert not MEMORY_BOUNDS.accepts(size_bytes)


# -- task files ----------------------------------------------------------------------------------
#: (limits as YAML, the field, the value as the error shows it): the issue's and their siblings
BAD_LIMITS = [
    ("{cell_timeout_s: .nan}", "cell_timeout_s", "nan"),
    ("{cell_timeout_s: .inf}", "cell_timeout_s", "inf"),
    ("{cell_timeout_s: 1e300}", "cell_timeout_s", "1e+300"),
    ("{compute_s: .inf}", "compute_s", "inf"),
    ("{compute_s: .nan}", "compute_s", "nan"),
    ("{compute_s: 1e300}", "compute_s", "1e+300"),
    ("{compute_s: 1e400}", "compute_s", "inf"),
    (f"{{steps: {10**18}}}", "steps", str(10**18)),
    (f"{{token_budget: {10**18}}}", "token_budget", str(10**18)),
]


#: the accepted range each limit's error states
RANGES = {
    "cell_timeout_s": "above 0 and at most 2592000",
    "compute_s": "above 0 and at most 2592000",
    "steps": "from 1 to 10000",
    "token_budget": "from 1 to 1000000000",
}


def _task_file(folder: Path, name: str, limits: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(TASK.format(id=name) + f"limits: {limits}\n")
    return path


@pytest.mark.parametrize(("limits", "field", "shown"), BAD_LIMITS)
def test_a_limit_that_is_not_finite_or_in_range_is_a_task_file_error(
    tmp_path, limits, field, shown
):
    """Red on eb4ffc2: each loaded (NaN and infinity pass the schema's exclusiveMinimum)."""
    (tmp_path / "expert").mkdir()
    path = _task_file(tmp_path / "expert", "bad", limits)
    with pytest.raises(TaskFileError) as error:
        load_yaml_task(path)
    text = str(error.value)
    assert str(path) in text and f"limits.{field}" in text and shown in text, text
    assert RANGES[field] in text, text


def test_the_schema_states_the_same_upper_bounds():
    from pytest_super.tasks.model import LIMIT_RANGES
    from pytest_super.tasks.validation import schema

    limits = schema()["properties"]["limits"]["properties"]
    for name, bounds in LIMIT_RANGES.items():
        assert limits[name]["maximum"] == bounds.high


@pytest.mark.docker
def test_bad_limits_are_errors_of_their_tasks_alone_and_the_good_task_passes(project, image):
    """Red on eb4ffc2: `.nan` hung the whole run; `.inf`, 1e300 and 10**18 were an INTERNALERROR
    (OverflowError in pytest-timeout's timer) before any task ran."""
    folder = project.path / "tasks" / "expert"
    bad = {
        "nan-cell": "{cell_timeout_s: .nan}",
        "inf-compute": "{compute_s: .inf}",
        "huge-steps": f"{{steps: {10**18}}}",
        "huge-compute": "{compute_s: 1e300}",
    }
    for name, limits in bad.items():
        _task_file(folder, name, limits)
    result = project.runpytest_subprocess(
        "--super-agent=gold", "--super-mem=1g", "-p", "no:cacheprovider", timeout=300
    )
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output, output
    result.assert_outcomes(passed=1, errors=len(bad))
    for name in bad:
        result.stdout.fnmatch_lines([f"*{name}.yaml*limits.*must be*"])


# -- deadlines computed from limits --------------------------------------------------------------
def test_timer_seconds_clamps_to_what_every_timer_takes():
    import signal
    import threading

    from pytest_super.deadlines import MAX_TIMER_S, timer_seconds

    assert MAX_TIMER_S <= threading.TIMEOUT_MAX
    signal.setitimer(signal.ITIMER_REAL, MAX_TIMER_S)  # takes it (1e10 overflows)
    signal.setitimer(signal.ITIMER_REAL, 0)
    for seconds in (math.inf, math.nan, 1e300, MAX_TIMER_S * 2):
        assert timer_seconds(seconds) == MAX_TIMER_S
    assert timer_seconds(-1.0) == 0.0
    assert timer_seconds(12.5) == 12.5


def test_a_task_deadline_from_the_largest_limits_is_clamped():
    from pytest_super.tasks.model import LIMIT_RANGES
    from pytest_super.timeouts import MAX_TIMER_S

    task = Task(
        id="t",
        set="expert",
        query="q",
        limits=Limits(
            compute_s=LIMIT_RANGES["compute_s"].high, steps=int(LIMIT_RANGES["steps"].high)
        ),
    )
    seconds = task_timeout_s(task, EpisodeSettings(), uses_model=True)
    assert 0 < seconds <= MAX_TIMER_S
    unchecked = Task(id="u", set="expert", query="q", limits=Limits(compute_s=1e300, steps=10**18))
    assert task_timeout_s(unchecked, EpisodeSettings(), uses_model=True) == MAX_TIMER_S
