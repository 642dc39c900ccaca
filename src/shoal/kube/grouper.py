"""The pod grouper: gives every pod of ours a PodGroup derived from its top owner (KAI's podgrouper).

Contract: for each pod with our scheduler name, no `pod-group-name` annotation, not bound and not
finished, it follows controller ownerReferences through the API (owners cached for `owner_ttl`
seconds), derives the workload's PodGroups with `shoal.workloads.derive_podgroups`, creates the
pod's PodGroup (owned by the top owner, so garbage collection removes it) or updates its spec,
then annotates/labels the pod (`pod-group-name`, `kai.scheduler/subgroup-name`). A workload the map
rejects gets a `PodGrouperError` event and the pod falls back to a gang of one (`cache.ungroupable`).
While the grouper runs, the cache holds ungrouped pods back so no gang member is bound alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from shoal.kai.names import PODGROUP_ANNOTATION
from shoal.kai.objects import meta
from shoal.kube.cache import ClusterCache
from shoal.kube.client import EVENTS, JSON, PODGROUPS, PODS, ApiError, KubeClient
from shoal.kube.shard import Shard
from shoal.workloads import WorkloadError, derive_podgroups, pod_assignment, pod_metadata_patch
from shoal.workloads.owners import OwnerKey, owner_walk

logger = logging.getLogger(__name__)


def owner_path(key: OwnerKey) -> str:
    """REST path of an owner. Plural = lower-cased kind + `s` (true of every kind the map knows)."""
    prefix = "/api/v1" if key.api_version == "v1" else f"/apis/{key.api_version}"
    plural = key.kind.lower() + ("es" if key.kind.lower().endswith("s") else "s")
    ns = f"/namespaces/{key.namespace}" if key.namespace else ""
    return f"{prefix}{ns}/{plural}/{key.name}"


def needs_grouping(obj: JSON, scheduler_name: str) -> bool:
    m = meta(obj)
    spec = obj.get("spec") or {}
    return (spec.get("schedulerName") == scheduler_name and not spec.get("nodeName")
            and PODGROUP_ANNOTATION not in (m.get("annotations") or {}) and not m.get("deletionTimestamp")
            and (obj.get("status") or {}).get("phase") in (None, "Pending"))


#: The owner cache is swept of expired entries whenever it doubles from this size on.
OWNER_CACHE_MIN = 256


class PodGrouper:
    def __init__(self, client: KubeClient, cache: ClusterCache, *, owner_ttl: float = 30.0,
                 workers: int = 8, shard: Shard | None = None) -> None:
        self.client = client
        self.cache = cache
        #: A scheduling shard groups only its pool's pods (another shard groups the rest).
        self.shard = shard or Shard()
        self.owner_ttl = owner_ttl
        self.workers = workers
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.pending: dict[str, JSON] = {}
        self._owners: dict[str, tuple[float, JSON | None]] = {}
        self._prune_at = OWNER_CACHE_MIN
        self.grouped = 0

    def on_pod(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        """Informer hook: queue pods that still need a PodGroup (latest object wins)."""
        if new is None or not needs_grouping(new, self.cache.scheduler_name) or not self.shard.groups_pod(new):
            return
        uid = str(meta(new).get("uid"))
        if uid in self.cache.ungroupable:
            return
        first = uid not in self.pending
        self.pending[uid] = new
        if first:
            self.queue.put_nowait(uid)

    async def run(self) -> None:
        await asyncio.gather(*(self._worker() for _ in range(self.workers)))

    async def _worker(self) -> None:
        while True:
            uid = await self.queue.get()
            pod = self.pending.pop(uid, None)
            if pod is None:
                continue
            try:
                await self.group(pod)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # an API hiccup: retry this pod a little later
                logger.warning("grouping %s: %r; retrying", meta(pod).get("name"), e)
                await asyncio.sleep(1.0)
                if uid not in self.pending:
                    self.pending[uid] = pod
                    self.queue.put_nowait(uid)

    async def group(self, pod: JSON) -> None:
        m = meta(pod)
        ns, name, uid = str(m.get("namespace")), str(m.get("name")), str(m.get("uid"))
        try:
            chain = await self.owner_chain(pod)
            specs = derive_podgroups(chain, pod, priority_classes=self.cache.priorities)
            group, _ = pod_assignment(pod, specs)
            patch = pod_metadata_patch(pod, specs)
        except WorkloadError as e:
            self.cache.mark_ungroupable(uid)
            await self._event(ns, name, uid, f"cannot derive a PodGroup: {e}; scheduled as a gang of one")
            return
        spec = next(s for s in specs if s.name == group)
        manifest = spec.to_manifest()
        labels = manifest["metadata"].setdefault("labels", {})
        for key, value in self.shard.pool_labels(pod).items():  # KAI's podgrouper: the gang joins the pod's pool
            labels.setdefault(key, value)
        await self.ensure_podgroup(manifest)
        try:
            await self.client.patch(PODS, name, patch, ns)  # already {"metadata": {...}}
        except ApiError as e:
            if e.code != 404:
                raise
        self.grouped += 1

    async def owner_chain(self, pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """`shoal.workloads.resolve_owner_chain`'s walk (`owner_walk`), with async, cached lookups."""
        walk = owner_walk(pod)
        try:
            key = next(walk)
            while True:
                key = walk.send(await self._owner(key))
        except StopIteration as done:
            chain: list[Mapping[str, Any]] = done.value
            return chain

    async def _owner(self, key: OwnerKey) -> JSON | None:
        path = owner_path(key)
        hit = self._owners.get(path)
        if hit is not None and time.monotonic() - hit[0] < self.owner_ttl:
            return hit[1]
        try:
            obj: JSON | None = await self.client.request("GET", path)
        except ApiError as e:
            if e.code not in (403, 404):
                raise
            obj = None  # unreadable owner: the chain ends at the last readable one
        now = time.monotonic()
        self._owners[path] = (now, obj)
        if len(self._owners) >= self._prune_at:  # owners come and go (Jobs): forget expired ones
            self._owners = {p: hit for p, hit in self._owners.items() if now - hit[0] < self.owner_ttl}
            self._prune_at = max(OWNER_CACHE_MIN, 2 * len(self._owners))
        return obj

    async def ensure_podgroup(self, manifest: JSON) -> None:
        ns = manifest["metadata"]["namespace"]
        try:
            await self.client.create(PODGROUPS, manifest, ns)
        except ApiError as e:
            if e.code != 409:
                raise
            current = await self.client.get(PODGROUPS, manifest["metadata"]["name"], ns)
            if current.get("spec", {}) != {**current.get("spec", {}), **manifest["spec"]}:
                await self.client.patch(PODGROUPS, manifest["metadata"]["name"], {"spec": manifest["spec"]}, ns)

    async def _event(self, ns: str, name: str, uid: str, message: str) -> None:
        ev = {"metadata": {"generateName": f"{name}.", "namespace": ns},
              "involvedObject": {"kind": "Pod", "namespace": ns, "name": name, "uid": uid, "apiVersion": "v1"},
              "reason": "PodGrouperError", "message": message[:1000], "type": "Warning",
              "source": {"component": self.cache.scheduler_name}}
        try:
            await self.client.create(EVENTS, ev, ns)
        except ApiError as e:
            logger.debug("event on %s/%s: %s", ns, name, e)
