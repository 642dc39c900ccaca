"""Prometheus metrics on a par with KAI's (KAI's docs/metrics/METRICS.md), from each cycle.

* `shoal_time_to_bind_seconds{queue}` — pod creation to the bind decision (KAI:
  `task_scheduling_latency_milliseconds`, without a queue label);
* `shoal_action_latency_seconds{action}`, `shoal_session_latency_seconds{phase}` (open, close) — KAI:
  `action_scheduling_latency_milliseconds`, `open|close_session_latency_milliseconds`;
* `shoal_queue_quota|limit|weight|usage{queue,resource}` (-1 = unlimited; usage is the time-decayed
  share of time-based fair share) — KAI: `queue_quota_*`, `queue_deserved_gpus`, `queue_*_usage`;
  with `shoal_queue_fair_share|allocated|requested` of `shoal.kube.metrics` and
  `shoal_queue_allocated_fractional_gpus{queue}`;
* `shoal_pending_gangs_by_reason{queue,reason}` — reason: the first cause `shoal explain` names
  (`queue-limit`, `fragmentation`, `topology`, ...; KAI's reason code for gangs past the analysed
  first 200); KAI has none.

Units are Prometheus' base units: GPU devices, CPU cores, memory bytes, seconds.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram

from shoal.framework.decisions import Bind
from shoal.model.snapshot import ClusterSnapshot

RESOURCES = ("gpu", "cpu", "memory")
_BIND_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
_ACTION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class ParityMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.time_to_bind = Histogram("shoal_time_to_bind_seconds", "Pod creation to the scheduler's bind decision",
                                      ["queue"], buckets=_BIND_BUCKETS, registry=r)
        self.action_latency = Histogram("shoal_action_latency_seconds", "Time one action takes in a cycle",
                                        ["action"], buckets=_ACTION_BUCKETS, registry=r)
        self.session_latency = Histogram("shoal_session_latency_seconds", "Session open / close time",
                                         ["phase"], buckets=_ACTION_BUCKETS, registry=r)
        self.quota = Gauge("shoal_queue_quota", "Queue quota (-1 = none)", ["queue", "resource"], registry=r)
        self.limit = Gauge("shoal_queue_limit", "Queue limit (-1 = none)", ["queue", "resource"], registry=r)
        self.weight = Gauge("shoal_queue_weight", "Queue over-quota weight", ["queue", "resource"], registry=r)
        self.usage = Gauge("shoal_queue_usage", "Time-decayed usage share (time-based fair share)",
                           ["queue", "resource"], registry=r)
        self.fractional = Gauge("shoal_queue_allocated_fractional_gpus", "GPUs held by GPU-sharing pods",
                                ["queue"], registry=r)
        self.pending_by_reason = Gauge("shoal_pending_gangs_by_reason", "Pending gangs by their first cause",
                                       ["queue", "reason"], registry=r)
        self._queues: set[str] = set()
        self._reasons: set[tuple[str, str]] = set()

    def binds(self, binds: list[Bind], snapshot: ClusterSnapshot, queue_of: dict[str, str]) -> None:
        """Observe time-to-bind of this cycle's binds (pod creation time from the snapshot)."""
        if not binds:
            return
        created = {p.uid: p.creation for p in snapshot.pods}
        for b in binds:
            c = created.get(b.pod)
            if c:
                self.time_to_bind.labels(queue_of.get(b.job, "")).observe(max(snapshot.now - c, 0.0))

    def report(self, report: dict[str, Any]) -> None:
        """Queue gauges and pending gangs by reason from a scheduling report."""
        seen: set[str] = set()
        for q in report.get("queues", []):
            name = q["name"]
            seen.add(name)
            for res in RESOURCES:
                r = q[res]
                self.quota.labels(name, res).set(-1 if r["quota"] is None else r["quota"])
                self.limit.labels(name, res).set(-1 if r["limit"] is None else r["limit"])
                self.weight.labels(name, res).set(r["weight"])
                if "usage" in r:
                    self.usage.labels(name, res).set(r["usage"])
            self.fractional.labels(name).set(q["gpu"]["allocatedFractional"])
        for gone in self._queues - seen:
            for g in (self.quota, self.limit, self.weight, self.usage):
                for res in RESOURCES:
                    with contextlib.suppress(KeyError):
                        g.remove(gone, res)
            with contextlib.suppress(KeyError):
                self.fractional.remove(gone)
        self._queues = seen
        counts: Counter[tuple[str, str]] = Counter()
        for e in report.get("pending", []):
            blockers = e.get("blockers") or []
            reason = blockers[0]["kind"] if blockers else (e["reasons"][0] if e.get("reasons") else "Unknown")
            counts[(e["queue"], reason)] += 1
        for key in self._reasons - set(counts):
            with contextlib.suppress(KeyError):
                self.pending_by_reason.remove(*key)
        for key, n in counts.items():
            self.pending_by_reason.labels(*key).set(n)
        self._reasons = set(counts)
