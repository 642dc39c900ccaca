"""Historical queue usage for time-based fair share (kai-spec §4.3), as `ClusterSnapshot.usage`.

Whoever drives the cycles (the simulator on its virtual clock, the live service on wall time)
records allocation samples; `usage(now)` is the snapshot's `usage`, which the proportion plugin
reads. Usage of queue q in resource r over the window W:

    U_q,r = ∫_W d(s) a_q,r(s) ds / ∫_W d(s) c_r(s) ds,   d(s) = 0.5 ** ((now - s) / half_life)

with a the queue's allocation and c the cluster capacity, both piecewise constant between
records (each holds until the next one, the last until `now`), so every interval is integrated
exactly. Without a half-life d = 1 (plain average share). A `tumbling` window starts at the last
multiple of `window` (KAI's; the simulator's choice), a `sliding` one `window` seconds before
`now`. 0 <= U <= 1 when allocations never exceed capacity.

One store, two ways to integrate, chosen by the window type: a tumbling window only ever grows
until it restarts, so the store keeps the two decayed integrals and updates them in O(queues)
per call (both are multiplied by the decay of the elapsed time and the new interval's exact
integral is added; a week-long simulation asks every simulated minute). A sliding window forgets
its oldest interval continuously, so the store keeps the samples of the window and integrates
them on each call. Time only moves forward.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from shoal.model.resources import MILLI
from shoal.model.snapshot import ClusterSnapshot
from shoal.model.status import ALLOCATED

#: Resource names of the usage mapping (the queue accounting columns).
RESOURCES = ("gpu", "cpu", "memory")
WEEK = 7 * 24 * 3600.0

Vector3 = tuple[float, float, float]


class UsageStore(Protocol):
    """Where allocation history goes in and normalised usage comes out."""

    def record(self, now: float, allocated: Mapping[str, Vector3], capacity: Vector3) -> None:
        """From `now` on, queue q holds `allocated[q]` (GPU milli, CPU milli, memory bytes; missing
        queues hold nothing) of a cluster of `capacity`."""

    def usage(self, now: float) -> dict[str, dict[str, float]]:
        """Per queue and resource (`gpu`, `cpu`, `memory`), the decayed share of capacity used."""


@dataclass(frozen=True, slots=True)
class UsageParams:
    """KAI `usageParams`: window size (seconds, `inf` = no window) and type, optional half-life."""

    window: float = WEEK
    window_type: str = "sliding"
    half_life: float | None = None

    def __post_init__(self) -> None:
        if not self.window > 0:
            raise ValueError(f"usage window must be > 0 seconds, got {self.window}")
        if self.window_type not in ("sliding", "tumbling"):
            raise ValueError(f"usage window type {self.window_type!r}: expected sliding or tumbling")
        if self.half_life is not None and not self.half_life > 0:
            raise ValueError(f"usage half-life must be > 0 seconds, got {self.half_life}")


@dataclass(slots=True)
class _Sample:
    t: float
    allocated: dict[str, Vector3]
    capacity: Vector3


def _vector(v: Vector3 | tuple[float, ...]) -> Vector3:
    return (float(v[0]), float(v[1]), float(v[2]))


class UsageHistory:
    """The `UsageStore` of both adapters (see the module docstring for the two integrations)."""

    def __init__(self, params: UsageParams | None = None) -> None:
        self.params = params or UsageParams()
        self.t = -math.inf
        # tumbling: running integrals and the state that holds since `t`
        self._used: dict[str, list[float]] = {}
        self._capacity = [0.0, 0.0, 0.0]
        self._alloc: dict[str, Vector3] = {}
        self._cap: Vector3 = (0.0, 0.0, 0.0)
        # sliding: the samples of the window
        self.samples: list[_Sample] = []

    def record(self, now: float, allocated: Mapping[str, Vector3], capacity: Vector3) -> None:
        if now < self.t:
            raise ValueError(f"usage record at {now} is older than the last one ({self.t})")
        alloc = {q: _vector(v) for q, v in allocated.items()}
        if self.params.window_type == "tumbling":
            self._advance(now)
            self._alloc, self._cap = alloc, _vector(capacity)
            return
        self.t = now
        if self.samples and now == self.samples[-1].t:
            self.samples.pop()  # the newer state replaces one recorded at the same instant
        self.samples.append(_Sample(now, alloc, _vector(capacity)))
        start = now - self.params.window
        # Drop samples that ended before the window (the one spanning its start stays).
        while len(self.samples) > 1 and self.samples[1].t <= start:
            self.samples.pop(0)

    def usage(self, now: float) -> dict[str, dict[str, float]]:
        if self.params.window_type == "tumbling":
            self._advance(now)
            return _shares(self._used, self._capacity)
        return self._sliding_usage(now)

    # -- tumbling --------------------------------------------------------------------------
    def _advance(self, now: float) -> None:
        """Integrate the current state over (t, now]."""
        if now <= self.t:
            return
        start, window = self.t, self.params.window
        if start == -math.inf:
            self.t = now  # nothing was held before the first record
            return
        if math.isfinite(window) and math.floor(now / window) > math.floor(start / window):
            self._used.clear()
            self._capacity = [0.0, 0.0, 0.0]
            start = math.floor(now / window) * window
        decay, weight = self._decay_and_weight(now - start)
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

    def _decay_and_weight(self, dt: float) -> tuple[float, float]:
        """(d(now - dt), ∫ of d over the last dt): h / ln 2 * (1 - decay) with a half-life."""
        h = self.params.half_life
        if h is None:
            return 1.0, dt
        decay = 0.5 ** (dt / h)
        return decay, h / math.log(2) * (1.0 - decay)

    # -- sliding ---------------------------------------------------------------------------
    def _weight(self, now: float, a: float, b: float) -> float:
        """∫_a^b 0.5 ** ((now - s) / half_life) ds (b - a without a half-life)."""
        h = self.params.half_life
        if h is None:
            return b - a
        return float(h / math.log(2) * (0.5 ** ((now - b) / h) - 0.5 ** ((now - a) / h)))

    def _sliding_usage(self, now: float) -> dict[str, dict[str, float]]:
        start = now - self.params.window
        used: dict[str, list[float]] = {}
        cap = [0.0, 0.0, 0.0]
        for k, s in enumerate(self.samples):
            end = self.samples[k + 1].t if k + 1 < len(self.samples) else now
            a, b = max(s.t, start), min(end, now)
            if b <= a:
                continue
            w = self._weight(now, a, b)
            for r in range(3):
                cap[r] += s.capacity[r] * w
            for q, v in s.allocated.items():
                acc = used.setdefault(q, [0.0, 0.0, 0.0])
                for r in range(3):
                    acc[r] += v[r] * w
        return _shares(used, cap)


def _shares(used: Mapping[str, list[float]], cap: list[float]) -> dict[str, dict[str, float]]:
    return {q: {RESOURCES[r]: (acc[r] / cap[r] if cap[r] > 0 else 0.0) for r in range(3)}
            for q, acc in sorted(used.items())}


def allocation_sample(snapshot: ClusterSnapshot) -> tuple[dict[str, Vector3], Vector3]:
    """What to `record` for a snapshot: per queue (leaf and every ancestor) the allocated
    resources of its pods (GPU quota milli incl. fractions and MIG slices, CPU milli, memory
    bytes), and the capacity of ready nodes in the same units."""
    parents = {q.name: q.parent for q in snapshot.queues}
    queue_of = {pg.uid: pg.queue for pg in snapshot.podgroups}
    used: dict[str, list[float]] = {}
    for pod in snapshot.pods:
        q: str | None = queue_of.get(pod.job)
        if q is None or not pod.status & ALLOCATED:
            continue
        seen: set[str] = set()
        while q and q not in seen:
            seen.add(q)
            acc = used.setdefault(q, [0.0, 0.0, 0.0])
            acc[0] += pod.gpu_quota_milli
            acc[1] += pod.cpu_milli
            acc[2] += pod.memory
            q = parents.get(q)
    cap = [0.0, 0.0, 0.0]
    for node in snapshot.nodes:
        if node.ready:
            cap[0] += node.allocatable.get("nvidia.com/gpu", 0) * MILLI
            cap[1] += node.allocatable.get("cpu", 0)
            cap[2] += node.allocatable.get("memory", 0)
    return ({q: (v[0], v[1], v[2]) for q, v in sorted(used.items())}, (cap[0], cap[1], cap[2]))
