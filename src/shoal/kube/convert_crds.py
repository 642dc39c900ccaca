"""KAI's CRD objects (Queue `scheduling.run.ai/v2`, PodGroup `v2alpha2`, Topology
`kai.scheduler/v1alpha1`) as plain JSON dicts -> the core's model. Bad fields raise
`ConvertError` naming the object and the field; pods and nodes are in `shoal.kube.convert`."""

from __future__ import annotations

import math

from shoal.kube.convert import (
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    JSON,
    LAST_START_ANNOTATION,
    QUEUE_LABEL,
    QUEUE_UNITS,
    STALE_ANNOTATION,
    ConvertError,
    meta,
    timestamp,
)
from shoal.model.podgroup import PodGroup, PodSetSpec, SubGroupSetSpec
from shoal.model.queue import UNLIMITED, Queue, QueueResource
from shoal.model.topology import Topology, TopologyConstraint


def queue_from(obj: JSON) -> Queue:
    """A Queue (scheduling.run.ai/v2) -> model Queue in core units; ConvertError on bad values."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    name = str(m.get("name"))
    resources = spec.get("resources") or {}
    if not isinstance(resources, dict):
        raise ConvertError("spec.resources: expected a mapping")
    parts: dict[str, QueueResource] = {}
    for res, unit in QUEUE_UNITS.items():
        parts[res] = _queue_resource(resources.get(res) or {}, f"spec.resources.{res}", unit)
    priority = spec.get("priority", 100)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise ConvertError(f"spec.priority: {priority!r} is not an integer")
    return Queue(
        name=name, parent=str(spec.get("parentQueue") or ""), priority=priority,
        creation=timestamp(m.get("creationTimestamp")) or 0.0,
        gpu=parts["gpu"], cpu=parts["cpu"], memory=parts["memory"],
        preempt_min_runtime=_duration(spec.get("preemptMinRuntime"), "spec.preemptMinRuntime"),
        reclaim_min_runtime=_duration(spec.get("reclaimMinRuntime"), "spec.reclaimMinRuntime"),
        display_name=str(spec.get("displayName") or name),
    )


def _queue_resource(raw: JSON, where: str, unit: int) -> QueueResource:
    if not isinstance(raw, dict):
        raise ConvertError(f"{where}: expected a mapping")
    values: dict[str, float] = {}
    for key, default in (("quota", UNLIMITED), ("limit", UNLIMITED), ("overQuotaWeight", 1.0)):
        v = raw.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ConvertError(f"{where}.{key}: {v!r} is not a number")
        if key == "overQuotaWeight" and v < 0:
            raise ConvertError(f"{where}.{key}: {v!r} is negative")
        if key != "overQuotaWeight" and v < 0 and v != UNLIMITED:
            raise ConvertError(f"{where}.{key}: {v!r} is negative (use -1 for unlimited)")
        values[key] = float(v)
    q, lim = values["quota"], values["limit"]
    if q >= 0 and lim >= 0 and lim < q:
        raise ConvertError(f"{where}: limit {lim:g} is below quota {q:g}")

    def scaled(v: float) -> int:
        return UNLIMITED if v == UNLIMITED else round(v * unit)

    return QueueResource(quota=scaled(q), limit=scaled(lim), over_quota_weight=values["overQuotaWeight"])


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(value: object, where: str) -> float | None:
    """A Go duration (`1h30m`, `90s`) in seconds; None when unset."""
    if value is None or value == "":
        return None
    import re

    text = str(value)
    if text == "0":
        return 0.0
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ConvertError(f"{where}: {value!r} is not a duration like 10m or 1h30m")
    return sum(float(a) * _DURATION_UNITS[b] for a, b in parts)


# -- pod groups and topologies ----------------------------------------------------------------
def priority_of(class_name: str, priorities: dict[str, int], global_default: int | None) -> int:
    """KAI: the class's value; missing class -> the global default class's value, else 50."""
    if class_name and class_name in priorities:
        return priorities[class_name]
    return global_default if global_default is not None else DEFAULT_PRIORITY


def _preemptible(value: object, priority: int, where: str) -> bool:
    if value in (None, ""):
        return priority < 100
    if value == "preemptible":
        return True
    if value == "non-preemptible":
        return False
    raise ConvertError(f"{where}: {value!r} is not preemptible or non-preemptible")


def _topology(raw: object) -> TopologyConstraint | None:
    if not isinstance(raw, dict) or not raw.get("topology"):
        return None
    return TopologyConstraint(str(raw["topology"]), str(raw.get("requiredTopologyLevel") or ""),
                              str(raw.get("preferredTopologyLevel") or ""))


def podgroup_from(obj: JSON, priorities: dict[str, int], global_default: int | None = None) -> PodGroup:
    """A PodGroup (v2alpha2) -> model PodGroup; leaf subgroups become pod sets (KAI)."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    anns = m.get("annotations") or {}
    min_member = spec.get("minMember", 1)
    if isinstance(min_member, bool) or not isinstance(min_member, int) or min_member < 0:
        raise ConvertError(f"spec.minMember: {min_member!r} is not a non-negative integer")
    priority = priority_of(str(spec.get("priorityClassName") or ""), priorities, global_default)
    subgroups = [s for s in spec.get("subGroups") or [] if isinstance(s, dict)]
    parents = {str(s.get("parent") or "").lower() for s in subgroups}
    pod_sets, sets = [], []
    for s in subgroups:
        name = str(s.get("name") or "")
        if not name:
            raise ConvertError("spec.subGroups[].name: empty")
        sg_min = s.get("minMember", 1)
        if isinstance(sg_min, bool) or not isinstance(sg_min, int) or sg_min < 0:
            raise ConvertError(f"spec.subGroups[{name}].minMember: {sg_min!r} is not a non-negative integer")
        parent = str(s.get("parent") or "").lower()
        if name.lower() in parents:
            sets.append(SubGroupSetSpec(name, parent, _topology(s.get("topologyConstraint"))))
        else:
            pod_sets.append(PodSetSpec(name, max(sg_min, 1), parent, _topology(s.get("topologyConstraint"))))
    return PodGroup(
        uid=str(m.get("uid")), name=str(m.get("name")), namespace=str(m.get("namespace", "")),
        queue=str(spec.get("queue") or DEFAULT_QUEUE), priority=priority,
        preemptible=_preemptible(spec.get("preemptibility"), priority, "spec.preemptibility"),
        creation=timestamp(m.get("creationTimestamp")) or 0.0, min_member=min_member,
        pod_sets=pod_sets, sub_group_sets=sets, topology=_topology(spec.get("topologyConstraint")),
        last_start_time=timestamp(anns.get(LAST_START_ANNOTATION)),
        stale_since=timestamp(anns.get(STALE_ANNOTATION)),
    )


def implicit_podgroup(pod: JSON, priorities: dict[str, int], global_default: int | None = None) -> PodGroup:
    """The gang of one of a pod that names no PodGroup: its queue label, its priority class."""
    m = meta(pod)
    spec = pod.get("spec") or {}
    labels = m.get("labels") or {}
    priority = priority_of(str(labels.get("priorityClassName") or spec.get("priorityClassName") or ""),
                           priorities, global_default)
    return PodGroup(
        uid=implicit_uid(str(m.get("uid"))), name=str(m.get("name")), namespace=str(m.get("namespace", "")),
        queue=str(labels.get(QUEUE_LABEL) or DEFAULT_QUEUE), priority=priority,
        preemptible=_preemptible(labels.get("kai.scheduler/preemptibility"), priority,
                                 "label kai.scheduler/preemptibility"),
        creation=timestamp(m.get("creationTimestamp")) or 0.0, min_member=1,
    )


def implicit_uid(pod_uid: str) -> str:
    return f"pod:{pod_uid}"


def topology_from(obj: JSON) -> Topology:
    levels = (obj.get("spec") or {}).get("levels") or []
    labels = tuple(str(lv.get("nodeLabel")) for lv in levels if isinstance(lv, dict) and lv.get("nodeLabel"))
    if not labels:
        raise ConvertError("spec.levels: no nodeLabel levels")
    return Topology(str(meta(obj).get("name")), labels)
