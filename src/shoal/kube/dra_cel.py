"""CEL selectors of DeviceClasses and device requests, evaluated with cel-python (`celpy`).

The environment is Kubernetes' DRA one as far as shoal supports it: `device.driver`,
`device.attributes[domain].name` (int, bool, string; versions as strings),
`device.capacity[domain].name` (a quantity: an integer here), `device.allowMultipleAllocations`,
and the quantity helpers `quantity("40Gi")`, `q.compareTo(q2)`, `q.isGreaterThan(q2)`,
`q.isLessThan(q2)`, `q.asInteger()`. A selector that does not compile, fails at run time (e.g. a
missing attribute) or is not a bool does not match (Kubernetes fails the allocation instead).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import celpy
from celpy import celtypes

from shoal.kai.dra import Device
from shoal.model.resources import parse_memory

logger = logging.getLogger(__name__)


def _quantity(s: Any) -> celtypes.IntType:
    return celtypes.IntType(parse_memory(str(s)))


def _compare(a: Any, b: Any) -> celtypes.IntType:
    return celtypes.IntType((int(a) > int(b)) - (int(a) < int(b)))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(int(a) > int(b)),
    "isLessThan": lambda a, b: celtypes.BoolType(int(a) < int(b)),
    "asInteger": lambda a: celtypes.IntType(int(a)),
}


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
        activation = {"device": celpy.json_to_cel({
            "driver": driver, "attributes": device.attributes, "capacity": device.capacity,
            "allowMultipleAllocations": False})}
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
