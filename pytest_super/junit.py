"""The JUnit XML file of a run (pytest's `--junitxml`), shaped for strict consumers.

pytest writes the file; the recorder (recorder.py, the controller only) passes each task's
reports through `JunitShaper.shape` before pytest's writer reads them:

- the classname of a task's test case is `super.<set>.<category>`: Jenkins splits a classname
  at its last dot into package and class, GitLab groups by the whole, so both group a run by SUPER
  set, then by masked category (`+` joins a sub-problem's several categories; a task of no
  category is `uncategorized`), instead of by the task file's path (`tasks.expert.x.yaml` showed
  every task under the class `yaml`);
- property values are typed text: booleans `true`/`false`, whole numbers as integers, the rest
  as Python writes a float (`1.0`, `0.25`), no value as ``;
- a property `html_page` links the test case to its page of the HTML report (a path relative to
  the report folder's parent, as `trajectory` is);
- under `junit_family=xunit2` (pytest's default), whose schema (the Jenkins xunit plugin's
  junit-10.xsd) allows no `<properties>` in a `<testcase>`, the `super.*` properties go to the
  test suite, named `super.<test case name>.<field>` (the way `record_testsuite_property`
  writes), and each task's test case gets one `<system-out>` line with its outcome and scores;
  under `junit_family=xunit1` (legacy) they stay in the test case, for the dashboards that read
  them there. `report.read_junit` reads both.
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pytest_super.tasks.lmr import LMR_SET

if TYPE_CHECKING:
    import pytest

PREFIX = "super."

#: the fields of a task's `<system-out>` line, in this order, when the task has them
SUMMARY_FIELDS = (
    "exit_status",
    "accuracy",
    "landmarks",
    "submitted",
    "script_executed",
    "steps",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    # LMR-Bench's: our unit-test verdict, its counts, and upstream's verdict from the test's log
    "unit_tests",
    "tests_run",
    "tests_failed",
    "tests_errored",
    "upstream_verdict",
    # its judge's grade (--super-judge-model): upstream's category 1-3, or the judge's error
    "judge_model",
    "judge_score",
    "judge_error",
)

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def typed(value: object) -> str:
    """A property value as JUnit text, the same type written the same way everywhere."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


def classname(properties: Mapping[str, object]) -> str:
    """`super.<set>.<category>` of a task's properties (without the `super.` prefix)."""
    set_name = _segment(str(properties.get("set") or "")) or "unknown"
    categories = [_segment(c) for c in str(properties.get("category") or "").split(",")]
    return f"super.{set_name}.{'+'.join(c for c in categories if c) or 'uncategorized'}"


def _segment(text: str) -> str:
    """One dot-free segment of a classname."""
    return _UNSAFE.sub("_", text.strip()).strip("_")


def suite_property_name(case_name: str, field: str) -> str:
    """The suite-level property of a task's field (xunit2): `super.<case name>.<field>`; a
    field never holds a dot, so the last dot splits it from the case name."""
    return f"{PREFIX}{case_name}.{field}"


def split_suite_property(name: str) -> tuple[str, str] | None:
    """(case name, field) of a suite-level property `suite_property_name` wrote; None for
    another property."""
    if not name.startswith(PREFIX) or "." not in name[len(PREFIX) :]:
        return None
    case_name, field = name[len(PREFIX) :].rsplit(".", 1)
    return (case_name, field) if case_name and field else None


def summary_line(case_name: str, outcome: str, properties: Mapping[str, object]) -> str:
    """The `<system-out>` line of a task: its benchmark, outcome and the scores it has (a value
    with a space quoted: `upstream_verdict="FAIL (found 0 failure lines)"`)."""
    shown = [f"{k}={_shown(typed(properties[k]))}" for k in SUMMARY_FIELDS if k in properties]
    benchmark = "LMR-Bench" if properties.get("set") == LMR_SET else "SUPER"
    return f"{benchmark} {case_name}: {outcome} " + " ".join(
        s for s in shown if not s.endswith("=")
    )


def _shown(value: str) -> str:
    return json.dumps(value, ensure_ascii=False) if " " in value else value


class JunitShaper:
    """Shapes the reports of task items for pytest's JUnit writer (`writer`: its `LogXML`;
    `html_page`: a test case name -> the path of its HTML page, as the property holds it)."""

    def __init__(
        self, writer: Any, html_page: Callable[[str], str]
    ) -> None:  # Any: LogXML, private
        self.writer = writer
        self.html_page = html_page

    @property
    def xunit2(self) -> bool:
        return str(getattr(self.writer, "family", "xunit1")) == "xunit2"

    def shape(
        self, report: pytest.TestReport, outcome: str | None, properties: Mapping[str, object]
    ) -> None:
        """Shape one report of a task (`properties`: its record's, without `super.`; `outcome`:
        the task's, given with its last report, else None): the classname on every report, the
        typed properties on the last (per case for xunit1, per suite for xunit2)."""
        if not properties:
            return
        case_name = report.nodeid.rsplit("::", 1)[-1]
        reporter = self.writer.node_reporter(report)
        reporter.add_attribute("classname", classname(properties))
        if outcome is None:
            report.user_properties = _without_ours(report.user_properties)
            return
        ours = {**properties, "html_page": self.html_page(case_name)}
        others = _without_ours(report.user_properties)
        if not self.xunit2:
            report.user_properties = others + [(PREFIX + k, typed(v)) for k, v in ours.items()]
            return
        report.user_properties = others
        for field, value in ours.items():
            self.writer.add_global_property(suite_property_name(case_name, field), typed(value))
        out = ET.Element("system-out")
        out.text = summary_line(case_name, outcome, properties)
        reporter.append(out)


def _without_ours(properties: Iterable[tuple[str, object]]) -> list[tuple[str, object]]:
    return [(k, v) for k, v in properties if not k.startswith(PREFIX)]
