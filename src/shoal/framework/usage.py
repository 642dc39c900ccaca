"""Historical queue usage for time-based fair share (kai-spec §4.3).

The core never reads clocks or databases: a `UsageStore` is fed allocation samples by whoever
drives the cycles (the simulator on its virtual clock, the Kubernetes service on wall time) and
its `usage(now)` becomes `ClusterSnapshot.usage`, which the proportion plugin reads.

Usage of queue q in resource r over the window W = [now - window, now]:

    U_q,r = ∫_W d(s) a_q,r(s) ds / ∫_W d(s) c_r(s) ds,   d(s) = 0.5 ** ((now - s) / half_life)

with a the queue's allocation and c the cluster capacity, both piecewise constant between
samples (each sample holds until the next one, the last until `now`), so every interval is
integrated exactly. Without a half-life d = 1 (plain average share). `window_type` `sliding`
looks back `window` seconds from `now`; `tumbling` starts at the last multiple of `window`.
0 <= U <= 1 when allocations never exceed capacity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    """KAI `usageParams`: window size and type, optional half-life (seconds)."""

    window: float = WEEK
    window_type: str = "sliding"
    half_life: float | None = None

    def __post_init__(self) -> None:
        if self.window <= 0:
            raise ValueError(f"usage window must be > 0 seconds, got {self.window}")
        if self.window_type not in ("sliding", "tumbling"):
            raise ValueError(f"usage window type {self.window_type!r}: expected sliding or tumbling")
        if self.half_life is not None and self.half_life <= 0:
            raise ValueError(f"usage half-life must be > 0 seconds, got {self.half_life}")


@dataclass(slots=True)
class _Sample:
    t: float
    allocated: dict[str, Vector3]
    capacity: Vector3


@dataclass(slots=True)
class InMemoryUsageStore:
    """A `UsageStore` keeping the samples of the last window in memory."""

    params: UsageParams = field(default_factory=UsageParams)
    samples: list[_Sample] = field(default_factory=list)

    def record(self, now: float, allocated: Mapping[str, Vector3], capacity: Vector3) -> None:
        if self.samples and now < self.samples[-1].t:
            raise ValueError(f"usage sample at {now} is older than the last one ({self.samples[-1].t})")
        if self.samples and now == self.samples[-1].t:
            self.samples.pop()  # the newer state replaces one recorded at the same instant
        alloc = {q: (float(v[0]), float(v[1]), float(v[2])) for q, v in allocated.items()}
        self.samples.append(_Sample(now, alloc, (float(capacity[0]), float(capacity[1]), float(capacity[2]))))
        start = self._window_start(now)
        # Drop samples that ended before the window (the one spanning its start stays).
        while len(self.samples) > 1 and self.samples[1].t <= start:
            self.samples.pop(0)

    def _window_start(self, now: float) -> float:
        w = self.params.window
        if self.params.window_type == "tumbling":
            return math.floor(now / w) * w
        return now - w

    def _weight(self, now: float, a: float, b: float) -> float:
        """∫_a^b 0.5 ** ((now - s) / half_life) ds (b - a without a half-life)."""
        h = self.params.half_life
        if h is None:
            return b - a
        return float(h / math.log(2) * (0.5 ** ((now - b) / h) - 0.5 ** ((now - a) / h)))

    def usage(self, now: float) -> dict[str, dict[str, float]]:
        start = self._window_start(now)
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
