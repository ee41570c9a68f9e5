"""How a setting's text is read: sizes, numbers in their bounds, choices, true/false, prices and
the names of backends, executors, registries and prompts. Each reader takes the text an option,
an environment variable or an ini key holds and returns the value, or raises a `ValueError` whose
message says what is expected; resolution (resolve.py) turns it into a `SettingError` naming
where the text came from.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pytest_super.prompts import PromptSet, load_prompts
from pytest_super.tasks.model import Bounds


class SettingError(ValueError):
    """A setting that does not read or does not fit the run; the message names its source and
    what to do. Under pytest it becomes a usage error with the same message."""


#: the accepted range of each number a setting holds (a task's limits: tasks.model.LIMIT_RANGES)
DISK_BOUNDS = Bounds(2**20, 2**50)  # 1m .. 1024t
#: Docker's least memory limit is 6m; 16384g is more than any machine has
MEMORY_BOUNDS = Bounds(6 * 2**20, 16384 * 2**30)
#: the engine refuses fewer than 0.01 CPUs (and below 1e-9 nano_cpus rounds to 0: no limit at all)
CPU_BOUNDS = Bounds(0.01, 1024, "CPUs")
TOLERANCE_BOUNDS = Bounds(0, 1e9)
THRESHOLD_BOUNDS = Bounds(0, 1)
PRICE_BOUNDS = Bounds(0, 1_000_000, "USD per million tokens")
REPEAT_BOUNDS = Bounds(1, 1000, whole=True)
_MEMORY_UNITS = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30}
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def read_disk_size(value: str) -> int | None:
    """SIZE in bytes (binary units k, m, g, t; b optional), from 1m to 1024t; "none": no bound."""
    text = value.strip().lower().removesuffix("b").removesuffix("i")
    if text == "none":
        return None
    number, unit = text.rstrip("kmgt"), text[len(text.rstrip("kmgt")) :]
    try:
        size = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        size = math.nan
    if not DISK_BOUNDS.accepts(size):
        raise ValueError(
            "expected a size from 1m to 1024t such as 20g or 500m, or none for no bound"
        )
    return int(size)


def memory_size(value: str) -> str:
    """--super-mem, read by the rules of the Docker SDK's `parse_bytes` (which the engine's
    client applies to it later): units b, k, m, g (any case, a `b` after a unit allowed), no unit
    for bytes; from 6m, Docker's least, to 16384g. The text is kept as given."""
    text = value
    if text[-2:-1].isalpha() and text[-1:] in ("b", "B"):
        text = text[:-1]
    suffix = text[-1:].lower()
    digits, unit = (text, "b") if suffix.isdigit() else (text[:-1], suffix)
    try:
        size = float(digits) * _MEMORY_UNITS[unit]
    except (ValueError, KeyError):
        size = math.nan
    if not MEMORY_BOUNDS.accepts(size):
        raise ValueError(
            "expected a memory size from 6m to 16384g in Docker's units b, k, m, g, e.g. 4g"
        )
    return value


def number_reader(bounds: Bounds) -> Callable[[str], float]:
    """A reader of a number in `bounds`: an int when they are whole, else a finite float (for
    the settings an executor declares, too)."""

    def read(value: str) -> float:
        try:
            number: float = int(value) if bounds.whole else float(value)
        except ValueError:
            number = math.nan
        if not bounds.accepts(number):
            raise ValueError(f"expected {bounds.text}")
        return number

    return read


def read_runs_per_task(value: str) -> int:
    try:
        return int(number_reader(REPEAT_BOUNDS)(value))
    except ValueError:
        raise ValueError("give 1 or more runs per task (at most 1000)") from None


def read_prices(value: str) -> tuple[float, float, float | None]:
    """IN,OUT[,CACHED]: USD per million prompt, completion (and cached prompt) tokens."""
    try:
        prices = [float(part) for part in value.split(",")]
    except ValueError:
        prices = []
    if len(prices) not in (2, 3) or not all(PRICE_BOUNDS.accepts(p) for p in prices):
        raise ValueError(f"expected IN,OUT[,CACHED], each {PRICE_BOUNDS.text}, e.g. 2.5,10,1.25")
    return prices[0], prices[1], (prices[2] if len(prices) == 3 else None)


def choice(*names: str) -> Callable[[str], str]:
    def read(value: str) -> str:
        if value not in names:
            raise ValueError(f"expected one of {', '.join(names)}")
        return value

    return read


def read_boolean(value: str) -> bool:
    text = value.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def read_backend(value: str) -> str:
    """A kernel backend's name (built-in, entry point or module:Class), or a deprecated alias of
    an executor (executors.BACKEND_ALIASES). A built-in name is known without importing its backend
    (every pytest start reads this setting)."""
    from pytest_super import executors, kernels

    if value in executors.BACKEND_ALIASES or value in kernels.BACKENDS:
        return value
    kernels.kernel_backend_class(value)  # ValueError naming the known backends
    return value


def read_executor(value: str) -> str:
    """An executor's name (built-in, entry point or module:Class), known without importing it."""
    from pytest_super import executors

    return executors.check_executor_name(value)


def read_text(value: str) -> str:
    return value


def read_prompts(value: str) -> PromptSet:
    """`ours`, `reference`, a folder of prompt templates, or SUPER's prompt.yaml
    (PromptFileError, a ValueError, names the file and field)."""
    return load_prompts(value)


def shown(raw: str) -> str:
    """A text as an error message shows it: a number as it is, anything else quoted."""
    return raw if raw.strip().lstrip("-").replace(".", "", 1).isdigit() else repr(raw)
