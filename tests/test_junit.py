"""The JUnit file of a run, as strict consumers read it (issue 44, item 4; pytest_super/junit.py).

A real run (pytest in a subprocess, the local kernel backend: a real ipykernel) of a passing
expert task, a failing one, a passing masked sub-problem of two categories and a task stopped by
pytest-timeout in its setup (a pytest error), once per JUnit family, validated with lxml. The
agent runs the solution cells, as gold does, but is not gold (SOLUTION_AGENT): a gold miss is an
environment error, and the file must hold a failure too.

- xunit2 (pytest's default) against the Jenkins xunit plugin's own junit-10.xsd, unchanged
  (tests/data/junit/, its source and license beside it);
- xunit1 (legacy) against the same schema with exactly the two things the legacy family adds by
  design: the test case's `file`/`line` attributes (plain pytest writes them) and its
  `<properties>` (kept for the dashboards that read them there). No published schema holds both.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from lxml import etree

from pytest_super import report
from tests.support.projects import (
    SOLUTION_AGENT,
    junit_outcomes,
    junit_properties,
    write_solution_agent,
)

SCHEMA = Path(__file__).parent / "data" / "junit" / "junit-10.xsd"
XS = "{http://www.w3.org/2001/XMLSchema}"

TASKS = {
    "tasks/expert/adder.yaml": """\
        id: adder
        query: 'Add the numbers. Report the sum as a json structured as follows: {"sum": 0}.'
        answer: {sum: 5}
        landmarks: ['adding']
        solution:
          - execute: |
              import json
              print("adding")
              print(json.dumps({"sum": 5}))
        """,
    "tasks/expert/almost.yaml": """\
        id: almost
        query: Report the score.
        answer: {score: 0.5}
        solution:
          - execute: |
              print('{"score": 0.75}')
        """,
    "tasks/masked/adder_data,cpu.yaml": """\
        id: adder_data,cpu
        query: Report the sum.
        answer: {sum: 5}
        solution:
          - execute: |
              print('{"sum": 5}')
        """,
    "tasks/expert/stuck.yaml": """\
        id: stuck
        query: Report the sum.
        answer: {sum: 5}
        solution:
          - execute: |
              import time
              time.sleep(120)
        """,
    # pytest-timeout stops `stuck` during its setup, where the episode runs: a pytest error
    "conftest.py": """\
        import pytest

        def pytest_collection_modifyitems(items):
            for item in items:
                if item.name == "stuck":
                    item.add_marker(pytest.mark.timeout(4))
        """,
}


def jenkins_schema(*, legacy: bool) -> etree.XMLSchema:
    """The Jenkins schema; `legacy`: with xunit1's test case `file`/`line` attributes and
    `<properties>` allowed, nothing else changed."""
    tree = etree.parse(str(SCHEMA))
    if legacy:
        (case,) = tree.getroot().findall(f"{XS}element[@name='testcase']/{XS}complexType")
        (choice,) = case.findall(f"{XS}sequence/{XS}choice")
        etree.SubElement(choice, f"{XS}element", ref="properties")
        for name in ("file", "line"):
            etree.SubElement(case, f"{XS}attribute", name=name, type="xs:string")
    return etree.XMLSchema(tree)


def run(pytester: pytest.Pytester, family: str) -> Path:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    for rel, text in TASKS.items():
        path = pytester.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    write_solution_agent(pytester.path)
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "tasks",
        f"--super-agent={SOLUTION_AGENT}",
        "--super-backend=local",
        f"--junitxml={junit}",
        "-o",
        f"junit_family={family}",
        "--super-report-dir=out",
    )
    result.assert_outcomes(passed=2, failed=1, errors=1)
    return junit


@pytest.mark.parametrize("family", ["xunit2", "xunit1"])
def test_the_junit_file_of_a_run(pytester: pytest.Pytester, family: str) -> None:
    """One run per family (each about 10 s), read three ways."""
    junit = run(pytester, family)
    validates_against_the_jenkins_schema(junit, family)
    properties_are_typed_and_link_the_html_page(junit)
    the_report_command_reads_it(junit)


def validates_against_the_jenkins_schema(junit: Path, family: str) -> None:
    schema = jenkins_schema(legacy=family == "xunit1")
    document = etree.parse(str(junit))
    assert schema.validate(document), "\n".join(str(e) for e in schema.error_log)
    assert junit_outcomes(junit) == {
        "adder": "passed",
        "almost": "failure",
        "adder_data,cpu": "passed",
        "stuck": "error",
    }
    cases = {c.get("name"): c for c in document.getroot().iter("testcase")}
    assert cases["adder"].get("classname") == "super.expert.uncategorized"
    assert cases["stuck"].get("classname") == "super.expert.uncategorized"
    assert cases["adder_data,cpu"].get("classname") == "super.masked.data+cpu"
    in_cases = [p for c in cases.values() for p in c.iter("property")]
    if family == "xunit2":
        assert in_cases == []  # the schema has none there: the suite holds them
        (out,) = cases["adder"].findall("system-out")
        assert out.text is not None and out.text.startswith("SUPER adder: passed ")
        assert "accuracy=1.0" in out.text and "submitted=true" in out.text
        (out,) = cases["stuck"].findall("system-out")
        assert out.text is not None and "SUPER stuck: error exit_status=timeout" in out.text
    else:
        assert in_cases != [] and all(c.findall("system-out") == [] for c in cases.values())


def properties_are_typed_and_link_the_html_page(junit: Path) -> None:
    props = junit_properties(junit)
    adder = props["adder"]
    assert adder["super.submitted"] == "true"  # not Python's "True"
    assert adder["super.accuracy"] == "1.0" and adder["super.landmarks"] == "1.0"
    assert adder["super.steps"] == "2" and adder["super.prompt_tokens"] == "0"
    assert props["almost"]["super.submitted"] == "true"
    assert props["almost"]["super.accuracy"] == "0.0"
    assert props["stuck"]["super.exit_status"] == "timeout"
    assert props["stuck"]["super.set"] == "expert"
    for name, found in props.items():
        page = junit.parent / found["super.html_page"]
        assert page.is_file(), (name, found["super.html_page"])
        assert "<title>" in page.read_text() and name.split(",")[0] in page.read_text()


def the_report_command_reads_it(junit: Path) -> None:
    records = {r.task_id: r for r in report.read_junit(junit)}
    assert {k: r.outcome for k, r in records.items()} == {
        "adder": "passed",
        "almost": "failed",
        "adder_data,cpu": "passed",
        "stuck": "error",
    }
    assert records["adder"].properties["accuracy"] == "1.0"
    assert records["stuck"].properties["exit_status"] == "timeout"
