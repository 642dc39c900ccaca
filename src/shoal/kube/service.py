"""The scheduler service: informers -> cache -> a cycle every period or on change -> applier.

Contract: `SchedulerService.run()` runs until cancelled. It schedules only while it holds the
leader lease (when leader election is on), only after every informer has listed once, and only
pods whose `spec.schedulerName` is its own. A cycle runs at most every `min_gap` seconds and at
least every `period` seconds; any relevant cache change wakes it early.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial

from shoal.cycle import close_session, open_session, paused_gc, run_actions
from shoal.framework.config import SchedulerConfig
from shoal.framework.decisions import Decisions
from shoal.framework.session import Session
from shoal.history.podmix import PodMixFeed
from shoal.kai.objects import meta
from shoal.kube.aio import wait_set
from shoal.kube.applier import Applier, ApplyStats
from shoal.kube.cache import ClusterCache
from shoal.kube.client import (
    JSON,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    STORAGE_CLASSES,
    TOPOLOGIES,
    ApiError,
    KubeClient,
    Resource,
)
from shoal.kube.config_watch import ConfigMapSource, parse_configmap_ref
from shoal.kube.dra import DraCache
from shoal.kube.dra_alloc import DraAllocator, dra_informers
from shoal.kube.gpusharing import reconcile as sharing_reconcile
from shoal.kube.gpusharing.binder import SharingBinder
from shoal.kube.gpusharing.options import SharingOptions
from shoal.kube.grouper import PodGrouper
from shoal.kube.informer import Handler, Informer
from shoal.kube.leader import LeaderElector
from shoal.kube.metrics import SchedulerMetrics, serve_http
from shoal.kube.other_pods import OTHER_JOB
from shoal.kube.prometheus_usage import PromConfig, PrometheusUsage
from shoal.kube.queue_status import queue_status
from shoal.kube.shard import Shard
from shoal.kube.usage_feed import UsageFeed, usage_settings
from shoal.kube.visibility import VisibilityOptions, VisibilityService
from shoal.model.snapshot import ClusterSnapshot

logger = logging.getLogger(__name__)

#: How often (seconds) a cycle looks for decisions its running action has committed, to send them.
STREAM_PERIOD = 0.02


@dataclass(slots=True)
class ServiceOptions:
    scheduler_name: str = "shoal"
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    period: float = 1.0
    min_gap: float = 0.05
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    leader_elect: bool = True
    lease_name: str = ""
    lease_namespace: str = "shoal-system"
    identity: str = ""
    lease_seconds: float = 10.0
    renew_seconds: float = 2.0
    queue_status_seconds: float = 5.0
    #: Run the pod grouper (PodGroups from top owners); off = a pod without PodGroup is a gang of one.
    pod_grouper: bool = True
    #: `[NAMESPACE/]NAME` of a ConfigMap whose `config_map_key` holds the config (KAI format); it is
    #: watched and a change applies from the next cycle on, without a restart. Namespace default: the lease's.
    config_map: str = ""
    config_map_key: str = "config.yaml"
    #: The published scheduling report and start-time predictions (shoal.kube.visibility).
    visibility: VisibilityOptions = field(default_factory=VisibilityOptions)
    #: How shared-GPU pods get their device (shoal.kube.gpusharing.options).
    gpu_sharing: SharingOptions = field(default_factory=SharingOptions)
    #: Seconds between writes of the usage history (time-based fair share) to its ConfigMap.
    usage_persist_seconds: float = 60.0
    #: The scheduling shard (node pool) this instance serves; default: the whole cluster.
    shard: Shard = field(default_factory=Shard)

    @property
    def component(self) -> str:
        """The name of what this instance writes: lease, ConfigMaps, events (`<name>-<pool>`)."""
        return self.shard.component(self.scheduler_name)


class SchedulerService:
    def __init__(self, client: KubeClient, options: ServiceOptions) -> None:
        self.client = client
        self.opts = options
        self.metrics = SchedulerMetrics()
        self.cache = ClusterCache(options.scheduler_name, time.time)
        self.applier = Applier(client, self.cache, options.component, self.metrics)
        self.grouper = PodGrouper(client, self.cache, shard=options.shard) if options.pod_grouper else None
        # Always fed (reservation pods are few); attached to the applier once the mode needs it.
        self.sharing = SharingBinder(client, self.cache, options.gpu_sharing, self._sharing_event)
        self._sharing_synced = False
        self.cache.require_podgroup = self.grouper is not None
        shard = options.shard

        def informer(res: Resource, kind: str, handler: Handler, sharded: bool = False) -> Informer:
            return Informer(client, res, shard.guard(handler) if sharded else handler,
                            on_error=partial(self.cache.handler_failed, kind),
                            label_selector=shard.selector() if sharded else None)

        self.informers = [
            informer(PRIORITY_CLASSES, "PriorityClass", self.cache.on_priority_class),
            informer(QUEUES, "Queue", self.cache.on_queue, sharded=True),
            informer(TOPOLOGIES, "Topology", self.cache.on_topology),
            informer(NODES, "Node", self.cache.on_node, sharded=True),
            informer(NAMESPACES, "Namespace", self.cache.on_namespace),
            informer(PERSISTENT_VOLUMES, "PersistentVolume", self.cache.on_volume),
            informer(PERSISTENT_VOLUME_CLAIMS, "PersistentVolumeClaim", self.cache.on_claim),
            informer(STORAGE_CLASSES, "StorageClass", self.cache.on_storage_class),
            informer(PODGROUPS, "PodGroup", self.cache.on_podgroup, sharded=True),
            informer(PODS, "Pod", self._on_pod),
        ]
        self.dra = DraCache(on_change=self.cache._touch)
        self.informers += dra_informers(client, self.dra, lambda kind: partial(self.cache.handler_failed, kind))
        self.applier.dra = DraAllocator(client, self.dra, lambda n: self.cache.nodes[n].labels
                                        if n in self.cache.nodes else {})
        identity = options.identity or f"{socket.gethostname()}-{os.getpid()}"
        self.elector = LeaderElector(client, options.lease_name or options.component, options.lease_namespace,
                                     identity, lease_seconds=options.lease_seconds,
                                     renew_seconds=options.renew_seconds,
                                     on_change=lambda v: self.metrics.leader.set(1 if v else 0))
        self.ready = False
        self.cycles = 0
        self.last_cycle_seconds = 0.0
        self._queue_status: dict[str, JSON] = {}
        self._queue_status_at = 0.0
        # Other schedulers' pods are capacity, not arrivals: they are not part of the mix.
        self.mix_feed = PodMixFeed(ignored_jobs={OTHER_JOB}) if options.config.has_plugin("fragaware") else None
        self.visibility = VisibilityService(client, self.cache, options.component, options.visibility,
                                            self.metrics)
        self.visibility.runtimes.leading = self._leading  # only the leader writes the learned run times
        self.usage: UsageFeed | PrometheusUsage | None = None
        self._usage_loaded = False
        self._set_usage(options.config)
        self.config_source: ConfigMapSource | None = None
        if options.config_map:
            ns, name = parse_configmap_ref(options.config_map, options.lease_namespace)
            self.config_source = ConfigMapSource(client, ns, name, self.set_config, key=options.config_map_key)

    def set_config(self, config: SchedulerConfig) -> None:
        """Use `config` from the next cycle on (a cycle already running finishes with the old one)."""
        self.opts.config = config
        self._set_usage(config)
        if not config.has_plugin("fragaware"):
            self.mix_feed = None
        elif self.mix_feed is None:
            self.mix_feed = PodMixFeed(ignored_jobs={OTHER_JOB})

    async def _sharing_event(self, kind: str, namespace: str, name: str, uid: str, reason: str,
                             message: str) -> None:
        await self.applier._event_quietly(kind, namespace, name, uid, reason, message, warning=True)

    def _start_sharing(self) -> asyncio.Task[None] | None:
        """Resolve `auto` (reservation iff its namespace exists) and, for a handshake mode, attach
        the shared-GPU binder to the applier and start its reconciler."""
        opts = self.opts.gpu_sharing
        if opts.mode == "auto":
            opts.mode = "reservation" if opts.reservation.namespace in self.cache.namespaces else "labels"
            logger.info("GPU sharing mode: %s (auto)", opts.mode)
        if not opts.handshake:
            return None
        self.applier.gpu_sharing = self.sharing
        return asyncio.create_task(sharing_reconcile.run(self.sharing, self._leading), name="gpu-sharing")

    def _set_usage(self, config: SchedulerConfig) -> None:
        """Time-based fair share on, off or with new parameters (new parameters start afresh
        unless the persisted history was written with them)."""
        try:
            settings = usage_settings(config.usage_db)
        except ValueError as e:
            logger.error("usageDBConfig: %s: time-based fair share off", e)
            settings = None
        if settings is None:
            self.usage = None
        elif self.usage is None or self.usage.settings != settings:
            name = f"{self.opts.lease_name or self.opts.component}-usage"
            self.usage = PrometheusUsage(settings) if isinstance(settings, PromConfig) else UsageFeed(
                self.client, settings, self.opts.lease_namespace, name, persist_seconds=self.opts.usage_persist_seconds)
            self._usage_loaded = False

    def _on_pod(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        self.visibility.on_pod(old, new)
        self.sharing.on_pod(kind, old, new)
        self.cache.on_pod(kind, old, new)
        if self.grouper is not None and self._leading():
            self.grouper.on_pod(kind, old, new)
        if new is None and old is not None:
            m = meta(old)
            self.metrics.pod_gone(str(m.get("namespace")), str(m.get("name")))

    async def run(self) -> None:
        # The core runs in a worker thread; a short GIL switch interval lets the event loop (binds,
        # watches, lease renewals) get the interpreter back quickly while a long cycle computes.
        sys.setswitchinterval(0.0005)
        tasks = [asyncio.create_task(inf.run(), name=f"informer-{inf.res.plural}") for inf in self.informers]
        synced = [inf.synced for inf in self.informers]
        if self.config_source is not None:
            tasks.append(asyncio.create_task(self.config_source.run(), name="config-map"))
            synced.append(self.config_source.synced)
        server = None
        if self.opts.metrics_port is not None:
            server = await serve_http(self.opts.metrics_port, self.metrics, lambda: self.ready,
                                      self.opts.metrics_host)
        try:
            await asyncio.gather(*(event.wait() for event in synced))
            self.ready = True
            logger.info("caches synced: %d nodes, %d pods of %s", len(self.cache.nodes), len(self.cache.pods),
                        self.opts.scheduler_name)
            if self.opts.leader_elect:
                tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
            else:
                self.metrics.leader.set(1)
            if self.grouper is not None:
                tasks.append(asyncio.create_task(self.grouper.run(), name="pod-grouper"))
            tasks.append(asyncio.create_task(self.visibility.run(), name="visibility"))
            sharing_task = self._start_sharing()
            if sharing_task is not None:
                tasks.append(sharing_task)
            await self._loop()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.opts.leader_elect:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(self.elector.release()), 5)
            if server is not None:
                server.close()

    def _leading(self) -> bool:
        return not self.opts.leader_elect or self.elector.is_leader

    async def _loop(self) -> None:
        last = 0.0
        while True:
            if not self._leading():
                self._sharing_synced = False
                await self.elector.became_leader.wait()
                # A new leader starts from what the API says, not from what it assumed before.
                self.cache.assumed.clear()
                self._usage_loaded = False  # and from the usage history the last leader persisted
                if self.grouper is not None:  # pods that arrived while standing by
                    for obj in list(self.cache.held.values()):
                        self.grouper.on_pod("ADDED", None, obj)
                continue
            if self.applier.gpu_sharing is not None and not self._sharing_synced:
                # Rebuild from labels before deciding anything: orphans go, every GPU one reservation.
                report = await sharing_reconcile.reconcile(self.sharing)
                logger.info("GPU sharing rebuilt: %s", report)
                self._sharing_synced = True
            gap = self.opts.min_gap - (time.monotonic() - last)
            if gap > 0:
                await asyncio.sleep(gap)
            await wait_set(self.cache.changed, self.opts.period)
            self.cache.changed.clear()
            last = time.monotonic()
            try:
                await self.cycle()
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad cycle must not stop the scheduler
                self.metrics.cycle_failures.inc()
                logger.exception("scheduling cycle failed")

    async def cycle(self) -> None:
        """One cycle: snapshot, then the actions one by one in a worker thread; each action's binds and
        evictions are sent while the next action runs (KAI also binds at each statement commit)."""
        t0 = time.perf_counter()  # the cycle's latency includes building its snapshot
        snapshot = self.opts.shard.narrow(self.cache.snapshot())
        self.dra.fill(snapshot)
        self.metrics.snapshot_latency.observe(time.perf_counter() - t0)
        config, mix_feed, usage = self.opts.config, self.mix_feed, self.usage  # a reload applies next cycle
        if usage is not None:
            if not self._usage_loaded and self._leading():
                self._usage_loaded = True
                await usage.load()
            usage.fill(snapshot)
        if mix_feed is not None:
            fragaware = config.plugin("fragaware")
            mix_feed.fill(snapshot, fragaware.arguments.get("modelLabel") if fragaware else None)
        stats = ApplyStats()
        sending: list[asyncio.Task[None]] = []
        sent_binds = sent_evictions = 0
        # The session's objects all live until the decisions are made: keep the cyclic collector
        # from rescanning them meanwhile (shoal.cycle.paused_gc); ssn.release() frees them after.
        with paused_gc():
            ssn = await asyncio.to_thread(open_session, snapshot, config)
            lap = self.visibility.lap("session-open", t0)
            for action in config.actions:
                # The action runs in a worker thread; the decisions it commits meanwhile are final
                # (a statement appends them only at its commit), so they are sent while it goes on:
                # the first bind leaves after the first commit, not after the whole action.
                worker = asyncio.ensure_future(asyncio.to_thread(run_actions, ssn, [action]))
                while True:
                    done, _ = await asyncio.wait({worker}, timeout=STREAM_PERIOD)
                    sent_binds, sent_evictions = self._send_new(ssn, stats, sending, sent_binds, sent_evictions)
                    if done:
                        break
                worker.result()
                lap = self.visibility.lap(action, lap)
            d = await asyncio.to_thread(close_session, ssn)
            self.visibility.lap("session-close", lap)
        try:
            await self._after_decisions(ssn, d, snapshot, stats, sending, t0)
            await asyncio.to_thread(self.visibility.after_cycle, ssn, d, snapshot, config, self.last_cycle_seconds,
                                    self.cycles)
        finally:
            ssn.release()

    def _send_new(self, ssn: Session, stats: ApplyStats, sending: list[asyncio.Task[None]], sent_binds: int,
                  sent_evictions: int) -> tuple[int, int]:
        """Start sending the binds and evictions committed since the counts given; the new counts."""
        d = ssn.decisions
        binds, evictions = d.binds[sent_binds:], d.evictions[sent_evictions:]
        if (binds or evictions) and self._leading():
            self.applier.assume(binds)
            sending.append(asyncio.create_task(self.applier.apply_placements(binds, evictions, stats)))
        return sent_binds + len(binds), sent_evictions + len(evictions)

    async def _after_decisions(self, ssn: Session, d: Decisions, snapshot: ClusterSnapshot, stats: ApplyStats,
                               sending: list[asyncio.Task[None]], t0: float) -> None:
        """Metrics, the placements still being sent, PodGroup/Queue status and events."""
        elapsed = self.last_cycle_seconds = time.perf_counter() - t0
        self.metrics.cycle_latency.observe(elapsed)
        self.metrics.cycles.inc()
        self.cycles += 1
        if d.binds or d.evictions:
            logger.info("cycle %d decided in %.0f ms (snapshot %d pods, %d nodes): %d binds, %d evictions",
                        self.cycles, elapsed * 1000, len(snapshot.pods), len(snapshot.nodes), len(d.binds),
                        len(d.evictions))
        t1 = time.perf_counter()
        await asyncio.gather(*sending)
        if not self._leading():
            return  # lost the lease while deciding: the new leader decides again
        await self.applier.apply_reports(d, stats)
        self.metrics.apply_latency.observe(time.perf_counter() - t1)
        if d.binds or d.evictions:
            logger.info("cycle %d applied %.0f ms after deciding: bound %d (failed %d), evicted %d (refused %d, "
                        "%d unbound skipped), %d gangs pending", self.cycles, (time.perf_counter() - t1) * 1000,
                        stats.bound, stats.bind_failed, stats.evicted, stats.evict_refused, stats.evict_unbound,
                        len(d.explanations))
        for fault in d.faults:  # each also explained on its PodGroup (SchedulingError)
            self.metrics.job_faults.labels(fault.stage).inc()
        pending = Counter(ex.queue for ex in d.explanations.values())
        self.metrics.observe_session(ssn, dict(pending))
        if self.usage is not None:
            await self.usage.persist(snapshot.now)
        if time.monotonic() - self._queue_status_at >= self.opts.queue_status_seconds:
            self._queue_status_at = time.monotonic()
            await self._write_queue_status(ssn)
            self._prune()

    async def _write_queue_status(self, ssn: Session) -> None:
        """Queue status allocated / requested / fairShare, written only when it changed."""
        for name, q in ssn.queues.items():
            if name not in self.cache.queue_objs:
                continue
            status = queue_status(q, bool(ssn.snapshot.usage))
            if self._queue_status.get(name) == status:
                continue
            try:
                await self.client.patch(QUEUES, name, {"status": status}, sub="status")
                self._queue_status[name] = status
            except ApiError as e:
                logger.warning("Queue %s status: %s", name, e)

    def _prune(self) -> None:
        """Forget bookkeeping of objects that no longer exist."""
        live = set(self.cache.pods) | set(self.cache.podgroups)
        self.applier.written = {k: v for k, v in self.applier.written.items()
                                if k in live or k.startswith("problem:")}
        self.applier.evicting &= set(self.cache.pods)

