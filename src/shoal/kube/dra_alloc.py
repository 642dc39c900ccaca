"""Allocating a pod's ResourceClaims before its bind, as kube-scheduler's DRA plugin does in PreBind.

For each claim of the pod that is not reserved for it yet: a claim without an allocation gets the
`resource.kubernetes.io/delete-protection` finalizer, then `status.allocation` (device results and
node selector) together with `status.reservedFor` += the pod; an allocated claim (shared by several
pods) gets the pod added to `reservedFor`. Every write carries the claim's resourceVersion (a
concurrent change fails it; the bind is then retried next cycle) and its answer is applied to the
cache at once, so the next allocation sees the devices taken. Allocations are serialised (one lock):
two binds never pick the same device. Release is the resource-claim controller's (kube-controller-
manager): it drops reservedFor entries of pods that are gone and, with the finalizer, the allocation
once no pod is left.

A bind that fails after `prepare` is undone by `unreserve` (kube-scheduler's Unreserve): the pod
leaves each claim's `reservedFor`, and a claim nobody else reserves is deallocated (allocation and
finalizer removed) at once, so the next cycle may choose any node for the pod.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from shoal.framework.decisions import Bind
from shoal.kai.dra import CLAIM_FINALIZER, Claim, allocation_config
from shoal.kai.objects import JSON
from shoal.kube.client import (
    DEVICE_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    ApiError,
    KubeClient,
)
from shoal.kube.dra import AllocationError, DraCache, node_selector_matches
from shoal.kube.informer import ErrorHandler, Informer

logger = logging.getLogger(__name__)


class DraAllocator:
    def __init__(self, client: KubeClient, dra: DraCache, node_labels: Callable[[str], dict[str, str]]) -> None:
        self.client = client
        self.dra = dra
        self.node_labels = node_labels
        self.lock = asyncio.Lock()

    async def prepare(self, b: Bind, claim_names: tuple[str, ...]) -> None:
        """Allocate and reserve the pod's claims on `b.node`; raises AllocationError or ApiError."""
        async with self.lock:
            for name in dict.fromkeys(claim_names):
                claim = self.dra.claims.get((b.namespace, name))
                if claim is None:
                    raise AllocationError(f"resource claim {b.namespace}/{name} not found")
                if claim.deleting:
                    raise AllocationError(f"resource claim {b.namespace}/{name} is being deleted")
                if claim.allocated and claim.node_selector is not None and not node_selector_matches(
                        claim.node_selector, b.node, self.node_labels(b.node)):
                    raise AllocationError(f"resource claim {b.namespace}/{name} is allocated for other nodes")
                if b.pod in claim.reserved_uids:
                    continue
                await self._reserve(b, claim)

    async def _reserve(self, b: Bind, claim: Claim) -> None:
        status: JSON = {"reservedFor": [*self._reserved(claim), {"resource": "pods", "name": b.name, "uid": b.pod}]}
        if not claim.allocated:
            results, selector, chosen = self.dra.choose(claim, b.node, self.node_labels(b.node))
            if CLAIM_FINALIZER not in claim.finalizers:
                answer = await self.client.patch(RESOURCE_CLAIMS, claim.name, {"metadata": {
                    "resourceVersion": claim.resource_version,
                    "finalizers": [*claim.finalizers, CLAIM_FINALIZER]}}, claim.namespace)
                self.dra.on_resource_claim("MODIFIED", None, answer)
                claim = self.dra.claims[(claim.namespace, claim.name)]
            allocation: JSON = {"devices": {"results": results}}
            config = allocation_config(claim, self.dra.class_config, chosen)
            if config:
                allocation["devices"]["config"] = config
            if selector is not None:
                allocation["nodeSelector"] = selector
            status["allocation"] = allocation
        answer = await self.client.patch(RESOURCE_CLAIMS, claim.name, {
            "metadata": {"resourceVersion": claim.resource_version}, "status": status}, claim.namespace, sub="status")
        self.dra.on_resource_claim("MODIFIED", None, answer)

    async def unreserve(self, b: Bind, claim_names: tuple[str, ...]) -> None:
        """Undo `prepare` for a pod whose bind failed: each claim reserved for it no longer is, and one
        nobody else reserves is deallocated. A failure is logged, not raised: the resource-claim
        controller drops the entries of pods that are gone, and the claim's allocation with them."""
        async with self.lock:
            for name in dict.fromkeys(claim_names):
                try:
                    await self._unreserve_claim(b, name)
                except Exception as e:  # the controller is the backstop
                    logger.warning("un-reserving claim %s/%s of pod %s failed: %r", b.namespace, name, b.name, e)

    async def _unreserve_claim(self, b: Bind, name: str) -> None:
        for attempt in range(2):  # a stale resourceVersion: read the claim again, once
            claim = self.dra.claims.get((b.namespace, name))
            if claim is None or b.pod not in claim.reserved_uids:
                return
            try:
                await self._unreserve(b, claim)
                return
            except ApiError as e:
                if e.code != 409 or attempt:
                    raise
            self.dra.on_resource_claim("MODIFIED", None, await self.client.get(RESOURCE_CLAIMS, name, b.namespace))

    async def _unreserve(self, b: Bind, claim: Claim) -> None:
        others = [r for r in self._reserved(claim) if r["uid"] != b.pod]
        # Merge patch: null removes a field; a claim reserved for nobody must not stay allocated.
        status: JSON = {"reservedFor": others} if others else {"reservedFor": None, "allocation": None}
        answer = await self.client.patch(RESOURCE_CLAIMS, claim.name, {
            "metadata": {"resourceVersion": claim.resource_version}, "status": status}, claim.namespace, sub="status")
        self.dra.on_resource_claim("MODIFIED", None, answer)
        if not others and CLAIM_FINALIZER in claim.finalizers:
            claim = self.dra.claims[(claim.namespace, claim.name)]
            kept = [f for f in claim.finalizers if f != CLAIM_FINALIZER]
            answer = await self.client.patch(RESOURCE_CLAIMS, claim.name, {"metadata": {
                "resourceVersion": claim.resource_version, "finalizers": kept or None}}, claim.namespace)
            self.dra.on_resource_claim("MODIFIED", None, answer)

    def _reserved(self, claim: Claim) -> list[JSON]:
        """The claim's reservedFor as it stands (merge patch replaces the list)."""
        return [{"resource": res, "name": name, "uid": uid} for res, name, uid in claim.reserved_for]


def dra_informers(client: KubeClient, dra: DraCache,
                  on_error: Callable[[str], ErrorHandler | None] = lambda kind: None) -> list[Informer]:
    """Informers for DRA objects (optional: a cluster without resource.k8s.io/v1 lists nothing);
    `on_error(kind)` gives the handler of a decoding failure (the cache's problems)."""
    return [Informer(client, res, handler, optional=True, on_error=on_error(kind)) for res, kind, handler in (
        (DEVICE_CLASSES, "DeviceClass", dra.on_device_class),
        (RESOURCE_SLICES, "ResourceSlice", dra.on_resource_slice),
        (RESOURCE_CLAIMS, "ResourceClaim", dra.on_resource_claim),
        (RESOURCE_CLAIM_TEMPLATES, "ResourceClaimTemplate", dra.on_resource_claim_template))]
