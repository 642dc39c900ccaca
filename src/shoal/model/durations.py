"""Durations as KAI writes them (Go's `time.ParseDuration`: `90s`, `1h30m`, `500ms`), in seconds.

It lives in the model, beside the quantity parsers, because both sides of the import rule need
it: the core's plugin arguments (`minruntime`) and every adapter's objects (Queue
`preemptMinRuntime`, scenario and trace files, CLI flags; they reach it through `shoal.kai`).
"""

from __future__ import annotations

import re

#: Go's units, plus days and weeks for the simulator's trace and scenario files.
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
          "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)")


def parse_duration(text: object) -> float:
    """Seconds of a Go duration (`1h30m`, `-5m`, `0`) or of a bare number (seconds).

    Accepts `d` and `w` besides Go's units. Raises ValueError naming the text on anything else
    (an empty text included); whether a negative duration is allowed is the caller's business."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 10m, 1h30m)")
    if isinstance(text, int | float):
        return float(text)
    t = str(text).strip()
    try:
        return float(t)
    except ValueError:
        pass
    body = t.lstrip("+-")
    pos, total = 0, 0.0
    for m in _PART.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(body) or not body or len(t) - len(body) > 1:
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 10m, 1h30m)")
    return -total if t.startswith("-") else total
