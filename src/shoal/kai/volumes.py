"""PersistentVolumes, PersistentVolumeClaims, StorageClasses and pod volumes -> model volumes.

Pure; never raises (a quantity that cannot be read counts as 0, an unknown binding mode as
`Immediate`, as the API server defaults it)."""

from __future__ import annotations

from typing import Any

from shoal.kai.constraints import node_term_from
from shoal.kai.objects import JSON, meta
from shoal.model.constraints import NodeSelectorTerm, Requirement
from shoal.model.resources import parse_memory
from shoal.model.volumes import (
    SELECTED_NODE_ANNOTATION,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)


def _bytes(value: Any) -> int:
    try:
        return parse_memory(value) if value is not None else 0
    except ValueError:
        return 0


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def pv_from(obj: JSON) -> PersistentVolume:
    m = meta(obj)
    spec = _dict(obj.get("spec"))
    terms = _dict(_dict(spec.get("nodeAffinity")).get("required")).get("nodeSelectorTerms")
    affinity = None
    if isinstance(terms, list):
        affinity = tuple(t for t in (node_term_from(_dict(x)) for x in terms) if not t.empty)
    ref = _dict(spec.get("claimRef"))
    phase = str(_dict(obj.get("status")).get("phase") or "Pending")
    return PersistentVolume(
        name=str(m.get("name")), storage_class=str(spec.get("storageClassName") or ""),
        capacity=_bytes(_dict(spec.get("capacity")).get("storage")),
        access_modes=frozenset(str(a) for a in spec.get("accessModes") or []),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"), node_affinity=affinity,
        claim=(str(ref.get("namespace", "")), str(ref.get("name", ""))) if ref.get("name") else None,
        phase="Terminating" if m.get("deletionTimestamp") else phase)


def pvc_from(obj: JSON) -> PersistentVolumeClaim:
    m = meta(obj)
    spec = _dict(obj.get("spec"))
    return PersistentVolumeClaim(
        namespace=str(m.get("namespace", "")), name=str(m.get("name")),
        storage_class=str(spec.get("storageClassName") or ""),
        request=_bytes(_dict(_dict(spec.get("resources")).get("requests")).get("storage")),
        access_modes=frozenset(str(a) for a in spec.get("accessModes") or []),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"), volume_name=str(spec.get("volumeName") or ""),
        selected_node=str(_dict(m.get("annotations")).get(SELECTED_NODE_ANNOTATION) or ""))


def storage_class_from(obj: JSON) -> StorageClass:
    topologies = obj.get("allowedTopologies")
    allowed: tuple[NodeSelectorTerm, ...] | None = None
    if isinstance(topologies, list) and topologies:
        allowed = tuple(NodeSelectorTerm(tuple(
            Requirement(str(e.get("key", "")), "In", tuple(str(v) for v in e.get("values") or []))
            for e in _dict(t).get("matchLabelExpressions") or [] if isinstance(e, dict))) for t in topologies)
    return StorageClass(name=str(meta(obj).get("name")), provisioner=str(obj.get("provisioner") or ""),
                        wait_for_consumer=obj.get("volumeBindingMode") == "WaitForFirstConsumer",
                        allowed_topologies=allowed)


def volume_claims_from(spec: JSON, pod_name: str) -> tuple[str, ...]:
    """The PVCs a pod's volumes name (generic ephemeral volumes: `<pod>-<volume>`)."""
    out = []
    for v in spec.get("volumes") or []:
        v = _dict(v)
        claim = _dict(v.get("persistentVolumeClaim")).get("claimName")
        if claim:
            out.append(str(claim))
        elif v.get("ephemeral") is not None:
            out.append(f"{pod_name}-{v.get('name')}")
    return tuple(out)
