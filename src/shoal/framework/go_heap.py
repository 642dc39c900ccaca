"""A binary heap with the exact sift rules of Go's `container/heap` (Push, Pop, Fix).

KAI keeps its queue tree in such heaps and re-orders an entry only when it is at the top and
marked stale (`JobsOrderByQueues`). Between two fixes the comparator's answers change (queues
gain allocations), so the heap is not always a valid heap for the current order, and which
entry surfaces next depends on where each entry sits. Python's `heapq` sifts differently
(`_siftup` walks to a leaf first), so it would surface other entries: this module reproduces
Go's algorithm step for step. `less(a, b)` is true when `a` goes first; it is passed to each
call rather than kept, so a heap holds no reference to its owner (no reference cycle: sessions
are freed without the cyclic garbage collector).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
Less = Callable[[T, T], bool]


class GoHeap(Generic[T]):
    """Entries in a list ordered as Go's `container/heap` would order them."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[T] = []

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def peek(self) -> T:
        return self.items[0]

    def push(self, item: T, less: Less[T]) -> None:
        self.items.append(item)
        self._up(len(self.items) - 1, less)

    def pop(self, less: Less[T]) -> T:
        items = self.items
        n = len(items) - 1
        items[0], items[n] = items[n], items[0]
        self._down(0, n, less)
        return items.pop()

    def fix(self, i: int, less: Less[T]) -> None:
        if not self._down(i, len(self.items), less):
            self._up(i, less)

    def _up(self, j: int, less: Less[T]) -> None:
        items = self.items
        while True:
            i = (j - 1) // 2
            if j <= 0 or i == j or not less(items[j], items[i]):
                break
            items[i], items[j] = items[j], items[i]
            j = i

    def _down(self, i0: int, n: int, less: Less[T]) -> bool:
        items = self.items
        i = i0
        while True:
            j1 = 2 * i + 1
            if j1 >= n:
                break
            j = j1
            j2 = j1 + 1
            if j2 < n and less(items[j2], items[j1]):
                j = j2
            if not less(items[j], items[i]):
                break
            items[i], items[j] = items[j], items[i]
            i = j
        return i > i0
