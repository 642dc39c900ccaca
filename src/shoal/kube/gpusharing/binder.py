"""The applier's hook for shared-GPU binds: the pod is bound only after its devices are known.

Order for one shared pod (each step idempotent, so a restart anywhere repeats at most the step):
1. the GPU group label(s) and KAI's annotations on the pod (stale group labels removed);
2. per GPU group, the reservation pod's device UUID (`ReservationStore.acquire`; the pod stays
   assumed in the cache meanwhile, so no other cycle promises the GPU);
3. the shared-GPU ConfigMaps, when the webhook linked the pod to them: `NVIDIA_VISIBLE_DEVICES`
   (the UUIDs, comma-separated) and `GPU_PORTION`, owned by the pod;
4. in `fractioning` mode, the Fractioning Operator's per-container annotations;
5. the binding itself (the applier's `finish`).

A bind runs in a task of its own, so a slow reservation never holds up the scheduling cycle. A
failure (timeout, failed reservation pod, a pod that names a missing container) forgets the
assumption, removes the group labels, records a `GPUSharingFailed` event naming the cause and
wakes the reconciler, which deletes the reservation pod if no other pod uses the group.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable

from shoal.framework.decisions import Bind
from shoal.kai.names import GPU_GROUP_LABEL
from shoal.kai.objects import JSON, meta
from shoal.kai.sharing import (
    GPU_PORTION,
    NUM_GPUS_BC,
    VISIBLE_DEVICES,
    ContainerRef,
    configmap_names,
    configmap_prefix,
    fraction_container,
    fractioning_annotations,
    visible_devices_key_map,
)
from shoal.kai.units import ConvertError
from shoal.kube.cache import ClusterCache
from shoal.kube.client import CONFIGMAPS, PODS, ApiError, KubeClient
from shoal.kube.gpusharing.options import SharingOptions
from shoal.kube.gpusharing.reservations import ReservationStore, SharingError

logger = logging.getLogger(__name__)

#: (kind, namespace, name, uid, reason, message) -> records a Warning event (best effort).
EventSink = Callable[[str, str, str, str, str, str], Awaitable[None]]
RECEIVED_TYPE_ANNOTATION = "received-resource-type"
GPU_PORTION_ANNOTATION = "gpu-portion"
GPU_GROUPS_ANNOTATION = "shoal.dev/gpu-groups"


def sharing_patch(b: Bind, current_labels: dict[str, str] | None = None) -> JSON:
    """KAI-style GPU sharing record: group label(s), received type and portion annotations; group
    labels of an earlier, abandoned placement (`current_labels`) are removed."""
    labels: dict[str, str | None] = {k: None for k in current_labels or {}
                                     if k == GPU_GROUP_LABEL or k.startswith(GPU_GROUP_LABEL + "/")}
    labels[GPU_GROUP_LABEL] = b.gpu_groups[0]
    if len(b.gpu_groups) > 1:
        labels.update({f"{GPU_GROUP_LABEL}/{g}": g for g in b.gpu_groups})
    return {"metadata": {"labels": labels, "annotations": {
        RECEIVED_TYPE_ANNOTATION: b.resource_type,
        GPU_PORTION_ANNOTATION: f"{b.gpu_portion_milli / 1000:.2f}",
        GPU_GROUPS_ANNOTATION: ",".join(b.gpu_groups),
    }}}


def failpoint(step: str) -> None:
    """Crash here (exit 17, no clean-up) when $SHOAL_FAILPOINT names this step: the e2e restart
    tests stop the scheduler between reservation and bind (`reserved`) and right after a bind (`bound`),
    the chaos tests right after a reclaim's first eviction (`evicted`, kube/applier.py)."""
    if os.environ.get("SHOAL_FAILPOINT") == step:
        logger.error("failpoint %s: exiting", step)
        os._exit(17)


def portion_text(milli: int) -> str:
    return f"{milli / 1000:.2f}"


class SharingBinder:
    def __init__(self, client: KubeClient, cache: ClusterCache, options: SharingOptions, events: EventSink) -> None:
        self.client = client
        self.cache = cache
        self.opts = options
        self.events = events
        self.store = ReservationStore(client, options.reservation)
        #: pod uid -> the (node, group) keys of its bind in flight (the reconciler keeps them).
        self.in_flight: dict[str, list[tuple[str, str]]] = {}
        #: Bound shared pods whose ConfigMaps / annotations are known to be right.
        self.verified: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.wake = asyncio.Event()
        #: (namespace, name) of ConfigMaps whose pod was deleted (the reconciler deletes them).
        self.garbage: set[tuple[str, str]] = set()
        self.store.on_change = self.wake.set

    def on_pod(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        """Informer handler (never blocks): reservation pods to the store; a shared pod of ours that
        leaves or ends wakes the reconciler, and its ConfigMaps are queued for deletion."""
        self.store.on_pod(kind, old, new)
        obj = new or old
        if obj is None or (obj.get("spec") or {}).get("schedulerName") != self.cache.scheduler_name:
            return
        labels = meta(obj).get("labels") or {}
        if not any(k == GPU_GROUP_LABEL or k.startswith(GPU_GROUP_LABEL + "/") for k in labels):
            return
        if kind == "DELETED" or new is None:
            self.verified.discard(str(meta(obj).get("uid")))
            self.garbage.update(configmaps_of(obj))
            self.wake.set()
        elif (new.get("status") or {}).get("phase") in ("Succeeded", "Failed") or meta(new).get("deletionTimestamp"):
            self.wake.set()

    def spawn(self, b: Bind, finish: Callable[[], Awaitable[bool]]) -> None:
        """Start the shared bind of `b` in its own task; `finish()` binds (True on success)."""
        self.in_flight[b.pod] = [(b.node, g) for g in b.gpu_groups]
        task = asyncio.create_task(self.bind(b, finish), name=f"shared-bind-{b.namespace}/{b.name}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def bind(self, b: Bind, finish: Callable[[], Awaitable[bool]]) -> None:
        """Steps 1-5 of the module doc for one pod; never raises."""
        self.in_flight[b.pod] = [(b.node, g) for g in b.gpu_groups]
        try:
            obj = await self.client.get(PODS, b.name, b.namespace)
            if meta(obj).get("uid") != b.pod or (obj.get("spec") or {}).get("nodeName"):
                self.cache.forget(b.pod)
                return
            ref = fraction_container(obj)
            await self.client.patch(PODS, b.name, sharing_patch(b, meta(obj).get("labels")), b.namespace)
            devices = await self.devices(b)
            failpoint("reserved")
            await self.write_devices(obj, ref, devices, b.gpu_portion_milli, b.node)
            if await finish():
                self.verified.add(b.pod)
                failpoint("bound")
        except (SharingError, ConvertError) as e:
            await self._release(b, str(e))
        except ApiError as e:
            if e.code == 404:  # the pod is gone
                self.cache.forget(b.pod)
            else:
                await self._release(b, f"API error: {e}")
        except Exception as e:  # a bug must not kill the task silently
            logger.exception("shared bind of %s/%s", b.namespace, b.name)
            await self._release(b, f"internal error: {e!r}")
        finally:
            self.in_flight.pop(b.pod, None)
            self.wake.set()

    async def devices(self, b: Bind) -> list[str]:
        """One device UUID per GPU group of the bind, in group order."""
        deadline = time.monotonic() + self.opts.timeout

        def keepalive() -> None:
            if b.pod in self.cache.assumed:
                self.cache.assume(b.pod, b.node, b.gpu_groups)

        return list(await asyncio.gather(*(self.store.acquire(b.node, g, deadline, keepalive)
                                           for g in b.gpu_groups)))

    async def write_devices(self, obj: JSON, ref: ContainerRef, devices: list[str], portion_milli: int,
                            node: str) -> None:
        """Steps 3 and 4: the ConfigMaps (when the pod is linked to them), the fractiond annotations."""
        prefix = configmap_prefix(obj)
        if prefix is not None:
            await self.write_configmaps(obj, ref, prefix, ",".join(devices), portion_text(portion_milli))
        elif not self.opts.fractioning:
            m = meta(obj)
            await self.events("Pod", str(m.get("namespace")), str(m.get("name")), str(m.get("uid")),
                              "GPUSharingNotLinked",
                              "the pod has no runai/shared-gpu-configmap annotation (was the admission webhook "
                              "down?): its container will not see NVIDIA_VISIBLE_DEVICES")
        if self.opts.fractioning:
            anns = fractioning_annotations(ref.name, devices, self._memory_mib(obj, portion_milli, node))
            if any((meta(obj).get("annotations") or {}).get(k) != v for k, v in anns.items()):
                await self.client.patch(PODS, str(meta(obj).get("name")), {"metadata": {"annotations": anns}},
                                        str(meta(obj).get("namespace")))

    def _memory_mib(self, obj: JSON, portion_milli: int, node: str) -> int:
        """The device memory the pod may use: its `gpu-memory`, else its portion of the node's GPU memory."""
        pod = self.cache.pods.get(str(meta(obj).get("uid")))
        if pod is not None and pod.gpu.memory_mib > 0:
            return pod.gpu.memory_mib
        n = self.cache.nodes.get(node)
        return portion_milli * n.gpu_memory_mib // 1000 if n is not None else 0

    async def write_configmaps(self, obj: JSON, ref: ContainerRef, prefix: str, devices: str, portion: str) -> None:
        """Create or update the capabilities and env ConfigMaps, owned by the pod (KAI's data keys)."""
        m = meta(obj)
        ns = str(m.get("namespace"))
        caps, evar = configmap_names(prefix, ref)
        devices_map = visible_devices_key_map(obj, ref, prefix)
        data: dict[str, dict[str, str]] = {caps: {GPU_PORTION: portion, NUM_GPUS_BC: portion}, evar: {}}
        data[devices_map][VISIBLE_DEVICES] = devices
        owner = [{"apiVersion": "v1", "kind": "Pod", "name": m.get("name"), "uid": m.get("uid")}]
        for name, values in data.items():
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": ns, "ownerReferences": owner}, "data": values}
            try:
                await self.client.create(CONFIGMAPS, body, ns)
            except ApiError as e:
                if e.code != 409:
                    raise
                await self.client.patch(CONFIGMAPS, name, {"metadata": {"ownerReferences": owner}, "data": values},
                                        ns)

    async def _release(self, b: Bind, why: str) -> None:
        """Give the group back: forget the assumption, drop the labels, say why on the pod."""
        logger.warning("shared bind of %s/%s to %s released: %s", b.namespace, b.name, b.node, why)
        self.cache.forget(b.pod)
        labels: dict[str, None] = {GPU_GROUP_LABEL: None}
        labels.update({f"{GPU_GROUP_LABEL}/{g}": None for g in b.gpu_groups})
        try:
            await self.client.patch(PODS, b.name, {"metadata": {"labels": labels}}, b.namespace)
        except ApiError as e:
            logger.debug("removing GPU group labels of %s/%s: %s", b.namespace, b.name, e)
        await self.events("Pod", b.namespace, b.name, b.pod, "GPUSharingFailed",
                          f"GPU group(s) {', '.join(b.gpu_groups)} on {b.node} released: {why}")


def configmaps_of(obj: JSON) -> list[tuple[str, str]]:
    """(namespace, name) of a shared pod's ConfigMaps; [] when it has none (or names no container)."""
    prefix = configmap_prefix(obj)
    if prefix is None:
        return []
    try:
        ref = fraction_container(obj)
    except ConvertError:
        return []
    ns = str(meta(obj).get("namespace"))
    return [(ns, n) for n in configmap_names(prefix, ref)]
