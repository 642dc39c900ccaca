"""Time-decayed queue usage for time-based fair share (kai-spec §4.3), on the virtual clock.

U_q = sum_k 0.5^((now - t_k) / half_life) * a_q(t_k) dt_k  /  sum_k 0.5^(...) * capacity dt_k:
the queue's allocation integrated over time with exponential decay, normalised by the cluster
capacity integrated the same way, so 0 <= U_q <= 1 (KAI's usage DB, without Prometheus).
Allocation is piecewise constant between updates, so each interval is integrated exactly.
`window` (seconds, 0 = none) additionally forgets everything older than one window by
restarting the integrals at window boundaries (KAI's tumbling window).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

RESOURCES = ("gpu", "cpu", "memory")


class DecayedUsage:
    """Accumulates per-queue allocation; `usage()` gives the snapshot's `usage` mapping."""

    def __init__(self, half_life: float, window: float = 0.0) -> None:
        if half_life <= 0:
            raise ValueError("half_life must be > 0 seconds")
        self.half_life = half_life
        self.window = window
        self.t = 0.0
        self._window_start = 0.0
        self._used: dict[str, list[float]] = {}
        self._capacity = [0.0, 0.0, 0.0]

    def advance(
        self,
        now: float,
        allocated: Mapping[str, tuple[float, float, float]],
        capacity: tuple[float, float, float],
    ) -> None:
        """Integrate `allocated` (per queue: GPU milli, CPU milli, memory bytes, constant since the
        last call) and `capacity` over (last call, now]."""
        dt = now - self.t
        if dt <= 0:
            return
        if self.window > 0 and now - self._window_start >= self.window:
            self._used.clear()
            self._capacity = [0.0, 0.0, 0.0]
            self._window_start = now - (now - self._window_start) % self.window
            dt = now - max(self.t, self._window_start)
        decay = 0.5 ** (dt / self.half_life)
        # Integral of 0.5^((now - s) / h) ds over the interval = h / ln 2 * (1 - decay).
        weight = self.half_life / math.log(2) * (1.0 - decay)
        for used in self._used.values():
            for r in range(3):
                used[r] *= decay
        for r in range(3):
            self._capacity[r] = self._capacity[r] * decay + capacity[r] * weight
        for q, amounts in allocated.items():
            used = self._used.setdefault(q, [0.0, 0.0, 0.0])
            for r in range(3):
                used[r] += amounts[r] * weight
        self.t = now

    def usage(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for q in sorted(self._used):
            used = self._used[q]
            out[q] = {
                RESOURCES[r]: (used[r] / self._capacity[r] if self._capacity[r] > 0 else 0.0)
                for r in range(3)
            }
        return out
