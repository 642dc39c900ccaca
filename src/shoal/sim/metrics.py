"""Simulation metrics: time series sampled on the virtual clock, per-job outcomes, and summaries
(wait time and JCT per queue: mean, p50, p90, p99; allocation, useful utilisation, evictions).

Wait time = first start - arrival (jobs never started are reported as `unstarted` and, for the
censored statistics, waited until the end of the run). JCT = finish - arrival, finished jobs only.
Useful utilisation counts only GPU time of runs that were not evicted later (lost work excluded).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shoal.sim.cluster import RUNNING, SimCluster, SimJob
from shoal.sim.workload import MILLI, JobSpec

try:  # fragmentation is an optional measure: the policy module may be absent or change shape
    from shoal.policy.fragmentation import TypicalPods, node_fragment
except ImportError:  # pragma: no cover - depends on another engineer's module
    TypicalPods = None  # type: ignore[assignment,misc]
    node_fragment = None  # type: ignore[assignment]


@dataclass(slots=True)
class TimeSeries:
    t: list[float] = field(default_factory=list)
    allocated_gpus: list[float] = field(default_factory=list)
    pending_gangs: list[int] = field(default_factory=list)
    pending_gpus: list[float] = field(default_factory=list)
    running_gangs: list[int] = field(default_factory=list)
    fragmented_gpus: list[float] = field(default_factory=list)
    queue_allocated: dict[str, list[float]] = field(default_factory=dict)
    queue_fair_share: dict[str, list[float]] = field(default_factory=dict)
    queue_pending: dict[str, list[float]] = field(default_factory=dict)


def typical_pods(jobs: list[JobSpec]) -> Any:
    """The workload's pod-shape distribution (CPU, GPU milli per device, devices) for the FGD measure."""
    if TypicalPods is None or not jobs:
        return None
    shapes: Counter[tuple[int, int, int]] = Counter()
    for j in jobs:
        if j.gpu_milli >= MILLI:
            shapes[(j.cpu_milli, MILLI, j.gpu_milli // MILLI)] += j.pods
        else:
            shapes[(j.cpu_milli, j.gpu_milli, 1 if j.gpu_milli else 0)] += j.pods
    keys = sorted(shapes)
    total = sum(shapes.values())
    return TypicalPods(
        cpu_milli=np.array([k[0] for k in keys], dtype=np.int64),
        milli=np.array([k[1] for k in keys], dtype=np.int64),
        count=np.array([k[2] for k in keys], dtype=np.int64),
        allowed=np.ones((len(keys), 1), dtype=bool),
        freq=np.array([shapes[k] / total for k in keys], dtype=np.float64),
    )


class Collector:
    """Samples the cluster; the simulation calls `sample` at every sample event."""

    def __init__(self, cluster: SimCluster, queues: list[str], typical: Any) -> None:
        self.cluster = cluster
        self.queues = queues
        self.series = TimeSeries()
        for q in queues:
            self.series.queue_allocated[q] = []
            self.series.queue_fair_share[q] = []
            self.series.queue_pending[q] = []
        self.fair_share: dict[str, float] = {}
        self.typical = typical
        self.max_devices = max((n.gpu_count for n in cluster.nodes), default=0)
        self.node_index = {n.name: i for i, n in enumerate(cluster.nodes)}
        self.node_cpu = np.array([n.allocatable.get("cpu", 0) for n in cluster.nodes], dtype=np.int64)
        self.node_gpus = np.array([n.gpu_count for n in cluster.nodes], dtype=np.int64)

    def sample(self, now: float) -> None:
        s, c = self.series, self.cluster
        s.t.append(now)
        s.allocated_gpus.append(c.allocated_gpu_milli() / MILLI)
        pending: defaultdict[str, float] = defaultdict(float)
        pend_gangs = running = 0
        for job in c.jobs.values():
            if job.state == RUNNING:
                running += 1
            elif job.bound == 0 and job.state != "releasing":
                pend_gangs += 1
                pending[job.spec.queue] += job.spec.total_gpu_milli / MILLI
        s.pending_gangs.append(pend_gangs)
        s.running_gangs.append(running)
        s.pending_gpus.append(sum(pending.values()))
        for q in self.queues:
            s.queue_allocated[q].append(c.queue_gpu_milli.get(q, 0) / MILLI)
            # With nothing pending every queue's request is its allocation, which is then exactly its
            # fair share (the core is not run on idle cycles, so its last value would be stale).
            fs = c.queue_gpu_milli.get(q, 0) if c.pending_jobs <= 0 else self.fair_share.get(q, 0.0)
            s.queue_fair_share[q].append(fs / MILLI)
            s.queue_pending[q].append(pending.get(q, 0.0))
        s.fragmented_gpus.append(self._fragmentation())

    def _fragmentation(self) -> float:
        """FGD fragmentation (GPUs) of the whole cluster against the workload's pod shapes."""
        if self.typical is None or node_fragment is None or self.max_devices == 0:
            return float("nan")
        n = len(self.cluster.nodes)
        free = np.zeros((n, self.max_devices), dtype=np.int64)
        dev = np.arange(self.max_devices)[None, :]
        free[dev < self.node_gpus[:, None]] = MILLI
        cpu_left = self.node_cpu.copy()
        whole_used = np.zeros(n, dtype=np.int64)
        shared: dict[tuple[int, str], int] = defaultdict(int)
        for p in self.cluster.bound_pods():
            i = self.node_index[p.node]  # type: ignore[index]
            cpu_left[i] -= p.cpu_milli
            if p.gpu.whole:
                whole_used[i] += p.gpu.whole
            for g in p.gpu_groups:
                shared[(i, g)] += p.gpu.portion_milli
        # Whole GPUs take the last devices, shared groups the first ones: only totals per node matter.
        for i in (int(x) for x in np.nonzero(whole_used)[0]):
            free[i, max(self.node_gpus[i] - whole_used[i], 0) : self.node_gpus[i]] = 0
        slot: Counter[int] = Counter()
        for (i, _g), used in sorted(shared.items()):
            d = slot[i]
            slot[i] += 1
            if d < self.max_devices:
                free[i, d] = max(free[i, d] - used, 0)
        frag = node_fragment(free, cpu_left, np.zeros(n, dtype=np.int64), self.typical)
        return float(frag.sum()) / MILLI


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {
            "count": 0,
            "mean": float("nan"),
            "p50": float("nan"),
            "p90": float("nan"),
            "p99": float("nan"),
        }
    a = np.asarray(values, dtype=np.float64)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {
        "count": len(values),
        "mean": float(a.mean()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
    }


def job_records(jobs: list[SimJob]) -> list[dict[str, Any]]:
    out = []
    for j in sorted(jobs, key=lambda j: (j.spec.arrival, j.uid)):
        s = j.spec
        out.append(
            {
                "name": j.uid,
                "queue": s.queue,
                "arrival": s.arrival,
                "gpus": s.total_gpu_milli / MILLI,
                "pods": s.pods,
                "duration": s.duration,
                "first_start": j.first_start,
                "finish": j.finish,
                "wait": None if j.first_start is None else j.first_start - s.arrival,
                "jct": None if j.finish is None else j.finish - s.arrival,
                "evictions": j.evictions,
            }
        )
    return out


def summarize(records: list[dict[str, Any]], queues: list[str], end: float) -> dict[str, Any]:
    """Per-queue and overall wait/JCT statistics."""
    per: dict[str, Any] = {}
    for q in [*queues, "ALL"]:
        rs = [r for r in records if q == "ALL" or r["queue"] == q]
        waits = [r["wait"] for r in rs if r["wait"] is not None]
        censored = [r["wait"] if r["wait"] is not None else end - r["arrival"] for r in rs]
        per[q] = {
            "jobs": len(rs),
            "started": len(waits),
            "finished": sum(1 for r in rs if r["jct"] is not None),
            "unstarted": len(rs) - len(waits),
            "wait": _stats(waits),
            "wait_censored": _stats(censored),
            "jct": _stats([r["jct"] for r in rs if r["jct"] is not None]),
            "evictions": sum(r["evictions"] for r in rs),
        }
    return per
