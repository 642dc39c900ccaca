"""CEL selectors of DeviceClasses and device requests, evaluated with cel-python (`celpy`).

The environment is Kubernetes' DRA one as far as shoal supports it: `device.driver`,
`device.attributes[domain].name` (int, bool, string, version), `device.capacity[domain].name` (a
quantity: an integer here), `device.allowMultipleAllocations`, the quantity helpers
`quantity("40Gi")`, `q.compareTo(q2)`, `q.isGreaterThan(q2)`, `q.isLessThan(q2)`, `q.asInteger()`,
and the semantic-version ones `semver("1.2.3")`, `isSemver(s)`, `v.major()`, `v.minor()`,
`v.patch()`, with `compareTo`, `isGreaterThan`, `isLessThan` ordering versions by semver precedence
(a version attribute is one; `==` compares the strings). A selector that does not compile, fails at run time (e.g. a
missing attribute) or is not a bool does not match (Kubernetes fails the allocation instead).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import celpy
from celpy import celtypes

from shoal.kai.dra import Device, Version
from shoal.model.resources import parse_memory

logger = logging.getLogger(__name__)


def _quantity(s: Any) -> celtypes.IntType:
    return celtypes.IntType(parse_memory(str(s)))


_SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?")


class SemverType(celtypes.StringType):
    """A semantic version in CEL (`semver(s)`, or a device attribute of kind version)."""

    @property
    def key(self) -> tuple[Any, ...]:
        """Precedence (semver.org §11): major, minor, patch, then a release above its pre-releases,
        whose dot-separated identifiers compare numerically, below alphanumeric ones, shorter first."""
        m = _SEMVER.fullmatch(str(self))
        if m is None:
            raise ValueError(f"{str(self)!r} is not a semantic version")
        pre = m[4]
        ids = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in pre.split(".")) if pre else ()
        return int(m[1]), int(m[2]), int(m[3]), (0, ids) if pre else (1, ())


def _semver(s: Any) -> SemverType:
    v = SemverType(str(s))
    v.key  # noqa: B018 - validates
    return v


def _order(a: Any, b: Any) -> int:
    if isinstance(a, SemverType) or isinstance(b, SemverType):
        ka, kb = _semver(a).key, _semver(b).key
        return (ka > kb) - (ka < kb)
    return (int(a) > int(b)) - (int(a) < int(b))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "compareTo": lambda a, b: celtypes.IntType(_order(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_order(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_order(a, b) < 0),
    "asInteger": lambda a: celtypes.IntType(int(a)),
    "semver": _semver,
    "isSemver": lambda s: celtypes.BoolType(_SEMVER.fullmatch(str(s)) is not None),
    "major": lambda v: celtypes.IntType(_semver(v).key[0]),
    "minor": lambda v: celtypes.IntType(_semver(v).key[1]),
    "patch": lambda v: celtypes.IntType(_semver(v).key[2]),
}


def _value(v: Any) -> Any:
    return SemverType(v) if isinstance(v, Version) else celpy.json_to_cel(v)


class Selectors:
    """Compiled CEL programs by expression (each compiled once)."""

    def __init__(self) -> None:
        self.env = celpy.Environment()
        self.programs: dict[str, Any] = {}

    def _program(self, expr: str) -> Any:
        if expr not in self.programs:
            try:
                self.programs[expr] = self.env.program(self.env.compile(expr), functions=FUNCTIONS)
            except Exception as e:  # celpy raises its own parse errors
                logger.warning("CEL selector %r does not compile: %s", expr, e)
                self.programs[expr] = None
        return self.programs[expr]

    def match(self, exprs: tuple[str, ...], driver: str, device: Device) -> bool:
        """True if every expression accepts the device."""
        if not exprs:
            return True
        attributes = celtypes.MapType({
            celtypes.StringType(domain): celtypes.MapType({celtypes.StringType(k): _value(v) for k, v in attrs.items()})
            for domain, attrs in device.attributes.items()})
        activation = {"device": celtypes.MapType({
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): attributes,
            celtypes.StringType("capacity"): celpy.json_to_cel(dict(device.capacity)),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(False)})}
        for expr in exprs:
            program = self._program(expr)
            if program is None:
                return False
            try:
                result = program.evaluate(activation)
            except Exception:
                return False
            if not isinstance(result, celtypes.BoolType) or not bool(result):
                return False
        return True
