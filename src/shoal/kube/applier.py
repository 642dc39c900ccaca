"""Applies a cycle's decisions through the API: binds, evictions, explanations, statuses.

Contracts:
* A bind is *assumed* in the cache before its request leaves, so the next snapshot already holds
  the GPU; a failed bind forgets it (the pod is re-planned next cycle). Shared-GPU pods get their
  GPU group label and `received-resource-type` annotation *before* the binding, so whatever starts
  the container sees them (KAI's binder does the same).
* Evictions go through the Eviction API. A refusal (429, a PodDisruptionBudget) stops the rest of
  that victim set (same action and preemptor) and is reported; it never raises.
* Explanations become a `PodScheduled=False/Unschedulable` condition and a `FailedScheduling`
  event on each pending pod of the gang, and a condition on the PodGroup; each is written only
  when its message changes, at most `write_budget` writes per cycle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Protocol

from shoal.framework.decisions import Bind, Decisions, Evict, GangExplanation
from shoal.kai.names import (
    LAST_START_ANNOTATION,
    PODGROUP_API,
    QUEUE_API,
    STALE_ANNOTATION,
    TOPOLOGY_API,
)
from shoal.kube.cache import ClusterCache, Problem
from shoal.kube.client import (
    EVENTS,
    PODGROUPS,
    PODS,
    QUEUES,
    ApiError,
    KubeClient,
)
from shoal.kube.dra import AllocationError
from shoal.kube.dra_alloc import DraAllocator
from shoal.kube.gpusharing.binder import failpoint, sharing_patch
from shoal.kube.metrics import SchedulerMetrics
from shoal.kube.volume_prebind import prebind_volumes

logger = logging.getLogger(__name__)


class SharedBinds(Protocol):
    """Binds of shared-GPU pods that must wait for their devices (kube.gpusharing.binder)."""

    def spawn(self, b: Bind, finish: Callable[[], Awaitable[bool]]) -> None: ...


def rfc3339(ts: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class ApplyStats:
    bound: int = 0
    bind_failed: int = 0
    evicted: int = 0
    evict_refused: int = 0
    #: Evictions of pods bound to no node (withdrawn reservations): skipped, nothing to free.
    evict_unbound: int = 0
    writes: int = 0


@dataclass(slots=True)
class Applier:
    client: KubeClient
    cache: ClusterCache
    scheduler_name: str
    metrics: SchedulerMetrics | None = None
    concurrency: int = 64
    write_budget: int = 300
    #: What was last written per object (pod uid / PodGroup key / problem key) -> message.
    written: dict[str, str] = field(default_factory=dict)
    evicting: set[str] = field(default_factory=set)
    #: Pod uid -> set when its bind request of ours, in flight, has been answered (an eviction
    #: of the same pod, decided by a later action of the cycle, waits for it).
    binding: dict[str, asyncio.Event] = field(default_factory=dict)
    semaphore: asyncio.Semaphore | None = None
    #: Shared-GPU binds go through this hook when devices are assigned (`--gpu-sharing` modes
    #: `reservation`, `fractioning`): it labels the pod, waits for the devices, then calls back.
    gpu_sharing: SharedBinds | None = None
    #: Allocates and reserves a pod's DRA claims before its bind (kube.dra_alloc).
    dra: DraAllocator | None = None

    async def apply(self, d: Decisions) -> ApplyStats:
        """Apply a whole cycle's decisions: placements first, then explanations and annotations."""
        stats = ApplyStats()
        self.assume(d.binds)
        await self.apply_placements(d.binds, d.evictions, stats)
        await self.apply_reports(d, stats)
        return stats

    def assume(self, binds: list[Bind]) -> None:
        """Mark binds as in flight in the cache; call before the next snapshot can be taken."""
        for b in binds:
            self.cache.assume(b.pod, b.node, b.gpu_groups)

    async def apply_placements(self, binds: list[Bind], evictions: list[Evict], stats: ApplyStats) -> None:
        """Binds (already assumed) and evictions, `concurrency` requests at a time."""
        jobs: list[Awaitable[None]] = [self._bind(b, stats, self._sem) for b in binds]
        for victims in _victim_sets(evictions):
            jobs.append(self._evict_set(victims, stats, self._sem))
        await asyncio.gather(*jobs)

    async def apply_reports(self, d: Decisions, stats: ApplyStats) -> None:
        """Explanations, invalid-object reports and PodGroup annotations (budgeted writes)."""
        budget = [self.write_budget]
        await self._explain(d.explanations, stats, self._sem, budget)
        await self._report_problems(stats, self._sem, budget)
        await self._podgroup_times(d, self._sem)

    @property
    def _sem(self) -> asyncio.Semaphore:
        # One semaphore for every request the applier has in flight (created lazily in the loop).
        if self.semaphore is None:
            self.semaphore = asyncio.Semaphore(self.concurrency)
        return self.semaphore

    # -- binding -----------------------------------------------------------------------------
    async def _bind(self, b: Bind, stats: ApplyStats, sem: asyncio.Semaphore) -> None:
        if b.pod not in self.cache.pods:  # deleted since the snapshot
            self.cache.forget(b.pod)
            return
        if b.gpu_groups and self.gpu_sharing is not None:
            self.gpu_sharing.spawn(b, partial(self._bind_now, b, stats, sem, False))
            return
        answered = self.binding[b.pod] = asyncio.Event()
        try:
            await self._bind_now(b, stats, sem, True)
        finally:
            answered.set()
            if self.binding.get(b.pod) is answered:  # not a later bind's of the same pod
                del self.binding[b.pod]

    async def _bind_now(self, b: Bind, stats: ApplyStats, sem: asyncio.Semaphore, label: bool) -> bool:
        """Volumes, then the binding (with the GPU group record first when `label`); True if bound. A
        failure after the pod's DRA claims were reserved un-reserves them (kube-scheduler's Unreserve)."""
        binding = False
        async with sem:
            try:
                if b.gpu_groups and label:
                    await self.client.patch(PODS, b.name, sharing_patch(b), b.namespace)
                await prebind_volumes(self.client, self.cache, b)
                await self._prepare_claims(b)
                binding = True
                await self.client.bind(b.namespace, b.name, b.pod, b.node)
            except ApiError as e:
                stats.bind_failed += 1
                self.cache.forget(b.pod)
                logger.warning("bind %s/%s -> %s failed: %s", b.namespace, b.name, b.node, e)
                # A conflicting binding: the pod is bound already (an earlier answer lost), claims and all.
                await self._unreserve_claims(b, keep=binding and e.code == 409)
                if e.code != 404:
                    await self._event_quietly("Pod", b.namespace, b.name, b.pod, "FailedBinding",
                                              f"binding to {b.node} failed: {e.message}", warning=True)
                return False
            except AllocationError as e:
                stats.bind_failed += 1
                self.cache.forget(b.pod)
                await self._unreserve_claims(b)
                await self._event_quietly("Pod", b.namespace, b.name, b.pod, "FailedBinding",
                                          f"resource claims on {b.node}: {e}", warning=True)
                return False
            except Exception as e:
                stats.bind_failed += 1
                self.cache.forget(b.pod)
                logger.warning("bind %s/%s -> %s failed: %r", b.namespace, b.name, b.node, e)
                await self._unreserve_claims(b)
                return False
        stats.bound += 1
        self.written.pop(b.pod, None)
        if self.metrics is not None:
            self.metrics.pod_bound(b.namespace, b.name, self.cache.pods.get(b.pod), b)
        return True

    async def _prepare_claims(self, b: Bind) -> None:
        pod = self.cache.pods.get(b.pod)
        if self.dra is not None and pod is not None and pod.resource_claims:
            await self.dra.prepare(b, pod.resource_claims)

    async def _unreserve_claims(self, b: Bind, keep: bool = False) -> None:
        pod = self.cache.pods.get(b.pod)
        if self.dra is not None and pod is not None and pod.resource_claims and not keep:
            await self.dra.unreserve(b, pod.resource_claims)

    # -- eviction ----------------------------------------------------------------------------
    async def _evict_set(self, victims: list[Evict], stats: ApplyStats, sem: asyncio.Semaphore) -> None:
        """Evict a victim set in order; the first refusal stops the set (the preemptor waits).

        Each victim's reason event (`Evicting`) is written before its eviction, so a scheduler
        killed between the two never leaves an eviction without its reason; if the event cannot be
        written the set waits for a later cycle."""
        for v in victims:
            if v.pod in self.evicting or v.pod not in self.cache.pods:
                continue
            if (answered := self.binding.get(v.pod)) is not None:
                await answered.wait()  # evict the pod once bound, not delete it mid-bind
            if self.cache.node_of(v.pod) is None:
                # Bound nowhere, not even by a bind of this cycle: a reservation the core withdrew
                # (pipelined by one statement, a victim of a later one, as in KAI). It holds
                # nothing, and the Eviction API would delete a waiting pod.
                stats.evict_unbound += 1
                logger.debug("eviction of %s/%s skipped: not bound to a node (a withdrawn reservation)",
                             v.namespace, v.name)
                continue
            async with sem:
                if not await self._event_quietly("Pod", v.namespace, v.name, v.pod, "Evicting",
                                                 f"{v.action}: {v.reason}", warning=False):
                    logger.warning("eviction of %s/%s postponed: its reason event could not be written",
                                   v.namespace, v.name)
                    return
                try:
                    await self.client.evict(v.namespace, v.name, v.pod)
                except ApiError as e:
                    if e.code == 404:
                        continue
                    stats.evict_refused += 1
                    logger.info("eviction of %s/%s refused (%s); victim set of %s abandoned",
                                v.namespace, v.name, e, v.preemptor or v.action)
                    await self._event_quietly("Pod", v.namespace, v.name, v.pod, "EvictionRefused",
                                              f"{v.action}: eviction refused: {e.message}", warning=True)
                    return
                except Exception as e:
                    logger.warning("eviction of %s/%s failed: %r", v.namespace, v.name, e)
                    return
            failpoint("evicted")  # the chaos tests crash here: a victim set evicted only in part
            self.evicting.add(v.pod)
            stats.evicted += 1
            if self.metrics is not None:
                self.metrics.pod_evicted(v.action)

    # -- explanations ------------------------------------------------------------------------
    async def _explain(self, explanations: dict[str, GangExplanation], stats: ApplyStats,
                       sem: asyncio.Semaphore, budget: list[int]) -> None:
        writes: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        for job, ex in explanations.items():
            message = "; ".join(dict.fromkeys(ex.messages)) or ", ".join(ex.reasons)
            text = f"{', '.join(ex.reasons)}: {message}"
            if not job.startswith("pod:") and job in self.cache.podgroups and self.written.get(job) != text:
                self.written[job] = text
                writes.append((job, partial(self._podgroup_condition, job, ex, message)))
            pg = self.cache.podgroups.get(job)
            condition = pg is None or pg.mark_unschedulable
            for pod in self.cache.pending_pods_of(job):
                if self.written.get(pod.uid) == text:
                    continue
                self.written[pod.uid] = text
                writes.append((pod.uid, partial(self._pod_unschedulable, pod.namespace, pod.name, pod.uid, message,
                                                condition)))
        await self._run_budgeted(writes, stats, sem, budget)

    async def _run_budgeted(self, writes: list[tuple[str, Callable[[], Awaitable[None]]]], stats: ApplyStats,
                            sem: asyncio.Semaphore, budget: list[int]) -> None:
        """Run at most budget[0] writes; the rest are un-marked so a later cycle writes them."""
        todo, rest = writes[:max(budget[0], 0)], writes[max(budget[0], 0):]
        budget[0] -= len(todo)
        for key, _ in rest:
            self.written.pop(key, None)

        async def one(w: Callable[[], Awaitable[None]]) -> None:
            async with sem:
                await w()

        await asyncio.gather(*(one(w) for _, w in todo))
        stats.writes += len(todo)

    async def _pod_unschedulable(self, namespace: str, name: str, uid: str, message: str,
                                 condition: bool = True) -> None:
        """FailedScheduling event, and (unless the gang's markUnschedulable is false) the
        PodScheduled=False/Unschedulable condition cluster autoscalers react to."""
        cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                "lastTransitionTime": rfc3339()}
        try:
            if condition:
                await self.client.patch(PODS, name, {"status": {"conditions": [cond]}}, namespace, sub="status",
                                        strategic=True)
        except ApiError as e:
            if e.code != 404:
                logger.warning("PodScheduled condition on %s/%s: %s", namespace, name, e)
            return
        await self._event_quietly("Pod", namespace, name, uid, "FailedScheduling", message, warning=True)

    async def _podgroup_condition(self, key: str, ex: GangExplanation, message: str) -> None:
        ns, name = key.split("/", 1)
        cond = {"type": "UnschedulableOnNodePool", "nodePool": "default", "transitionID": rfc3339(),
                "lastTransitionTime": rfc3339(), "status": "True", "reason": ex.reasons[0] if ex.reasons else "",
                "message": message,
                "reasons": [{"reason": r, "message": message} for r in ex.reasons]}
        try:
            await self.client.patch(PODGROUPS, name, {"status": {"schedulingConditions": [cond]}}, ns,
                                    sub="status")
        except ApiError as e:
            if e.code != 404:
                logger.warning("PodGroup %s condition: %s", key, e)

    async def _podgroup_times(self, d: Decisions, sem: asyncio.Semaphore) -> None:
        patches: dict[str, dict[str, str | None]] = defaultdict(dict)
        for job, ts in d.last_start_times.items():
            patches[job][LAST_START_ANNOTATION] = rfc3339(ts)
        for job, stale in d.stale_since.items():
            patches[job][STALE_ANNOTATION] = rfc3339(stale) if stale is not None else None

        async def one(key: str, anns: dict[str, str | None]) -> None:
            ns, name = key.split("/", 1)
            async with sem:
                try:
                    await self.client.patch(PODGROUPS, name, {"metadata": {"annotations": anns}}, ns)
                except ApiError as e:
                    logger.debug("PodGroup %s annotations: %s", key, e)

        await asyncio.gather(*(one(k, a) for k, a in patches.items() if k in self.cache.podgroups))

    # -- invalid objects ---------------------------------------------------------------------
    async def _report_problems(self, stats: ApplyStats, sem: asyncio.Semaphore, budget: list[int]) -> None:
        writes: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        for key, p in list(self.cache.problems.items()):
            wkey = f"problem:{key[0]}:{key[1]}"
            if self.written.get(wkey) == p.message:
                continue
            self.written[wkey] = p.message
            self.metrics.object_errors.labels(p.kind).inc()
            writes.append((wkey, partial(self._report, p)))
        # Queues fixed since they were reported: clear their Valid=False condition.
        live = {f"problem:{k[0]}:{k[1]}" for k in self.cache.problems}
        for wkey in [k for k in self.written if k.startswith("problem:Queue:") and k not in live]:
            del self.written[wkey]
            name = wkey.removeprefix("problem:Queue:")
            if name in self.cache.queues:
                writes.append((wkey, partial(self._queue_valid, name)))
        await self._run_budgeted(writes, stats, sem, budget)

    async def _queue_valid(self, name: str) -> None:
        cond = {"type": "Valid", "status": "True", "reason": "Valid", "message": "the queue spec is valid",
                "lastTransitionTime": rfc3339()}
        try:
            await self.client.patch(QUEUES, name, {"status": {"conditions": [cond]}}, sub="status")
        except ApiError as e:
            logger.warning("Queue %s condition: %s", name, e)

    async def _report(self, p: Problem) -> None:
        message = f"{p.kind} {p.name} is invalid and is not scheduled: {p.message}"
        if p.kind == "Pod":
            await self._pod_unschedulable(p.namespace, p.name, p.uid, message)
            return
        if p.kind == "Queue":
            cond = {"type": "Valid", "status": "False", "reason": "InvalidSpec", "message": message,
                    "lastTransitionTime": rfc3339()}
            try:
                await self.client.patch(QUEUES, p.name, {"status": {"conditions": [cond]}}, sub="status")
            except ApiError as e:
                logger.warning("Queue %s condition: %s", p.name, e)
        await self._event_quietly(p.kind, p.namespace, p.name, p.uid, "InvalidSpec", message, warning=True)

    async def _event_quietly(self, kind: str, namespace: str, name: str, uid: str, reason: str, message: str,
                             *, warning: bool) -> bool:
        """Record a core/v1 Event; True once written. Failures are logged, never raised."""
        ns = namespace or "default"
        now = rfc3339()
        api = {"Pod": "v1", "Queue": QUEUE_API, "PodGroup": PODGROUP_API, "Topology": TOPOLOGY_API}.get(kind, "v1")
        ev = {"metadata": {"generateName": f"{name}.", "namespace": ns},
              "involvedObject": {"kind": kind, "namespace": namespace or None, "name": name, "uid": uid or None,
                                 "apiVersion": api},
              "reason": reason, "message": message[:1000], "type": "Warning" if warning else "Normal",
              "source": {"component": self.scheduler_name}, "reportingComponent": self.scheduler_name,
              "reportingInstance": self.scheduler_name,
              "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        try:
            await self.client.create(EVENTS, ev, ns)
        except Exception as e:
            logger.debug("event %s on %s/%s: %r", reason, namespace, name, e)
            return False
        return True


def _victim_sets(evictions: list[Evict]) -> list[list[Evict]]:
    sets: dict[tuple[str, str], list[Evict]] = defaultdict(list)
    for e in evictions:
        sets[(e.action, e.preemptor or e.job)].append(e)
    return list(sets.values())
