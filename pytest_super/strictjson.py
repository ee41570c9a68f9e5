"""Strict JSON for everything we write: no `NaN` or `Infinity`, which are not JSON and which strict
readers (jq, JavaScript's JSON.parse, other languages' parsers) refuse.

A non-finite float anywhere in a value (a submitted answer of `NaN`, a score) is written as the
string "NaN", "Infinity" or "-Infinity"; scoring is unchanged, since it runs on the values before
they are written. Other values that JSON has no type for are written as `str()` gives them, as
`json.dumps(..., default=str)` did. The run's secrets are redacted from the text (`redaction`).
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeAlias

from pytest_super.redaction import redact

#: a value as `json.loads` gives it
JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None


def finite(value: object) -> object:
    """`value` with every non-finite float replaced by its name as a string (a copy where one was
    replaced; the value itself otherwise)."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def dumps(value: object, **kwargs: Any) -> str:  # Any: json.dumps's own options
    """`json.dumps` that writes strict JSON, with the run's secrets redacted (a key is ASCII
    letters, digits and `-_`, written in JSON as it is)."""
    kwargs.setdefault("default", str)
    return redact(json.dumps(finite(value), allow_nan=False, **kwargs))
