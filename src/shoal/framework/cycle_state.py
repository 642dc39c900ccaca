"""Typed per-cycle state (kube-scheduler's `CycleState`): what an action memoises during one
session, under typed keys instead of string keys.

A `StateKey[T]` is declared by the module that owns the value (compared by identity, so two
modules cannot collide on a name) and `CycleState` hands back a `T`. What plugins publish for
actions is not here: it is a typed field of `Session.hooks`, so the dependency is visible in the
framework's types and import-linter sees that actions never import plugins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class StateKey(Generic[T]):
    """The key of one value of `CycleState`; `T` is the value's type."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState:
    """Values that live for one session (never across cycles). Not thread-safe."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[StateKey[Any], Any] = {}

    def get(self, key: StateKey[T]) -> T | None:
        """The value under `key`, or None when unset."""
        return cast("T | None", self._values.get(key))

    def set(self, key: StateKey[T], value: T) -> None:
        self._values[key] = value

    def setdefault(self, key: StateKey[T], factory: Callable[[], T]) -> T:
        """The value under `key`, created by `factory()` on first use."""
        if key not in self._values:
            self._values[key] = factory()
        return cast("T", self._values[key])

    def clear(self) -> None:
        self._values.clear()
