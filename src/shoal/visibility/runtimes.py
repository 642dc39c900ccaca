"""How long a job runs: what the start-time forecast assumes about running and waiting jobs.

Sources, first match wins (`RuntimeEstimator.estimate` returns which one it used):

1. `annotation` — the job says so: `shoal.dev/expected-runtime: 2h` on its PodGroup (or pod);
2. `learned` — jobs of the same owner kind and queue that finished before (at least
   `min_samples`): the median of their run times; for a job that has already run `elapsed`
   seconds, the median of the *remaining* time of the finished jobs that ran longer than that
   (the conditional median residual life), so a long-running job is not predicted to end now;
3. `queue-default` — a per-queue default (`shoal.dev/default-runtime` on the Queue, or the
   service's `--eta-queue-runtime QUEUE=DURATION`);
4. `default` — the service-wide default (`--eta-default-runtime`, 1 h).

A job that has outlived its annotation or its default is given another `overrun_fraction` of its
elapsed time (it is clearly longer than said). Contract: pure; the samples are bounded per key.
"""

from __future__ import annotations

import bisect
import contextlib
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shoal.kai.units import parse_duration

EXPECTED_RUNTIME_ANNOTATION = "shoal.dev/expected-runtime"
DEFAULT_RUNTIME_ANNOTATION = "shoal.dev/default-runtime"

#: (owner kind, queue): the population a learned estimate comes from.
JobKind = tuple[str, str]


@dataclass(slots=True)
class JobFacts:
    """What the estimator knows about one job."""

    key: JobKind
    #: From the job's own annotation (seconds), if any.
    declared: float | None = None


@dataclass(slots=True)
class RuntimeEstimator:
    default: float = 3600.0
    queue_defaults: dict[str, float] = field(default_factory=dict)
    min_samples: int = 3
    window: int = 500
    overrun_fraction: float = 0.5
    _samples: dict[JobKind, deque[float]] = field(default_factory=dict)
    _sorted: dict[JobKind, list[float]] = field(default_factory=dict)

    def observe(self, key: JobKind, runtime: float) -> None:
        """A job of `key` ran `runtime` seconds to completion."""
        if runtime <= 0:
            return
        q = self._samples.setdefault(key, deque(maxlen=self.window))
        q.append(float(runtime))
        self._sorted.pop(key, None)

    def samples(self, key: JobKind) -> list[float]:
        s = self._sorted.get(key)
        if s is None:
            s = sorted(self._samples.get(key, ()))
            self._sorted[key] = s
        return s

    def export(self) -> list[list[Any]]:
        """The learned samples as `[[owner kind, queue, [run times (0.1 s), oldest first]], ...]` (JSON)."""
        return [[kind, queue, [round(r, 1) for r in q]] for (kind, queue), q in sorted(self._samples.items()) if q]

    def restore(self, state: list[list[Any]]) -> int:
        """Add samples exported by `export` (a restarted or new leader's), before the ones observed
        since, keeping the newest `window` per key; returns how many were taken. Raises ValueError or
        TypeError on a malformed state."""
        taken = 0
        for kind, queue, runtimes in state:
            key = (str(kind), str(queue))
            old = [float(r) for r in runtimes if float(r) > 0]
            merged = deque(old + list(self._samples.get(key, ())), maxlen=self.window)
            self._samples[key] = merged
            self._sorted.pop(key, None)
            taken += len(old)
        return taken

    def estimate(self, facts: JobFacts, elapsed: float = 0.0) -> tuple[float, str]:
        """(expected remaining seconds, source) for a job that has run `elapsed` seconds."""
        if facts.declared is not None:
            return self._left(facts.declared, elapsed), "annotation"
        s = self.samples(facts.key)
        if len(s) >= self.min_samples:
            i = bisect.bisect_right(s, elapsed)
            longer = s[i:]
            if longer:
                return longer[len(longer) // 2] - elapsed, "learned"
            return max(elapsed * self.overrun_fraction, 60.0), "learned"
        queue = facts.key[1]
        if queue in self.queue_defaults:
            return self._left(self.queue_defaults[queue], elapsed), "queue-default"
        return self._left(self.default, elapsed), "default"

    def _left(self, total: float, elapsed: float) -> float:
        return total - elapsed if total > elapsed else max(elapsed * self.overrun_fraction, 60.0)


def podgroup_facts(uid: str, obj: dict[str, Any] | None, queue: str) -> JobFacts:
    """A job's facts from its PodGroup object (owner kind, `shoal.dev/expected-runtime`); a gang
    without one (a bare pod, `pod:<uid>`) is of kind `Pod`. A bad duration is ignored."""
    m = (obj or {}).get("metadata") or {}
    owners = m.get("ownerReferences") or []
    if owners:
        kind = str(owners[0].get("kind") or "PodGroup")
    else:
        kind = "Pod" if uid.startswith("pod:") else "PodGroup"
    declared = None
    raw = (m.get("annotations") or {}).get(EXPECTED_RUNTIME_ANNOTATION)
    if raw:
        with contextlib.suppress(ValueError):
            declared = parse_duration(str(raw))
    return JobFacts((kind, queue), declared)


def queue_defaults(queues: Iterable[dict[str, Any]]) -> dict[str, float]:
    """`shoal.dev/default-runtime` of each Queue object that has a valid one."""
    out = {}
    for obj in queues:
        m = obj.get("metadata") or {}
        raw = (m.get("annotations") or {}).get(DEFAULT_RUNTIME_ANNOTATION)
        if raw:
            with contextlib.suppress(ValueError):
                out[str(m.get("name"))] = parse_duration(str(raw))
    return out


@dataclass(slots=True)
class RuntimeFacts:
    """Facts of every PodGroup in a list of objects, and the queues' defaults."""

    podgroups: dict[str, dict[str, Any]]
    queue_defaults: dict[str, float]

    def job(self, uid: str, queue: str = "") -> JobFacts:
        obj = self.podgroups.get(uid)
        if obj is not None and not queue:
            queue = str((obj.get("spec") or {}).get("queue") or "")
        return podgroup_facts(uid, obj, queue)


def runtime_facts(objects: dict[str, list[dict[str, Any]]]) -> RuntimeFacts:
    """From exported objects (`podGroups`, `queues`), keyed like the scheduler's gangs (`ns/name`)."""
    pgs = {f"{(o.get('metadata') or {}).get('namespace')}/{(o.get('metadata') or {}).get('name')}": o
           for o in objects.get("podGroups", [])}
    return RuntimeFacts(pgs, queue_defaults(objects.get("queues", [])))
