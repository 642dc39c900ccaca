"""Reservation pods as the pod informer shows them, and acquiring a device for one GPU group.

Contracts:
* `on_pod` keeps every reservation pod (label `app=kai-resource-reservation` in the reservation
  namespace) by (node, GPU group); it never blocks and wakes whoever waits on a change.
* `acquire(node, group, deadline)` returns the device UUID of the group's reservation pod,
  creating the pod when the group has none. The pod's name is deterministic, so two binds of the
  same group (or a restarted scheduler) meet at one pod; a pod still terminating is waited out,
  never duplicated. A failed reservation pod, or no device by `deadline`, raises `SharingError`
  with the reason (the caller releases the group).
* `delete(pod)` marks the pod *doomed* before it sends the DELETE, and `live` / `device` never
  show a doomed pod: a bind that starts while the reconciler deletes its group's pod waits for the
  pod to go and makes a new one, instead of taking the device of a pod about to vanish (its
  running pod would then be evicted as unaccounted for). The mark ends with the pod's DELETED
  event (also after a 404 / 409: the pod is gone), or at once when the DELETE fails otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from shoal.kai.objects import JSON, meta
from shoal.kai.sharing import (
    ReservationSpec,
    is_reservation_pod,
    reservation_key,
    reservation_pod,
    reservation_pod_name,
    reserved_device,
)
from shoal.kube.aio import wait_set
from shoal.kube.client import PODS, ApiError, KubeClient

logger = logging.getLogger(__name__)

Key = tuple[str, str]


class SharingError(Exception):
    """A shared pod cannot get its device now; the message says why (it becomes an event)."""


def _alive(obj: JSON) -> bool:
    phase = (obj.get("status") or {}).get("phase")
    return not meta(obj).get("deletionTimestamp") and phase not in ("Failed", "Succeeded")


class ReservationStore:
    def __init__(self, client: KubeClient, spec: ReservationSpec) -> None:
        self.client = client
        self.spec = spec
        #: (node, group) -> reservation pods by name (normally one).
        self.by_key: dict[Key, dict[str, JSON]] = {}
        self._waiters: set[asyncio.Event] = set()
        #: uids of reservation pods whose DELETE is sent or about to be (see the module doc).
        self.doomed: set[str] = set()
        #: Called on every change (the reconciler's wake-up).
        self.on_change: Callable[[], None] = lambda: None

    def on_pod(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        obj = new or old
        if obj is None or meta(obj).get("namespace") != self.spec.namespace or not is_reservation_pod(obj):
            return
        name = str(meta(obj).get("name"))
        for k in [k for k, pods in self.by_key.items() if name in pods]:
            self.by_key[k].pop(name, None)
            if not self.by_key[k]:
                del self.by_key[k]
        key = reservation_key(obj)
        if kind == "DELETED" or new is None:
            self.doomed.discard(str(meta(obj).get("uid")))
        if new is not None and kind != "DELETED" and key is not None:
            self.by_key.setdefault(key, {})[name] = new
        for ev in self._waiters:
            ev.set()
        self.on_change()

    def live(self, key: Key) -> list[JSON]:
        """The group's reservation pods that hold (or will hold) a device, oldest first."""
        pods = [p for p in self.by_key.get(key, {}).values() if _alive(p) and meta(p).get("uid") not in self.doomed]
        return sorted(pods, key=lambda p: (str(meta(p).get("creationTimestamp", "")), str(meta(p).get("name"))))

    def device(self, key: Key) -> str | None:
        """The device the group's oldest live reservation pod reported, if any."""
        for p in self.live(key):
            dev = reserved_device(p)
            if dev:
                return dev
        return None

    async def acquire(self, node: str, group: str, deadline: float, keepalive: Callable[[], None]) -> str:
        """The device of (node, group), creating its reservation pod if needed; `keepalive` is called
        while waiting (it keeps the bind assumed in the cache)."""
        key = (node, group)
        name = reservation_pod_name(node, group)
        ev = asyncio.Event()
        self._waiters.add(ev)
        try:
            while True:
                ev.clear()
                dev = self._check(key, name)
                if dev:
                    return dev
                if not self.by_key.get(key) and not self._name_taken(name):
                    await self.create_for(node, group)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SharingError(f"no GPU device reported by reservation pod {self.spec.namespace}/{name} on "
                                       f"node {node} within the timeout (is the reservation agent running there?)")
                keepalive()
                await wait_set(ev, min(remaining, 5.0))
        finally:
            self._waiters.discard(ev)

    def _check(self, key: Key, name: str) -> str | None:
        dev = self.device(key)
        if dev:
            return dev
        for p in self.by_key.get(key, {}).values():
            if (p.get("status") or {}).get("phase") == "Failed":
                reason = (p.get("status") or {}).get("reason") or (p.get("status") or {}).get("message") or "Failed"
                raise SharingError(f"reservation pod {self.spec.namespace}/{meta(p).get('name')} failed on node "
                                   f"{key[0]}: {reason}")
        return None

    def _name_taken(self, name: str) -> bool:
        """A pod of that name exists under another key or is terminating (wait for it to go)."""
        return any(name in pods for pods in self.by_key.values())

    async def create_for(self, node: str, group: str) -> None:
        """Create the reservation pod of (node, group); one that exists already (409) is fine."""
        pod = reservation_pod(node, group, self.spec)
        try:
            await self.client.create(PODS, pod, self.spec.namespace)
            logger.info("reservation pod %s/%s created for GPU group %s on %s", self.spec.namespace,
                        pod["metadata"]["name"], group, node)
        except ApiError as e:
            if e.code != 409:  # 409: it exists (ours, from before); the informer will show it
                raise SharingError(f"cannot create reservation pod {self.spec.namespace}/{pod['metadata']['name']}: "
                                   f"{e.message}") from e

    async def delete(self, obj: JSON) -> None:
        """Delete a reservation pod at once (grace 0); a 404 is fine. The pod is doomed from the call
        on (the caller must not await between deciding and calling)."""
        name = str(meta(obj).get("name"))
        uid = str(meta(obj).get("uid"))
        self.doomed.add(uid)
        try:
            await self.client.request("DELETE", PODS.path(self.spec.namespace, name),
                                      body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                                            "preconditions": {"uid": meta(obj).get("uid")}})
            logger.info("reservation pod %s/%s deleted", self.spec.namespace, name)
        except ApiError as e:
            # 404 / 409 (uid precondition): that pod is gone already (it stays doomed until its
            # DELETED event). Any other error: it stays, and is live again until a later pass
            # deletes it.
            if e.code not in (404, 409):
                self.doomed.discard(uid)
                logger.warning("deleting reservation pod %s/%s: %s", self.spec.namespace, name, e)
        except BaseException:
            self.doomed.discard(uid)
            raise
