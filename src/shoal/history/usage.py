"""Historical queue usage for time-based fair share (kai-spec §4.3), as `ClusterSnapshot.usage`.

Whoever drives the cycles (the simulator on its virtual clock, the live service on wall time)
records allocation samples; `usage(now)` is the snapshot's `usage`, which the proportion plugin
reads. Usage of queue q in resource r over the window W:

    U_q,r = ∫_W d(s) a_q,r(s) ds / ∫_W d(s) c_r(s) ds,   d(s) = 0.5 ** ((now - s) / half_life)

with a the queue's allocation and c the cluster capacity, both piecewise constant between
records (each holds until the next one, the last until `now`), so every interval is integrated
exactly. Without a half-life d = 1 (plain average share). A `sliding` window (KAI's default,
and what KAI's time-based fair-share simulator measures) is the last `window` seconds before
`now`; a `tumbling` one starts at the last multiple of `window` and so forgets everything at once.
0 <= U <= 1 when allocations never exceed capacity.

Both windows cost O(queues) per call, whatever the number of records. The store keeps the
running decayed integral R(t) = ∫_{-inf}^t d_t(s) a(s) ds (multiplied by the decay of the elapsed
time, plus the new interval's exact integral). A tumbling window restarts R at its boundary. A
sliding window also keeps, for each record in the window, the time, what was held from then on,
and R at that time: the part of R older than the window start S = now - W is decay(W) * R(S), and
R(S) is one interval's step from the record before S (found by bisection). Time only moves forward.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from shoal.model.durations import parse_duration
from shoal.model.resources import MILLI
from shoal.model.snapshot import ClusterSnapshot
from shoal.model.status import ALLOCATED

#: Resource names of the usage mapping (the queue accounting columns).
RESOURCES = ("gpu", "cpu", "memory")
WEEK = 7 * 24 * 3600.0
#: The capacity's key in the running integrals (not a queue name: queue names are DNS labels).
_CAP = "/capacity"

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

    @classmethod
    def from_kai(cls, raw: Mapping[str, Any] | None) -> UsageParams:
        """KAI's `usageDBConfig.usageParams` with KAI's defaults (`UsageParams.SetDefaults`):
        `windowSize` 1 week, `windowType` sliding, `halfLifePeriod` absent or <= 0 = no decay.
        Raises ValueError naming the field (cron windows are not supported)."""
        raw = raw or {}
        try:
            window = parse_duration(raw.get("windowSize", WEEK))
            half = parse_duration(raw.get("halfLifePeriod", 0))
        except ValueError as err:
            raise ValueError(f"usageParams: {err}") from None
        return cls(window, str(raw.get("windowType", "sliding")), half if half > 0 else None)


@dataclass(slots=True)
class _Mark:
    """A record of a sliding window: from `t` on `held` was held; `run` = R(t)."""

    t: float
    held: dict[str, Vector3]
    run: dict[str, Vector3]


def _vector(v: Vector3 | tuple[float, ...] | list[float]) -> Vector3:
    return (float(v[0]), float(v[1]), float(v[2]))


class UsageHistory:
    """The `UsageStore` of both adapters (see the module docstring for the integration)."""

    def __init__(self, params: UsageParams | None = None) -> None:
        self.params = params or UsageParams()
        self.t = -math.inf
        self._run: dict[str, Vector3] = {}  # R(t) per queue and `_CAP`
        self._held: dict[str, Vector3] = {}  # held since t, capacity under `_CAP`
        self.samples: list[_Mark] = []  # sliding only: the records of the window

    def record(self, now: float, allocated: Mapping[str, Vector3], capacity: Vector3) -> None:
        if now < self.t:
            raise ValueError(f"usage record at {now} is older than the last one ({self.t})")
        self._advance(now)
        self._held = {q: _vector(v) for q, v in allocated.items()}
        self._held[_CAP] = _vector(capacity)
        if self.params.window_type != "sliding":
            return
        if self.samples and now == self.samples[-1].t:
            self.samples.pop()  # the newer state replaces one recorded at the same instant
        self.samples.append(_Mark(now, dict(self._held), dict(self._run)))
        start = now - self.params.window
        # Drop records that ended before the window (the one spanning its start stays).
        drop = 0
        while drop + 1 < len(self.samples) and self.samples[drop + 1].t <= start:
            drop += 1
        del self.samples[:drop]

    def usage(self, now: float) -> dict[str, dict[str, float]]:
        self._advance(now)
        run = self._run
        if self.params.window_type == "sliding" and math.isfinite(self.params.window):
            old = self._run_at(now - self.params.window)
            keep = self._decay(self.params.window)
            zero = (0.0, 0.0, 0.0)
            run = {q: (v[0] - keep * old.get(q, zero)[0], v[1] - keep * old.get(q, zero)[1],
                       v[2] - keep * old.get(q, zero)[2]) for q, v in run.items()}
        cap = run.get(_CAP, (0.0, 0.0, 0.0))
        return {q: {RESOURCES[r]: (max(0.0, v[r]) / cap[r] if cap[r] > 0 else 0.0) for r in range(3)}
                for q, v in sorted(run.items()) if q != _CAP}

    def _advance(self, now: float) -> None:
        """R(t) -> R(now): decay what was, add the exact integral of what was held over (t, now]."""
        if now <= self.t:
            return
        start, window = self.t, self.params.window
        if start == -math.inf:
            self.t = now  # nothing was held before the first record
            return
        if (self.params.window_type == "tumbling" and math.isfinite(window)
                and math.floor(now / window) > math.floor(start / window)):
            self._run = {}
            start = math.floor(now / window) * window
        self._run = _step(self._run, self._held, now - start, self._decay, self._weight)
        self.t = now

    def _run_at(self, s: float) -> dict[str, Vector3]:
        """R(s) for s in the sliding window's records' span (empty before the first record)."""
        k = bisect.bisect_right([m.t for m in self.samples], s) - 1
        if k < 0:
            return {}
        mark = self.samples[k]
        return _step(mark.run, mark.held, s - mark.t, self._decay, self._weight)

    def _decay(self, dt: float) -> float:
        h = self.params.half_life
        return 1.0 if h is None else float(0.5 ** (dt / h))

    def _weight(self, dt: float) -> float:
        """∫ of the decay over the last dt: h / ln 2 * (1 - decay(dt)), dt without a half-life."""
        h = self.params.half_life
        return dt if h is None else h / math.log(2) * (1.0 - self._decay(dt))

    # -- persistence -----------------------------------------------------------------------
    def export(self, max_marks: int = 512) -> dict[str, Any]:
        """A JSON-able state for `restore` (the live service persists it so that usage survives
        restarts and leader failover). A tumbling store's state is exact; a sliding window's
        records are merged into at most `max_marks` equal spans holding their time-average
        (exact without a half-life; with one, off by at most the decay across one span)."""
        state: dict[str, Any] = {"t": self.t if math.isfinite(self.t) else None,
                                 "held": {q: list(v) for q, v in sorted(self._held.items())}}
        if self.params.window_type == "sliding":
            state["marks"] = _compact(self.samples, self.t, max_marks)
        else:
            state["run"] = {q: list(v) for q, v in sorted(self._run.items())}
        return state

    @classmethod
    def restore(cls, params: UsageParams, state: Mapping[str, Any]) -> UsageHistory:
        """The store `export` described. A sliding window's records are replayed: the integral
        older than the first one is missing from both R(now) and R(now - window), so the window's
        share is unchanged. Raises ValueError, KeyError or TypeError on a malformed state."""
        h = cls(params)
        if params.window_type == "sliding":
            for t, held in state["marks"]:
                h.record(float(t), {str(q): _vector(v) for q, v in held.items() if q != _CAP},
                         _vector(held.get(_CAP, (0.0, 0.0, 0.0))))
        else:
            h._run = {str(q): _vector(v) for q, v in state["run"].items()}
        if state.get("t") is not None:
            h._advance(float(state["t"]))
            h.t = float(state["t"])
        h._held = {str(q): _vector(v) for q, v in state["held"].items()}
        return h


def _compact(marks: list[_Mark], end: float, max_marks: int) -> list[list[Any]]:
    """Records as [t, held] pairs, merged into `max_marks` equal spans of [first, end] if more."""
    def row(t: float, held: Mapping[str, Vector3]) -> list[Any]:
        return [t, {q: [round(x, 3) for x in v] for q, v in sorted(held.items())}]

    if len(marks) <= max_marks or not end > marks[0].t:
        return [row(m.t, m.held) for m in marks]
    t0 = marks[0].t
    width = (end - t0) / max_marks
    spans: list[dict[str, list[float]]] = [{} for _ in range(max_marks)]
    for k, m in enumerate(marks):
        a, b = m.t, marks[k + 1].t if k + 1 < len(marks) else end
        while b > a:
            i = min(int((a - t0) / width), max_marks - 1)
            cut = min(b, t0 + (i + 1) * width) if i < max_marks - 1 else b
            for q, v in m.held.items():
                acc = spans[i].setdefault(q, [0.0, 0.0, 0.0])
                for r in range(3):
                    acc[r] += v[r] * (cut - a) / width
            a = cut
    return [row(t0 + i * width, {q: _vector(v) for q, v in span.items()}) for i, span in enumerate(spans)]


def _step(run: Mapping[str, Vector3], held: Mapping[str, Vector3], dt: float,
          decay_of: Any, weight_of: Any) -> dict[str, Vector3]:
    """R after `dt` more seconds of `held`: R * decay(dt) + held * ∫ decay."""
    decay, weight = decay_of(dt), weight_of(dt)
    out = {q: (v[0] * decay, v[1] * decay, v[2] * decay) for q, v in run.items()}
    for q, v in held.items():
        o = out.get(q, (0.0, 0.0, 0.0))
        out[q] = (o[0] + v[0] * weight, o[1] + v[1] * weight, o[2] + v[2] * weight)
    return out


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
