"""The random streams an FGD run can draw from: Go's math/rand (exact replay) or Python's random."""

from __future__ import annotations

import random
from typing import Protocol, TypeVar

from shoal.experiments.fgd.gorand import GoRand

_T = TypeVar("_T")


class RandomStream(Protocol):
    """The draws the experiment makes, named after Go's methods."""

    def int_(self) -> int: ...
    def intn(self, n: int) -> int: ...
    def float64(self) -> float: ...
    def perm(self, n: int) -> list[int]: ...
    def shuffle_list(self, items: list[_T]) -> None: ...


class PyRand:
    """``random.Random(seed)`` behind the :class:`RandomStream` interface (results match Go's
    only in distribution)."""

    __slots__ = ("_r",)

    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed)

    def int_(self) -> int:
        return self._r.getrandbits(63)

    def intn(self, n: int) -> int:
        return self._r.randrange(n)

    def float64(self) -> float:
        return self._r.random()

    def perm(self, n: int) -> list[int]:
        items = list(range(n))
        self._r.shuffle(items)
        return items

    def shuffle_list(self, items: list[_T]) -> None:
        self._r.shuffle(items)


RNG_KINDS = ("go", "py")


def make_stream(kind: str, seed: int) -> RandomStream:
    """The stream named ``kind`` (``go`` or ``py``) seeded with ``seed``."""
    if kind == "go":
        return GoRand(seed)
    if kind == "py":
        return PyRand(seed)
    raise ValueError(f"unknown rng {kind!r}; expected one of {RNG_KINDS}")
