"""The suite's two groups (docs/testing.md, issue 42): `make test` leaves out what tests/conftest.py
marks `long`, `make test-all` runs it; a new file of a long suite is long without a mark of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import TESTS, is_long
from tests.support.ray_fixtures import nodes_needed

ROOT = TESTS.parent


def _recipe(target: str) -> str:
    """The Makefile's recipe of `target`, its variables expanded once."""
    text = (ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^([A-Z_]+) :?= (.*)$", text, re.M))
    found = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.M)
    assert found is not None, f"no target {target} in the Makefile"
    return re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables.get(m[1], m[0]), found[1])


def test_make_test_leaves_the_long_tests_out_and_make_test_all_runs_them() -> None:
    test, test_all = _recipe("test"), _recipe("test-all")
    assert '-m "not colab and not guide and not long"' in test
    assert '-m "not colab and not guide"' in test_all
    for recipe in (test, test_all):
        assert "pytest tests" in recipe and "--durations=25" in recipe
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-2:] == ["make lint", "make test-all"]
    readme = (ROOT / "README.md").read_text()
    assert "make demo " in readme and "make test " in readme and "make test-all" in readme


def test_the_long_marker_is_registered_with_its_text() -> None:
    markers = (ROOT / "pyproject.toml").read_text().split("markers = [", 1)[1].split("]", 1)[0]
    assert '  "long: run by make test-all only",\n' in markers


def test_a_new_file_of_an_attack_suite_is_long_without_a_mark() -> None:
    new = TESTS / "attacks" / "test_attack_round5_anything.py"
    assert is_long(new, "test_x", set())
    assert is_long(TESTS / "attacks" / "deeper" / "test_y.py", "test_y", {"docker"})


def test_cluster_tests_are_long_but_the_one_smoke_test() -> None:
    anywhere = TESTS / "test_ray_something_new.py"
    assert is_long(anywhere, "test_x", {"ray", "docker", "slow"})
    assert not is_long(anywhere, "test_x", {"ray", "docker", "slow", "cluster_smoke"})
    smoke = [
        path.name
        for path in TESTS.rglob("test_*.py")
        if path != Path(__file__) and "@pytest.mark.cluster_smoke" in path.read_text()
    ]
    assert smoke == ["test_ray_backend.py"]


def test_the_session_cluster_has_one_node_for_smoke_tests_and_two_for_the_rest(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    ray\n    cluster_smoke\n")
    items = pytester.getitems(
        "import pytest\n"
        "@pytest.mark.ray\n@pytest.mark.cluster_smoke\ndef test_smoke(): pass\n"
        "@pytest.mark.ray\ndef test_fault(): pass\n"
        "def test_plain(): pass\n"
    )
    named = {item.name: item for item in items}
    assert nodes_needed([named["test_smoke"], named["test_plain"]]) == 1  # make test
    assert nodes_needed(items) == 2  # make test-all
    assert nodes_needed([named["test_fault"]]) == 2  # one long test run alone


def test_the_long_modules_and_tests_are_named_and_the_core_is_not() -> None:
    assert is_long(TESTS / "test_ray_faults.py", "test_x", set())
    assert is_long(TESTS / "test_registry.py", "test_x", {"docker"})
    conformance = TESTS / "test_conformance.py"
    assert is_long(conformance, "test_the_suite_passes_for_the_docker_backend", {"docker"})
    assert not is_long(conformance, "test_the_suite_passes_for_the_local_backend", set())
    for core in ("test_kernel_docker.py", "test_scoring.py", "test_html_report.py"):
        assert not is_long(TESTS / core, "test_x", {"docker"}), core
    assert not is_long(Path("/elsewhere/attacks/test_x.py"), "test_x", set())  # a pytester project
