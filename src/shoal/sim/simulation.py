"""One simulation: the engine, the simulated cluster and the real scheduling core on a virtual clock.

Cycles run every `cycle_interval` seconds, but a cycle whose input cannot have changed is skipped
(no arrival, finish, release or decision since the last cycle): the core is deterministic, so
it would decide nothing new. `full_cycle_every` (seconds, 0 = never) forces a cycle anyway, for
policies that depend on the clock alone (min runtime, stale-gang grace periods).
A cycle with nothing pending is skipped too (every action needs a pending gang).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from shoal.cycle import paused_gc, run_cycle
from shoal.history.podmix import PodMixFeed
from shoal.history.usage import UsageHistory
from shoal.model import ClusterSnapshot, Queue, QueueResource
from shoal.sim.cluster import SimCluster, SimJob, make_job
from shoal.sim.engine import ARRIVAL, CYCLE, FINISH, RELEASE, SAMPLE, Engine
from shoal.sim.metrics import Collector, TimeSeries, job_records, summarize, typical_pods
from shoal.sim.scenario import Scenario
from shoal.sim.workload import MILLI

MAX_HORIZON = 60 * 86400.0


@dataclass(slots=True)
class SimResult:
    scenario: str
    config: str
    seed: int
    end: float
    total_gpus: float
    queues: list[str]
    series: TimeSeries
    jobs: list[dict[str, Any]]
    summary: dict[str, Any]
    counters: dict[str, Any] = field(default_factory=dict)
    #: GPU quota (GPUs) per leaf queue; -1 = none.
    quotas: dict[str, float] = field(default_factory=dict)


def static_queues(queues: list[Queue]) -> list[Queue]:
    """Static partitioning: every queue's limit becomes its quota (a queue never borrows)."""
    out = []
    for q in queues:
        res = {
            r: QueueResource(
                quota=q.resource(r).quota,
                limit=q.resource(r).quota,
                over_quota_weight=q.resource(r).over_quota_weight,
            )
            if q.resource(r).quota >= 0
            else q.resource(r)
            for r in ("gpu", "cpu", "memory")
        }
        out.append(replace(q, gpu=res["gpu"], cpu=res["cpu"], memory=res["memory"]))
    return out


class Simulation:
    """Build with a scenario; `run()` returns a `SimResult`. Same scenario + seed = same result."""

    def __init__(self, scenario: Scenario) -> None:
        self.sc = scenario
        cfg = scenario.scheduler
        queues = static_queues(scenario.queues) if cfg.limits_from_quota else scenario.queues
        self.cluster = SimCluster(scenario.nodes, queues, scenario.topologies)
        self.engine = Engine(scenario.seed)
        self.leaves = scenario.leaf_queues
        self.metrics = Collector(self.cluster, self.leaves, typical_pods(scenario.jobs))
        self.usage = UsageHistory(cfg.usage) if cfg.usage is not None else None
        # The same pod-mix learning as `shoal run`, so fragaware behaves the same in both.
        self.mix_feed = PodMixFeed() if cfg.core.has_plugin("fragaware") else None
        self.capacity = (
            float(self.cluster.total_gpu_milli),
            float(sum(n.allocatable.get("cpu", 0) for n in scenario.nodes)),
            float(sum(n.allocatable.get("memory", 0) for n in scenario.nodes)),
        )
        self.arrivals_left = len(scenario.jobs)
        self.counters: Counter[str] = Counter()
        self._last_full = -1e18
        self._last_usage = -1e18
        self._usage_snapshot: dict[str, dict[str, float]] = {}
        self._queue_alloc: dict[str, list[float]] = {}
        self._cycle_seconds = 0.0
        e = self.engine
        e.on("arrival", self._arrival)
        e.on("cycle", self._cycle)
        e.on("finish", self._finish)
        e.on("release", self._release)
        e.on("sample", self._sample)

    # -- event handlers ----------------------------------------------------------------------
    def _arrival(self, now: float, index: int) -> None:
        self.cluster.add(make_job(self.sc.jobs[index], index))
        self.arrivals_left -= 1

    def _finish(self, now: float, payload: tuple[SimJob, int]) -> None:
        job, epoch = payload
        if job.epoch == epoch and job.state == "running":
            self.cluster.finish(job, now)
            self._record_usage(now)
            self._check_done()

    def _release(self, now: float, job: SimJob) -> None:
        self.cluster.release(job)
        self._record_usage(now)

    def _sample(self, now: float, _: object) -> None:
        self.metrics.sample(now)
        self.engine.schedule(now + self.sc.settings.sample_interval, SAMPLE, "sample")

    def _check_done(self) -> None:
        if self.arrivals_left == 0 and not self.cluster.jobs:
            self.engine.stop()

    def _advance_usage(self, now: float) -> None:
        if self.usage is None:
            return
        # KAI's usage DB is fetched every minute: refresh what the core sees at that rate, so
        # skipped cycles stay valid between refreshes.
        if now - self._last_usage >= 60.0:
            self._usage_snapshot = self.usage.usage(now)
            self._last_usage = now
            self.cluster.changed = True

    def _record_usage(self, now: float) -> None:
        """The allocation changes only at cycles (binds) and finish/release events."""
        if self.usage is not None:
            alloc = {q: (float(m), 0.0, 0.0) for q, m in self.cluster.queue_gpu_milli.items()}
            self.usage.record(now, alloc, self.capacity)

    def _snapshot(self, now: float) -> ClusterSnapshot:
        snapshot = self.cluster.snapshot(now, self._usage_snapshot)
        if self.mix_feed is not None:
            fragaware = self.sc.scheduler.core.plugin("fragaware")
            self.mix_feed.fill(snapshot, fragaware.arguments.get("modelLabel") if fragaware else None)
        return snapshot

    def _cycle(self, now: float, _: object) -> None:
        settings = self.sc.settings
        self.engine.schedule(now + settings.cycle_interval, CYCLE, "cycle")
        self._advance_usage(now)
        if self.cluster.pending_jobs <= 0:
            self.counters["cycles_idle"] += 1
            return
        every = settings.full_cycle_every
        if not self.cluster.changed and (every <= 0 or now - self._last_full < every):
            self.counters["cycles_skipped"] += 1
            if self.arrivals_left == 0 and self.cluster.pending_jobs == len(self.cluster.jobs):
                # Only gangs the core keeps refusing are left (e.g. non-preemptible jobs above
                # their queue's quota) and no event can change that: the run is over.
                self.counters["stuck_at_end"] = self.cluster.pending_jobs
                self.engine.stop()
            return
        self.cluster.changed = False
        self._last_full = now
        t0 = time.process_time()  # CPU time: meaningful on a busy machine too
        # A cycle over a large backlog allocates many objects that live until it ends; the cyclic
        # GC would rescan them again and again (see `paused_gc`). Releasing the session breaks its
        # reference cycles so it is freed at once; its decisions stay valid.
        with paused_gc():
            result = run_cycle(self._snapshot(now), self.sc.scheduler.core)
            self.metrics.fair_share = {name: float(q.fair_share[0]) for name, q in result.session.queues.items()}
            result.release()
        self._cycle_seconds += time.process_time() - t0
        self.counters["cycles_run"] += 1
        started, evicted = self.cluster.apply(result.decisions, now)
        if result.decisions.binds:
            self._record_usage(now)
        self.counters["binds"] += len(result.decisions.binds)
        self.counters["pipelines"] += len(result.decisions.pipelines)
        for job in started:
            self.engine.schedule(now + job.spec.duration, FINISH, "finish", (job, job.epoch))
        for job in evicted:
            self.engine.schedule(now + settings.eviction_grace, RELEASE, "release", job)

    # -- run ---------------------------------------------------------------------------------
    def run(self, progress: Callable[[float, float], None] | None = None) -> SimResult:
        """Run to the horizon (or until every job finished). `progress(now, horizon)` is called
        every few thousand events."""
        s = self.sc.settings
        for i, job in enumerate(self.sc.jobs):
            self.engine.schedule(job.arrival, ARRIVAL, "arrival", i)
        first = min((j.arrival for j in self.sc.jobs), default=0.0)
        self.engine.schedule(first, CYCLE, "cycle")
        self.engine.schedule(0.0, SAMPLE, "sample")
        horizon = s.duration if s.duration > 0 else MAX_HORIZON
        self._record_usage(0.0)
        wall, cpu = time.perf_counter(), time.process_time()
        cb = (lambda now: progress(now, horizon)) if progress else None
        self.engine.run(until=horizon, on_progress=cb)
        end = self.engine.now
        if not self.metrics.series.t or self.metrics.series.t[-1] < end:
            self.metrics.sample(end)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        all_jobs = self.cluster.finished + list(self.cluster.jobs.values())
        useful = sum(j.spec.duration * j.spec.total_gpu_milli for j in self.cluster.finished)
        useful += sum(
            (end - j.start) * j.spec.total_gpu_milli
            for j in self.cluster.jobs.values()
            if j.state == "running" and j.start is not None
        )
        records = job_records(all_jobs)
        counters: dict[str, Any] = dict(sorted(self.counters.items()))
        counters.update(
            {
                "events": self.engine.processed,
                "wall_seconds": wall,
                "cpu_seconds": cpu,
                "core_seconds": self._cycle_seconds,
                "evicted_pods": dict(sorted(self.cluster.evicted_pods.items())),
                "evicted_gangs": dict(sorted(self.cluster.evicted_gangs.items())),
                "jobs": len(self.sc.jobs),
                "finished": len(self.cluster.finished),
                "useful_gpu_seconds": useful / MILLI,
            }
        )
        return SimResult(
            self.sc.name,
            self.sc.scheduler.name,
            self.sc.seed,
            end,
            self.cluster.total_gpu_milli / MILLI,
            self.leaves,
            self.metrics.series,
            records,
            summarize(records, self.leaves, end),
            counters,
            {
                q.name: q.gpu.quota / MILLI if q.gpu.quota >= 0 else -1.0
                for q in self.sc.queues
                if q.name in self.leaves
            },
        )
