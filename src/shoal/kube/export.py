"""A live cluster as a file: the objects the scheduler reads, and the snapshot they make offline.

`list_objects(client)` lists (paginated, read-only) the kinds the scheduler watches and trims
each object to what the scheduler reads (no container images, commands, env or volumes).
`snapshot_from_objects(objects, ...)` feeds them to a fresh `ClusterCache` exactly as the
informers feed the live one, so `shoal cycle` on an exported file sees the snapshot the live
scheduler saw (same decoding, same implicit gangs, same pods of other schedulers).

File format (`kind: ClusterSnapshot`, `apiVersion: shoal.dev/v1`; also read by `shoal cycle`):

    metadata: {time: <unix seconds of the export>, scheduler: NAME, anonymised: false, podGrouper: true}
    config: {...}            # the running scheduler's config (KAI format), from its report
    objects: {priorityClasses, queues, topologies, nodes, namespaces, persistentVolumes,
              persistentVolumeClaims, storageClasses, podGroups, pods}   # lists of objects
    scenario: {...}          # the same cluster as a `shoal simulate` scenario (shoal.kube.export_scenario)
"""

from __future__ import annotations

import time
from typing import Any

from shoal.kube.cache import ClusterCache
from shoal.kube.client import (
    JSON,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    STORAGE_CLASSES,
    TOPOLOGIES,
    Resource,
)
from shoal.model.snapshot import ClusterSnapshot

SNAPSHOT_KIND = "ClusterSnapshot"
SNAPSHOT_API = "shoal.dev/v1"
#: (file key, resource, cache handler name), in the order the cache needs them.
KINDS: tuple[tuple[str, Resource, str], ...] = (
    ("priorityClasses", PRIORITY_CLASSES, "on_priority_class"),
    ("queues", QUEUES, "on_queue"),
    ("topologies", TOPOLOGIES, "on_topology"),
    ("nodes", NODES, "on_node"),
    ("namespaces", NAMESPACES, "on_namespace"),
    ("persistentVolumes", PERSISTENT_VOLUMES, "on_volume"),
    ("persistentVolumeClaims", PERSISTENT_VOLUME_CLAIMS, "on_claim"),
    ("storageClasses", STORAGE_CLASSES, "on_storage_class"),
    ("podGroups", PODGROUPS, "on_podgroup"),
    ("pods", PODS, "on_pod"),
)
_META_KEEP = ("name", "namespace", "uid", "labels", "annotations", "creationTimestamp", "deletionTimestamp",
              "ownerReferences")
_POD_SPEC_KEEP = ("schedulerName", "nodeName", "priority", "priorityClassName", "preemptionPolicy", "nodeSelector",
                  "affinity", "tolerations", "resourceClaims", "overhead", "schedulingGates")
_DROP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


class ExportError(ValueError):
    """A snapshot file that cannot be used; the message names the object and the field."""


async def list_objects(client: Any) -> dict[str, list[JSON]]:
    """Every object of the six kinds, trimmed (see `trim`). Needs `list` on each (rbac-viewer.yaml)."""
    out: dict[str, list[JSON]] = {}
    for key, res, _ in KINDS:
        items: list[JSON] = []
        cont: str | None = None
        while True:
            page = await client.list_page(res, cont=cont)
            items.extend(trim(key, obj) for obj in page.get("items") or [])
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                break
        out[key] = items
    return out


def _meta(obj: JSON) -> JSON:
    m = obj.get("metadata") or {}
    out = {k: m[k] for k in _META_KEEP if m.get(k) not in (None, {}, [])}
    if "annotations" in out:
        out["annotations"] = {k: v for k, v in out["annotations"].items() if k not in _DROP_ANNOTATIONS}
    if "ownerReferences" in out:
        out["ownerReferences"] = [{k: r[k] for k in ("apiVersion", "kind", "name", "uid", "controller") if k in r}
                                  for r in out["ownerReferences"]]
    return out


def _container(c: JSON, init: bool) -> JSON:
    out = {"name": c.get("name", ""), "resources": c.get("resources") or {}}
    if init and c.get("restartPolicy"):
        out["restartPolicy"] = c["restartPolicy"]
    return out


def trim(key: str, obj: JSON) -> JSON:
    """Only what the scheduler reads of one object (see the module doc)."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if key == "pods":
        s = {k: spec[k] for k in _POD_SPEC_KEEP if k in spec}
        s["containers"] = [_container(c, False) for c in spec.get("containers") or []]
        if spec.get("initContainers"):
            s["initContainers"] = [_container(c, True) for c in spec["initContainers"]]
        claims = [{k: v[k] for k in ("name", "persistentVolumeClaim", "ephemeral") if k in v}
                  for v in spec.get("volumes") or [] if "persistentVolumeClaim" in v or "ephemeral" in v]
        if claims:  # only the volumes that name claims (the volume-binding filter reads them)
            s["volumes"] = claims
        st = {k: status[k] for k in ("phase", "startTime", "nominatedNodeName") if k in status}
        conds = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
        if conds:
            st["conditions"] = conds
        return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(obj), "spec": s, "status": st}
    if key == "nodes":
        s = {k: spec[k] for k in ("unschedulable", "taints") if k in spec}
        st = {k: status[k] for k in ("allocatable", "capacity") if k in status}
        st["conditions"] = [{"type": c.get("type"), "status": c.get("status")}
                            for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        return {"apiVersion": "v1", "kind": "Node", "metadata": _meta(obj), "spec": s, "status": st}
    if key == "namespaces":
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(obj)}
    if key == "storageClasses":
        return {"apiVersion": obj.get("apiVersion", "storage.k8s.io/v1"), "kind": "StorageClass",
                "metadata": _meta(obj), **{k: obj[k] for k in ("provisioner", "volumeBindingMode",
                                                              "allowedTopologies") if k in obj}}
    if key in ("persistentVolumes", "persistentVolumeClaims"):
        return {"apiVersion": "v1", "kind": obj.get("kind", ""), "metadata": _meta(obj), "spec": spec,
                "status": {k: status[k] for k in ("phase", "capacity") if k in status}}
    if key == "priorityClasses":
        return {"apiVersion": obj.get("apiVersion", "scheduling.k8s.io/v1"), "kind": "PriorityClass",
                "metadata": _meta(obj), **{k: obj[k] for k in ("value", "globalDefault", "preemptionPolicy")
                                           if k in obj}}
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "metadata": _meta(obj),
            "spec": spec}


def snapshot_from_objects(objects: dict[str, list[JSON]], scheduler_name: str, now: float, *,
                          pod_grouper: bool = True) -> ClusterSnapshot:
    """The snapshot the live cache would build from these objects at time `now`."""
    return cache_from_objects(objects, scheduler_name, now, pod_grouper=pod_grouper).snapshot()


def cache_from_objects(objects: dict[str, list[JSON]], scheduler_name: str, now: float, *,
                       pod_grouper: bool = True) -> ClusterCache:
    cache = ClusterCache(scheduler_name, lambda: now)
    cache.require_podgroup = pod_grouper
    for key, _, handler in KINDS:
        items = objects.get(key) or []
        if not isinstance(items, list):
            raise ExportError(f"objects.{key}: expected a list")
        on = getattr(cache, handler)
        for i, obj in enumerate(items):
            if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
                raise ExportError(f"objects.{key}[{i}]: expected an object with metadata")
            on("ADDED", None, obj)
    return cache


def snapshot_document(objects: dict[str, list[JSON]], *, scheduler_name: str, config: dict[str, Any],
                      pod_grouper: bool, anonymised: bool, scenario: dict[str, Any],
                      now: float | None = None) -> dict[str, Any]:
    return {"apiVersion": SNAPSHOT_API, "kind": SNAPSHOT_KIND,
            "metadata": {"time": time.time() if now is None else now, "scheduler": scheduler_name,
                         "anonymised": anonymised, "podGrouper": pod_grouper},
            "config": config, "objects": objects, "scenario": scenario}


def is_snapshot_document(data: object) -> bool:
    return isinstance(data, dict) and data.get("kind") == SNAPSHOT_KIND and data.get("apiVersion") == SNAPSHOT_API


def read_snapshot_document(data: dict[str, Any], source: str) -> tuple[ClusterSnapshot, dict[str, Any] | None]:
    """(snapshot, config dict or None) of an exported file; ExportError naming `source` and the field."""
    m = data.get("metadata") or {}
    try:
        now = float(m.get("time"))
    except (TypeError, ValueError):
        raise ExportError(f"{source}: metadata.time: expected unix seconds, got {m.get('time')!r}") from None
    objects = data.get("objects")
    if not isinstance(objects, dict):
        raise ExportError(f"{source}: objects: expected a mapping of object lists")
    try:
        snap = snapshot_from_objects(objects, str(m.get("scheduler") or "kai-scheduler"), now,
                                     pod_grouper=bool(m.get("podGrouper", True)))
    except ExportError as e:
        raise ExportError(f"{source}: {e}") from None
    config = data.get("config")
    return snap, config if isinstance(config, dict) else None
