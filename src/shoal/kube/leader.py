"""Leader election on a coordination.k8s.io/v1 Lease (the client-go protocol, simplified).

Contract: `run()` loops forever. A candidate takes the lease when it is free, released, or its
holder has not renewed it for `lease_seconds` as observed *locally* (like client-go, the
holder's clock is never trusted); every write is guarded by the lease's resourceVersion, so two
candidates never both win. The leader renews every `renew_seconds`; if it cannot renew within its
renew deadline (`lease_seconds - renew_seconds`; a hanging request is cut off there) it steps down
(`is_leader` false) before another instance may take the lease. With the defaults (10 s lease, 2 s retry)
a dead leader is replaced within ~12 s. `release()` hands the lease back on a clean shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from shoal.kube.client import JSON, LEASES, ApiError, KubeClient

logger = logging.getLogger(__name__)


def _micro_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client: KubeClient, name: str, namespace: str, identity: str, *,
                 lease_seconds: float = 10.0, renew_seconds: float = 2.0,
                 clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[bool], None] | None = None) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.clock = clock
        self.on_change = on_change
        self.is_leader = False
        self.became_leader = asyncio.Event()
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._renewed_at = 0.0

    async def run(self) -> None:
        while True:
            await self.step()
            await asyncio.sleep(self.renew_seconds)

    @property
    def renew_deadline(self) -> float:
        """Seconds a leader may go without renewing before it steps down: one retry period less
        than the lease, so it has stopped before any other instance can see the lease expire."""
        return max(self.lease_seconds - self.renew_seconds, self.lease_seconds / 2)

    async def step(self) -> None:
        """One round of `run`: acquire or renew, bounded in time, then step down if need be.

        A leader's request may hang (an API server shutting down answers nothing); unbounded, the
        leader would go on scheduling after the lease expired and another instance took it. So a
        leader's attempt is cut off at its renew deadline, and a candidate's after `lease_seconds`.
        """
        if self.is_leader:
            timeout = max(0.05, self._renewed_at + self.renew_deadline - self.clock())
        else:
            timeout = self.lease_seconds
        try:
            async with asyncio.timeout(timeout):  # not wait_for: it can drop a cancellation (kube/aio.py)
                ok = await self.try_acquire_or_renew()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # TimeoutError included
            logger.warning("lease %s/%s: %r", self.namespace, self.name, e)
            ok = False
        if ok:
            self._renewed_at = self.clock()
            self._set(True)
        elif self.is_leader and self.clock() - self._renewed_at >= self.renew_deadline:
            self._set(False)  # until then, keep leading: the lease is still ours

    def _set(self, leader: bool) -> None:
        if leader != self.is_leader:
            self.is_leader = leader
            logger.warning("%s: %s leader of %s/%s", self.identity, "became" if leader else "is no longer",
                           self.namespace, self.name)
            if leader:
                self.became_leader.set()
            else:
                self.became_leader.clear()
            if self.on_change is not None:
                self.on_change(leader)

    async def try_acquire_or_renew(self) -> bool:
        """One round: True when this instance holds the lease afterwards."""
        now_wall = time.time()
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except ApiError as e:
            if e.code != 404:
                raise
            try:
                await self.client.create(LEASES, self._lease_body(None, now_wall, transitions=0), self.namespace)
                return True
            except ApiError as e2:
                if e2.code == 409:
                    return False
                raise
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock()
        expired = self.clock() - self._observed_at >= float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        body = self._lease_body(lease, now_wall, transitions,
                                acquire=str(spec.get("acquireTime") or "") if holder == self.identity else None)
        try:
            await self.client.replace(LEASES, body, self.namespace)
        except ApiError as e:
            if e.code == 409:  # someone else wrote first
                return False
            raise
        return True

    def _lease_body(self, lease: JSON | None, now: float, transitions: int, acquire: str | None = None) -> JSON:
        meta = {"name": self.name, "namespace": self.namespace}
        if lease is not None:
            meta["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion", "")
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_seconds),
                         "acquireTime": acquire or _micro_time(now), "renewTime": _micro_time(now),
                         "leaseTransitions": transitions}}

    async def release(self) -> None:
        """Give the lease up (clean shutdown) so a standby takes over at once."""
        if not self.is_leader:
            return
        self._set(False)
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["renewTime"] = _micro_time(time.time())
            lease["spec"]["leaseDurationSeconds"] = 1
            await self.client.replace(LEASES, lease, self.namespace)
        except Exception as e:
            logger.info("lease release: %r", e)
