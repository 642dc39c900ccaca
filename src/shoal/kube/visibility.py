"""The service's visibility: it publishes the last cycle's report and predicts start times.

* After a cycle (at most every `report_seconds`), `after_cycle` builds the scheduling report of
  `shoal.visibility.report` from the finished session, with the latest predicted start times, the
  recent evictions and cycle latencies; the dashboard reads `report` in process.
* `run()` writes it (gzip JSON, key `report.json.gz` of `binaryData`) to the ConfigMap
  `<namespace>/<scheduler-name>-visibility` when it changed, at most every `publish_seconds`;
  `shoal queues|pending|explain` read it with nothing but `get` on that ConfigMap.
* Every `eta_seconds` (0 = off) a worker thread runs `shoal.visibility.forecast` on the last cycle's
  snapshot with the running config, off the scheduling path; each pending PodGroup then gets the
  annotation `shoal.dev/predicted-start` (RFC 3339; removed when no prediction) and the gauge
  `shoal_gang_predicted_start_timestamp_seconds`. Run times come from `shoal.visibility.runtimes`:
  the PodGroup's `shoal.dev/expected-runtime`, jobs of the same owner kind and queue that
  finished, the Queue's `shoal.dev/default-runtime`, the service default. The learned run times
  survive restarts in the ConfigMap `<namespace>/<scheduler-name>-runtimes` (`runtime_store`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import logging
import math
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Gauge

from shoal.framework.config import SchedulerConfig
from shoal.framework.decisions import Decisions
from shoal.framework.session import Session
from shoal.kai.objects import JSON, meta
from shoal.kube.applier import rfc3339
from shoal.kube.cache import ClusterCache
from shoal.kube.client import CONFIGMAPS, PODGROUPS, ApiError, KubeClient
from shoal.kube.metrics import SchedulerMetrics
from shoal.kube.runtime_store import RuntimeStore, runtimes_configmap_name
from shoal.kube.visibility_metrics import ParityMetrics
from shoal.model.snapshot import ClusterSnapshot
from shoal.visibility.forecast import forecast
from shoal.visibility.nodes import node_grid
from shoal.visibility.report import build_report
from shoal.visibility.runtimes import JobFacts, RuntimeEstimator, podgroup_facts, queue_defaults

logger = logging.getLogger(__name__)

REPORT_KEY = "report.json.gz"
PREDICTED_START_ANNOTATION = "shoal.dev/predicted-start"
MAX_CONFIGMAP_BYTES = 900_000


def report_configmap_name(scheduler_name: str) -> str:
    return f"{scheduler_name}-visibility"


def encode_report(report: dict[str, Any]) -> str:
    """gzip + base64 (ConfigMap binaryData); drops analysis, then gangs, to stay under 900 kB."""
    raw = gzip.compress(json.dumps(report, separators=(",", ":")).encode(), 6)
    keep = len(report.get("pending", []))
    while len(raw) * 4 // 3 > MAX_CONFIGMAP_BYTES and keep > 10:
        keep //= 2
        report = {**report, "pending": report["pending"][:keep], "truncated": True}
        raw = gzip.compress(json.dumps(report, separators=(",", ":")).encode(), 6)
    return base64.b64encode(raw).decode()


def decode_report(cm: JSON) -> dict[str, Any]:
    """The report in a ConfigMap written by `run()`; ValueError naming the ConfigMap if it has none."""
    data = (cm.get("binaryData") or {}).get(REPORT_KEY)
    m = meta(cm)
    if not data:
        raise ValueError(f"ConfigMap {m.get('namespace')}/{m.get('name')} has no {REPORT_KEY}")
    out: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(data)))
    return out


@dataclass(slots=True)
class VisibilityOptions:
    namespace: str = "shoal-system"
    publish: bool = True
    report_seconds: float = 2.0
    publish_seconds: float = 5.0
    detail_limit: int = 200
    eta_seconds: float = 30.0
    eta_horizon: float = 7 * 86400.0
    eta_max_cycles: int = 200
    #: Wall seconds a forecast may take (it shares the interpreter with the scheduling cycle); the
    #: gangs it has not started by then get no prediction this time.
    eta_budget: float = 10.0
    default_runtime: float = 3600.0
    queue_runtimes: dict[str, float] = field(default_factory=dict)
    #: Seconds between writes of the learned run times (by the leader, when it learned something).
    runtimes_persist_seconds: float = 300.0
    #: Include the node x GPU grid (the dashboard shows it; the ConfigMap copy leaves it out).
    nodes: bool = False
    recent: int = 50


class VisibilityService:
    """See the module doc. `after_cycle` runs in the cycle's worker thread; the rest in the loop."""

    def __init__(self, client: KubeClient, cache: ClusterCache, scheduler_name: str, opts: VisibilityOptions,
                 metrics: SchedulerMetrics, clock: Callable[[], float] = time.time) -> None:
        self.client, self.cache, self.opts, self.clock = client, cache, opts, clock
        self.scheduler_name = scheduler_name
        self.configmap = report_configmap_name(scheduler_name)
        self.report: dict[str, Any] | None = None
        self.version = 0
        self.evictions: deque[dict[str, Any]] = deque(maxlen=opts.recent)
        self.latencies: deque[tuple[float, float]] = deque(maxlen=120)
        self.estimator = RuntimeEstimator(opts.default_runtime, dict(opts.queue_runtimes))
        self.runtimes = RuntimeStore(client, self.estimator, opts.namespace, runtimes_configmap_name(scheduler_name),
                                     persist_seconds=opts.runtimes_persist_seconds)
        self.etas: dict[str, float | None] = {}
        self.eta_sources: dict[str, str] = {}
        #: Which run-time source the last forecast used, counted over the jobs it timed.
        self.eta_basis: dict[str, int] = {}
        self.eta_time: float | None = None
        self._latest: tuple[ClusterSnapshot, SchedulerConfig] | None = None
        self._built_at = -math.inf
        self._published: str = ""
        self._written_eta: dict[str, float] = {}
        self._learned: deque[str] = deque(maxlen=10_000)
        self.predicted = Gauge("shoal_gang_predicted_start_timestamp_seconds",
                               "Predicted start of a pending gang (Unix time; forecast by the scheduling core)",
                               ["namespace", "podgroup", "queue"], registry=metrics.registry)
        self._gauged: set[tuple[str, str, str]] = set()
        self.parity = ParityMetrics(metrics.registry)

    def lap(self, what: str, since: float) -> float:
        """Observe the latency of a cycle phase (`session-open`, an action, `session-close`) that began
        at `since` (perf_counter); returns now, the start of the next phase."""
        now = time.perf_counter()
        if what.startswith("session-"):
            self.parity.session_latency.labels(what.removeprefix("session-")).observe(now - since)
        else:
            self.parity.action_latency.labels(what).observe(now - since)
        return now

    # -- after each cycle (worker thread, session still open) ---------------------------------
    def after_cycle(self, ssn: Session, d: Decisions, snapshot: ClusterSnapshot, config: SchedulerConfig,
                    elapsed: float, cycle: int) -> None:
        now = snapshot.now
        self.latencies.append((now, elapsed))
        for e in d.evictions:
            self.evictions.appendleft({"time": now, "pod": e.name, "namespace": e.namespace, "job": e.job,
                                       "node": e.node, "action": e.action, "reason": e.reason,
                                       "preemptor": e.preemptor})
        self._latest = (snapshot, config)
        if d.binds:
            queue_of = {b.job: ssn.jobs[b.job].pg.queue for b in d.binds if b.job in ssn.jobs}
            self.parity.binds(d.binds, snapshot, queue_of)
        if now - self._built_at < self.opts.report_seconds and not d.evictions:
            return
        self._built_at = now
        report = build_report(ssn, d, scheduler=self.scheduler_name, cycle=cycle, cycle_seconds=elapsed,
                              config=config, detail_limit=self.opts.detail_limit)
        for e in report["pending"]:
            e["eta"] = self.etas.get(e["uid"])
        report["etaTime"] = self.eta_time
        report["etaRuntimes"] = self.eta_basis
        report["evictions"] = list(self.evictions)
        report["latency"] = [[t, round(s, 6)] for t, s in self.latencies]
        if self.opts.nodes:
            report["nodes"] = node_grid(ssn)
        self.parity.report(report)
        self.report = report
        self.version += 1

    # -- publishing and forecasting (event loop) ---------------------------------------------
    async def run(self) -> None:
        tasks = []
        if self.opts.publish:
            tasks.append(asyncio.create_task(self._publish_loop(), name="visibility-publish"))
        if self.opts.eta_seconds > 0:
            tasks.append(asyncio.create_task(self._eta_loop(), name="visibility-eta"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()

    async def _publish_loop(self) -> None:
        while True:
            await asyncio.sleep(self.opts.publish_seconds)
            with contextlib.suppress(ApiError):
                await self.publish()

    async def publish(self) -> bool:
        """Write the report if its content changed since the last write; True if written."""
        if self.report is None:
            return False
        report = {k: v for k, v in self.report.items() if k != "nodes"}
        stable = json.dumps({k: v for k, v in report.items()
                             if k not in ("time", "cycle", "cycleSeconds", "latency")}, sort_keys=True, default=str)
        if stable == self._published:
            return False
        body = {"binaryData": {REPORT_KEY: encode_report(report)}}
        try:
            await self.client.patch(CONFIGMAPS, self.configmap, body, self.opts.namespace)
        except ApiError as e:
            if e.code != 404:
                logger.warning("visibility report %s/%s: %s", self.opts.namespace, self.configmap, e)
                raise
            obj = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": self.configmap, "namespace": self.opts.namespace,
                                "labels": {"app.kubernetes.io/name": "shoal", "shoal.dev/report": "visibility"}},
                   **body}
            await self.client.create(CONFIGMAPS, obj, self.opts.namespace)
        self._published = stable
        return True

    async def _eta_loop(self) -> None:
        await self.runtimes.load()  # what this scheduler learned before a restart
        await asyncio.sleep(min(self.opts.eta_seconds, 2.0))  # the first prediction soon after start-up
        while True:
            try:
                await self.predict()
                await self.runtimes.persist(self.clock())
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("start-time forecast failed")
            await asyncio.sleep(self.opts.eta_seconds)

    async def predict(self) -> None:
        """One forecast from the last cycle's snapshot, then annotations and gauges."""
        if self._latest is None:
            return
        snapshot, config = self._latest
        runtime = self.runtime_model(snapshot)
        deadline = time.perf_counter() + self.opts.eta_budget
        fc = await asyncio.to_thread(forecast, snapshot, config, runtime, horizon=self.opts.eta_horizon,
                                     max_cycles=self.opts.eta_max_cycles, stop=lambda: time.perf_counter() > deadline)
        if not fc.complete:
            logger.debug("start-time forecast stopped after %d cycles (%s): %d of %d gangs predicted", fc.cycles,
                         "budget" if time.perf_counter() > deadline else "max cycles",
                         sum(v is not None for v in fc.starts.values()), len(fc.starts))
        self.etas = dict(fc.starts)
        self.eta_time = snapshot.now
        self.eta_basis = dict(Counter(self.eta_sources.values()))
        self._built_at = -math.inf  # the next cycle's report carries the new predictions
        await self._annotate(fc.starts)

    def runtime_model(self, snapshot: ClusterSnapshot) -> Callable[[str, float], float]:
        """(job uid, elapsed) -> remaining seconds, and `eta_sources` filled with each job's source."""
        facts: dict[str, JobFacts] = {}
        for pg in snapshot.podgroups:
            facts[pg.uid] = self.job_facts(pg.uid, pg.queue)
        self.eta_sources = {}
        queue_defaults = self._queue_defaults()
        self.estimator.queue_defaults = {**self.opts.queue_runtimes, **queue_defaults}

        def remaining(uid: str, elapsed: float) -> float:
            f = facts.get(uid)
            if f is None:  # other schedulers' pods: they hold their resources for good
                return math.inf
            value, source = self.estimator.estimate(f, elapsed)
            self.eta_sources.setdefault(uid, source)
            return value

        return remaining

    def job_facts(self, uid: str, queue: str) -> JobFacts:
        return podgroup_facts(uid, self.cache.podgroup_objs.get(uid), queue)

    def _queue_defaults(self) -> dict[str, float]:
        return queue_defaults(self.cache.queue_objs.values())

    async def _annotate(self, starts: dict[str, float | None], budget: int = 100) -> None:
        now = self.clock()
        seen: set[tuple[str, str, str]] = set()
        writes = []
        for uid, t in starts.items():
            pg = self.cache.podgroups.get(uid)
            if pg is None:
                continue
            if t is not None:
                key = (pg.namespace, pg.name, pg.queue)
                self.predicted.labels(*key).set(t)
                seen.add(key)
            old = self._written_eta.get(uid)
            if t is None and old is None:
                continue
            if t is not None and old is not None and abs(t - old) < max(60.0, 0.1 * max(old - now, 0.0)):
                continue
            writes.append((uid, pg.namespace, pg.name, t))
        for uid in [u for u in self._written_eta if u not in starts]:
            pg = self.cache.podgroups.get(uid)
            if pg is not None:
                writes.append((uid, pg.namespace, pg.name, None))
            else:
                self._written_eta.pop(uid, None)
        for key in self._gauged - seen:
            with contextlib.suppress(KeyError):
                self.predicted.remove(*key)
        self._gauged = seen
        await asyncio.gather(*(self._write_eta(*w) for w in writes[:budget]))

    async def _write_eta(self, uid: str, namespace: str, name: str, t: float | None) -> None:
        value = rfc3339(t) if t is not None else None
        try:
            await self.client.patch(PODGROUPS, name, {"metadata": {"annotations": {PREDICTED_START_ANNOTATION: value}}},
                                    namespace)
        except ApiError as e:
            logger.debug("PodGroup %s/%s %s: %s", namespace, name, PREDICTED_START_ANNOTATION, e)
            return
        if t is None:
            self._written_eta.pop(uid, None)
        else:
            self._written_eta[uid] = t

    # -- learning run times -------------------------------------------------------------------
    def on_pod(self, old: JSON | None, new: JSON | None) -> None:
        """A pod of ours that Succeeded teaches the estimator its job's run time (once per job)."""
        if new is None or (new.get("status") or {}).get("phase") != "Succeeded":
            return
        if old is not None and (old.get("status") or {}).get("phase") == "Succeeded":
            return
        uid = str(meta(new).get("uid"))
        pod = self.cache.pods.get(uid)
        if pod is None or pod.start_time is None or pod.job in self._learned:
            return
        pg = self.cache.podgroups.get(pod.job)
        queue = pg.queue if pg is not None else str((meta(new).get("labels") or {}).get("kai.scheduler/queue", ""))
        self._learned.append(pod.job)
        self.estimator.observe(self.job_facts(pod.job, queue).key, self.clock() - pod.start_time)
        self.runtimes.observed += 1
