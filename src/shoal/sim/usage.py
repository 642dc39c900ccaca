"""An incremental `shoal.framework.usage.UsageStore` for the simulator's virtual clock.

Same quantity as the framework's `InMemoryUsageStore` (kai-spec §4.3):
U_q = ∫ 0.5^((now - s) / h) a_q(s) ds / ∫ 0.5^((now - s) / h) c(s) ds, allocation and capacity
piecewise constant between records. The in-memory store keeps every sample of the window and
integrates them all on each `usage()` call, O(samples) per call; a week-long simulation records
thousands of samples and asks every simulated minute, so this store instead keeps the two decayed
integrals and updates them in O(queues) per call: both integrals are multiplied by the decay of
the elapsed time and the new interval's exact integral is added. Time only moves forward here.
`window` (seconds, 0 = none) forgets everything at each multiple of the window (KAI's tumbling
window); with a half-life much shorter than the window, that matters little.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

RESOURCES = ("gpu", "cpu", "memory")
Vector3 = tuple[float, float, float]


class DecayedUsage:
    """`record(now, allocated, capacity)` from then on; `usage(now)` = decayed normalised usage."""

    def __init__(self, half_life: float, window: float = 0.0) -> None:
        if half_life <= 0:
            raise ValueError("half_life must be > 0 seconds")
        self.half_life = half_life
        self.window = window
        self.t = 0.0
        self._used: dict[str, list[float]] = {}
        self._capacity = [0.0, 0.0, 0.0]
        self._alloc: dict[str, Vector3] = {}
        self._cap: Vector3 = (0.0, 0.0, 0.0)

    def _advance(self, now: float) -> None:
        """Integrate the current state over (t, now]."""
        if now <= self.t:
            return
        start = self.t
        if self.window > 0 and math.floor(now / self.window) > math.floor(self.t / self.window):
            self._used.clear()
            self._capacity = [0.0, 0.0, 0.0]
            start = math.floor(now / self.window) * self.window
        dt = now - start
        decay = 0.5 ** (dt / self.half_life)
        # ∫ over the interval of 0.5^((now - s) / h) ds = h / ln 2 * (1 - decay).
        weight = self.half_life / math.log(2) * (1.0 - decay)
        for used in self._used.values():
            for r in range(3):
                used[r] *= decay
        for r in range(3):
            self._capacity[r] = self._capacity[r] * decay + self._cap[r] * weight
        for q, amounts in self._alloc.items():
            used = self._used.setdefault(q, [0.0, 0.0, 0.0])
            for r in range(3):
                used[r] += amounts[r] * weight
        self.t = now

    def record(self, now: float, allocated: Mapping[str, Vector3], capacity: Vector3) -> None:
        """From `now` on, queue q holds `allocated[q]` (GPU milli, CPU milli, memory bytes)."""
        if now < self.t:
            raise ValueError(f"usage record at {now} is older than the last one ({self.t})")
        self._advance(now)
        self._alloc = {q: (float(v[0]), float(v[1]), float(v[2])) for q, v in allocated.items()}
        self._cap = (float(capacity[0]), float(capacity[1]), float(capacity[2]))

    def usage(self, now: float) -> dict[str, dict[str, float]]:
        self._advance(now)
        out: dict[str, dict[str, float]] = {}
        for q in sorted(self._used):
            used = self._used[q]
            out[q] = {
                RESOURCES[r]: (used[r] / self._capacity[r] if self._capacity[r] > 0 else 0.0)
                for r in range(3)
            }
        return out
