"""YAML reading that remembers the line of every mapping, for error messages with line numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from shoal.kai.units import parse_duration
from shoal.sim.errors import SimInputError


class LineDict(dict[str, Any]):
    """A mapping read from YAML, with the 1-based line it starts on (0 = unknown)."""

    line: int = 0


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    out = LineDict({str(k): v for k, v in loader.construct_mapping(node, deep=True).items()})
    out.line = node.start_mark.line + 1
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise SimInputError(f"{path}: cannot read: {err.strerror or err}") from None


def load_docs(path: Path) -> list[Any]:
    """All non-empty YAML documents of `path`; a syntax error names the file and line."""
    text = read_text(path)
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise SimInputError(f"{path}{where}: invalid YAML: {getattr(err, 'problem', None) or err}") from None


def where(path: Path | str, obj: object) -> str:
    """`path:line` of a mapping read by `load_docs`, else `path`."""
    line = getattr(obj, "line", 0)
    return f"{path}:{line}" if line else str(path)


def mapping(value: object, at: str, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SimInputError(f"{at}: {field}: expected a mapping, got {type(value).__name__}")
    return value


def number(value: object, at: str, field: str, *, minimum: float | None = None) -> float:
    """A float from YAML/CSV; the error names the field and the bad value."""
    if isinstance(value, bool):
        raise SimInputError(f"{at}: {field}: expected a number, got {value!r}")
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise SimInputError(f"{at}: {field}: expected a number, got {value!r}") from None
    if out != out:
        raise SimInputError(f"{at}: {field}: not a number")
    if minimum is not None and out < minimum:
        raise SimInputError(f"{at}: {field}: must be >= {minimum:g}, got {value!r}")
    return out


def duration(value: object, at: str, field: str) -> float:
    """Seconds from a number or a duration string (`1h30m`, `10m`, `2d`, `45s`), never negative."""
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise SimInputError(
            f"{at}: {field}: expected a number of seconds or a duration like 1h30m, got {value!r}") from None
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise SimInputError(f"{at}: {field}: not a number")
    if seconds < 0:
        raise SimInputError(f"{at}: {field}: must be >= 0, got {value!r}")
    return seconds
