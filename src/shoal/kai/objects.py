"""Kubernetes objects as plain JSON dicts: the metadata accessors every decoder shares."""

from __future__ import annotations

from datetime import datetime
from typing import Any

JSON = dict[str, Any]


def meta(obj: JSON) -> JSON:
    """`metadata` of an object; {} when absent or not a mapping (never raises)."""
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def timestamp(value: object) -> float | None:
    """RFC 3339 timestamp -> epoch seconds; None when absent or unparsable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
