"""A deterministic discrete-event engine: a heap of events ordered by (time, priority, sequence).

Two events at the same time run in priority order (lower first), then in the order they were
scheduled, so a run never depends on hash order or the heap's internal layout. Randomness comes
only from the engine's own seeded `random.Random`; the wall clock is never read.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Handler = Callable[[float, Any], None]

# Same-time order: pods finish and release before new jobs arrive, then the scheduler runs,
# then the metrics sample what the cycle left.
FINISH, RELEASE, ARRIVAL, CYCLE, SAMPLE = 0, 1, 2, 3, 4


@dataclass(order=True, slots=True)
class Event:
    time: float
    priority: int
    seq: int
    kind: str = field(compare=False)
    payload: Any = field(compare=False, default=None)


class Engine:
    """Runs handlers registered per event kind on a virtual clock (seconds)."""

    def __init__(self, seed: int = 0) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self._heap: list[Event] = []
        self._seq = 0
        self._handlers: dict[str, Handler] = {}
        self.processed = 0
        self._stopped = False

    def on(self, kind: str, handler: Handler) -> None:
        self._handlers[kind] = handler

    def schedule(self, time: float, priority: int, kind: str, payload: Any = None) -> None:
        """Queue an event; an event in the past is a bug in the caller."""
        if time < self.now:
            raise ValueError(f"event {kind} at {time} is before now ({self.now})")
        self._seq += 1
        heapq.heappush(self._heap, Event(time, priority, self._seq, kind, payload))

    def stop(self) -> None:
        self._stopped = True

    def __len__(self) -> int:
        return len(self._heap)

    def peek_time(self) -> float | None:
        return self._heap[0].time if self._heap else None

    def run(self, until: float | None = None, on_progress: Callable[[float], None] | None = None) -> None:
        """Process events in order until the heap is empty, `stop()` is called, or the next event
        is after `until`. The clock ends at `until` when given."""
        heap = self._heap
        handlers = self._handlers
        while heap and not self._stopped:
            if until is not None and heap[0].time > until:
                break
            ev = heapq.heappop(heap)
            self.now = ev.time
            handlers[ev.kind](ev.time, ev.payload)
            self.processed += 1
            if on_progress is not None and self.processed % 2048 == 0:
                on_progress(self.now)
        if until is not None and not self._stopped:
            self.now = max(self.now, until)
