"""Persistent volumes as placement constraints: PVs, PVCs and StorageClasses (kube's VolumeBinding).

A pod's claims constrain its nodes: a bound claim's PV node affinity; an unbound claim of a
`WaitForFirstConsumer` class either a static PV that fits the node (bound by the scheduler
before the pod) or dynamic provisioning on the node (the `selected-node` annotation); an
unbound claim of an `Immediate` class waits for the PV controller.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.model.constraints import NodeSelectorTerm

NO_PROVISIONER = "kubernetes.io/no-provisioner"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    """A PV; `node_affinity` None = usable on every node; `claim` = its claimRef (ns, name)."""

    name: str
    storage_class: str
    capacity: int
    access_modes: frozenset[str]
    volume_mode: str = "Filesystem"
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    claim: tuple[str, str] | None = None
    phase: str = "Available"


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    storage_class: str
    request: int
    access_modes: frozenset[str]
    volume_mode: str = "Filesystem"
    volume_name: str = ""
    selected_node: str = ""

    @property
    def bound(self) -> bool:
        return bool(self.volume_name)


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    wait_for_consumer: bool
    #: allowedTopologies as node selector terms (None = every node).
    allowed_topologies: tuple[NodeSelectorTerm, ...] | None = None

    @property
    def dynamic(self) -> bool:
        return self.provisioner != NO_PROVISIONER


def pv_fits(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """Could `pv` be bound to the unbound `pvc` (kube's FindMatchingVolume, node aside)?"""
    if pv.claim is not None and pv.claim != (pvc.namespace, pvc.name):
        return False
    return (pv.phase == "Available" and pv.storage_class == pvc.storage_class and pv.capacity >= pvc.request
            and pvc.access_modes <= pv.access_modes and pv.volume_mode == pvc.volume_mode)
