"""Durations in job files: ``90s``, ``30m``, ``8h``, ``2d``, combined as ``1h30m``; a bare
number is seconds.  The job model keeps whole seconds (an ``int``)."""
from __future__ import annotations

import re
from typing import Annotated, Any, Optional

from pydantic import BeforeValidator, WithJsonSchema

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)([dhms])")
_WHOLE = re.compile(r"^(?:\d+[dhms])+$")
HINT = "write a number with a unit: 90s, 30m, 8h, 2d, or a combination such as 1h30m"


def parse_duration(value: Any) -> int:
    """Whole seconds from ``8h``, ``1h30m``, ``90s``, ``2d`` or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration; {HINT}")
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, float) and value.is_integer():
        seconds = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        seconds = int(value.strip())
    elif isinstance(value, str) and _WHOLE.match(value.strip().lower()):
        text = value.strip().lower()
        units = [u for _, u in _PART.findall(text)]
        if len(set(units)) != len(units) or units != sorted(units, key=lambda u: -UNITS[u]):
            raise ValueError(f"{value!r}: give each unit once, largest first (e.g. 1h30m); {HINT}")
        seconds = sum(int(n) * UNITS[u] for n, u in _PART.findall(text))
    else:
        raise ValueError(f"{value!r} is not a duration; {HINT}")
    if seconds <= 0:
        raise ValueError(f"{value!r} must be longer than 0 seconds; {HINT}")
    return seconds


def format_duration(seconds: int) -> str:
    """``28800`` -> ``8h``, ``5400`` -> ``1h30m``, ``90`` -> ``1m30s``."""
    parts = []
    for unit, size in UNITS.items():
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def _optional(value: Any) -> Optional[int]:
    return None if value is None else parse_duration(value)


# ``max_runtime: 8h`` (or seconds) in the job file; the model holds whole seconds, or None.
OptionalDuration = Annotated[Optional[int], BeforeValidator(_optional),
                             WithJsonSchema({"anyOf": [{"type": "string", "pattern": r"^(\d+[dhms])+$"},
                                                       {"type": "integer", "exclusiveMinimum": 0},
                                                       {"type": "null"}]})]
