"""kube-scheduler's VolumeBinding PreBind, for a bind the core decided: before the pod is bound,
each chosen static PV is pre-bound to its claim (the PV controller then binds the claim), or the
claim is marked for provisioning on the node (`selected-node`)."""

from __future__ import annotations

from shoal.framework.decisions import Bind
from shoal.kube.cache import ClusterCache
from shoal.kube.client import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, KubeClient
from shoal.model.volumes import SELECTED_NODE_ANNOTATION


async def prebind_volumes(client: KubeClient, cache: ClusterCache, b: Bind) -> None:
    """Pre-bind `b`'s volumes in its namespace; a PV pre-bound here is assumed taken in `cache`
    until its watch event arrives. An API error propagates (the bind then fails)."""
    for claim, pv in b.volumes:
        if pv:
            ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": b.namespace, "name": claim}
            await client.patch(PERSISTENT_VOLUMES, pv, {
                "metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
                "spec": {"claimRef": ref}})
            cache.assume_volume(pv, b.namespace, claim)
        else:
            await client.patch(PERSISTENT_VOLUME_CLAIMS, claim, {
                "metadata": {"annotations": {SELECTED_NODE_ANNOTATION: b.node}}}, b.namespace)
