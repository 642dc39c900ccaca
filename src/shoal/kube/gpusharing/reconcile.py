"""Clean-up and restart rebuild of GPU sharing, from what the API shows (labels and annotations).

`reconcile(sb)` runs before the first cycle of every leadership and then on each relevant change
(at least every `resync` seconds). Rules, per (node, GPU group) key:
* a group is *used* while one of our shared pods is on the node with the group's label (bound,
  running or terminating), is assumed in the cache, or is being bound right now;
* a reservation pod of an unused group is deleted (the last pod left, or a bind was released or
  interrupted by a restart); a failed one is deleted too; of two live ones for one group, the
  oldest with a device stays;
* a used group without a live reservation pod: a running pod of it loses its pod (evicted, as
  KAI's binder does: the device plugin no longer accounts for the device it uses); for a bound pod
  whose container has not started, the reservation pod is made again;
* each bound shared pod is verified once per process: its ConfigMap (and, in `fractioning` mode,
  its fractiond annotations) must carry its group's device UUIDs; a wrong or missing value is
  rewritten (the restart between bind and ConfigMap write);
* ConfigMaps of deleted shared pods are deleted (their owner reference lets the garbage
  collector do the same where it runs).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from shoal.kai.objects import meta
from shoal.kai.sharing import (
    VISIBLE_DEVICES,
    configmap_prefix,
    fraction_container,
    fractioning_annotations,
    reserved_device,
    visible_devices_key_map,
)
from shoal.kai.units import ConvertError
from shoal.kube.aio import wait_set
from shoal.kube.client import CONFIGMAPS, PODS, ApiError
from shoal.kube.gpusharing.binder import SharingBinder, portion_text
from shoal.model.pod import Pod
from shoal.model.status import PodStatus

logger = logging.getLogger(__name__)

Key = tuple[str, str]
_HOLDING = (PodStatus.BINDING, PodStatus.BOUND, PodStatus.RUNNING, PodStatus.RELEASING)
#: Bound pods verified per pass (each costs two or three reads).
VERIFY_BATCH = 50


@dataclass(slots=True)
class ReconcileReport:
    deleted: int = 0
    recreated: int = 0
    evicted: int = 0
    repaired: int = 0


def used_groups(sb: SharingBinder) -> dict[Key, list[Pod]]:
    """(node, group) -> our pods holding it; groups of binds in flight map to []."""
    used: dict[Key, list[Pod]] = defaultdict(list)
    for uid, pod in sb.cache.pods.items():
        p = sb.cache.assumed[uid][0] if uid in sb.cache.assumed else pod
        if p.node and p.gpu.is_shared and p.status in _HOLDING:
            for g in p.gpu_groups:
                used[(p.node, g)].append(p)
    for keys in sb.in_flight.values():
        for k in keys:
            used.setdefault(k, [])
    return used


async def reconcile(sb: SharingBinder) -> ReconcileReport:
    """One pass of the rules in the module doc; never raises on an API error (it logs, the next pass retries)."""
    report = ReconcileReport()
    used = used_groups(sb)
    await _delete_unneeded(sb, used, report)
    await _restore_missing(sb, used, report)
    await _verify_bound(sb, used, report)
    await _collect_configmaps(sb)
    return report


async def _delete_unneeded(sb: SharingBinder, used: dict[Key, list[Pod]], report: ReconcileReport) -> None:
    for key, pods in list(sb.store.by_key.items()):
        live = sb.store.live(key)
        keep = None
        if key in used and live:
            keep = next((p for p in live if reserved_device(p)), live[0])
        for p in list(pods.values()):
            if p is keep or meta(p).get("deletionTimestamp") or meta(p).get("uid") in sb.store.doomed:
                continue
            # A bind spawned while this pass awaited an earlier delete uses the key from now on;
            # no await between this check and the delete's doomed mark (see ReservationStore).
            if key not in used and any(key in keys for keys in sb.in_flight.values()):
                break
            why = "its GPU group is no longer used" if key not in used else "a duplicate or failed reservation"
            logger.info("reservation pod %s on %s group %s: deleting, %s", meta(p).get("name"), key[0], key[1], why)
            await sb.store.delete(p)
            report.deleted += 1


async def _restore_missing(sb: SharingBinder, used: dict[Key, list[Pod]], report: ReconcileReport) -> None:
    for key, pods in used.items():
        if sb.store.live(key) or not pods or any(p.uid in sb.in_flight for p in pods):
            continue
        running = [p for p in pods if p.status == PodStatus.RUNNING]
        for p in running:
            await _evict_unreserved(sb, p, key)
            report.evicted += 1
        if len(running) < len(pods):
            await sb.store.create_for(key[0], key[1])
            report.recreated += 1
            for p in pods:
                sb.verified.discard(p.uid)


async def _evict_unreserved(sb: SharingBinder, p: Pod, key: Key) -> None:
    message = (f"GPU group {key[1]} on {key[0]} has no reservation pod any more: the device this pod uses is "
               f"not accounted for by the device plugin, so the pod is evicted to be placed again")
    logger.warning("%s/%s: %s", p.namespace, p.name, message)
    await sb.events("Pod", p.namespace, p.name, p.uid, "GPUReservationLost", message)
    try:
        await sb.client.evict(p.namespace, p.name, p.uid)
    except ApiError as e:
        logger.warning("evicting %s/%s: %s", p.namespace, p.name, e)


async def _verify_bound(sb: SharingBinder, used: dict[Key, list[Pod]], report: ReconcileReport) -> None:
    todo: dict[str, Pod] = {}
    for pods in used.values():
        for p in pods:
            if p.uid not in sb.verified and p.uid not in sb.in_flight and p.status in (PodStatus.BOUND,
                                                                                         PodStatus.RUNNING):
                todo[p.uid] = p
    for p in list(todo.values())[:VERIFY_BATCH]:
        devices = [sb.store.device((p.node or "", g)) for g in p.gpu_groups]
        if not all(devices):
            continue  # the device is not known yet: verified on a later pass
        try:
            if await _repair(sb, p, [d for d in devices if d]):
                report.repaired += 1
            sb.verified.add(p.uid)
        except ApiError as e:
            if e.code == 404:
                sb.verified.add(p.uid)
            else:
                logger.warning("verifying GPU sharing of %s/%s: %s", p.namespace, p.name, e)
        except ConvertError as e:
            sb.verified.add(p.uid)
            logger.warning("verifying GPU sharing of %s/%s: %s", p.namespace, p.name, e)


async def _repair(sb: SharingBinder, p: Pod, devices: list[str]) -> bool:
    """Rewrite the pod's ConfigMaps / annotations when they do not carry `devices`; True if it did."""
    obj = await sb.client.get(PODS, p.name, p.namespace)
    ref = fraction_container(obj)
    want = ",".join(devices)
    prefix = configmap_prefix(obj)
    changed = False
    if prefix is not None:
        holder = visible_devices_key_map(obj, ref, prefix)
        try:
            have = ((await sb.client.get(CONFIGMAPS, holder, p.namespace)).get("data") or {}).get(VISIBLE_DEVICES)
        except ApiError as e:
            if e.code != 404:
                raise
            have = None
        if have != want:
            logger.info("%s/%s: ConfigMap %s has %s=%r, the group's reservation says %r: rewriting", p.namespace,
                        p.name, holder, VISIBLE_DEVICES, have, want)
            await sb.write_configmaps(obj, ref, prefix, want, portion_text(p.gpu.portion_milli))
            changed = True
    if sb.opts.fractioning:
        anns = fractioning_annotations(ref.name, devices, sb._memory_mib(obj, p.gpu.portion_milli, p.node or ""))
        if any((meta(obj).get("annotations") or {}).get(k) != v for k, v in anns.items()):
            await sb.client.patch(PODS, p.name, {"metadata": {"annotations": anns}}, p.namespace)
            changed = True
    return changed


async def _collect_configmaps(sb: SharingBinder) -> None:
    while sb.garbage:
        ns, name = sb.garbage.pop()
        try:
            await sb.client.request("DELETE", CONFIGMAPS.path(ns, name))
        except ApiError as e:
            if e.code != 404:
                logger.warning("deleting ConfigMap %s/%s: %s", ns, name, e)


async def run(sb: SharingBinder, leading: Callable[[], bool]) -> None:
    """Reconcile on every wake-up of `sb` and at least every `resync` seconds, while `leading()`."""
    while True:
        await wait_set(sb.wake, sb.opts.resync)
        sb.wake.clear()
        if leading():
            try:
                await reconcile(sb)
            except Exception:  # one bad pass must not stop the clean-up
                logger.exception("GPU sharing reconcile failed")
