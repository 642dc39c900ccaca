"""KAI's CRD objects (Queue `scheduling.run.ai/v2`, PodGroup `v2alpha2`, Topology
`kai.scheduler/v1alpha1`) as plain JSON dicts -> the core's model. Bad fields raise
`ConvertError` naming the field; pods are in `shoal.kai.pods`, nodes in `shoal.kai.nodes`."""

from __future__ import annotations

import math

from shoal.kai.names import DEFAULT_QUEUE, LAST_START_ANNOTATION, PREEMPTIBILITY_LABEL, QUEUE_LABEL, STALE_ANNOTATION
from shoal.kai.objects import JSON, meta, timestamp
from shoal.kai.units import QUEUE_UNITS, ConvertError, parse_duration, preemptibility, priority_of, queue_amount
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
    for res in QUEUE_UNITS:
        parts[res] = _queue_resource(resources.get(res) or {}, f"spec.resources.{res}", res)
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


def _queue_resource(raw: JSON, where: str, resource: str) -> QueueResource:
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

    return QueueResource(quota=queue_amount(q, resource), limit=queue_amount(lim, resource),
                         over_quota_weight=values["overQuotaWeight"])


def _duration(value: object, where: str) -> float | None:
    """A non-negative duration (`1h30m`, `90s`) in seconds; None when unset."""
    if value is None or value == "":
        return None
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise ConvertError(f"{where}: {value!r} is not a duration like 10m or 1h30m") from None
    if seconds < 0 or not math.isfinite(seconds):
        raise ConvertError(f"{where}: {value!r} is not a non-negative duration")
    return seconds


# -- pod groups and topologies ----------------------------------------------------------------
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
            sets.append(SubGroupSetSpec(name, parent, _topology(s.get("topologyConstraint")),
                                        _min_subgroup(s.get("minSubGroup"), f"spec.subGroups[{name}].minSubGroup")))
        else:
            pod_sets.append(PodSetSpec(name, max(sg_min, 1), parent, _topology(s.get("topologyConstraint"))))
    mark = spec.get("markUnschedulable", True)
    if not isinstance(mark, bool):
        raise ConvertError(f"spec.markUnschedulable: {mark!r} is not a boolean")
    backoff = spec.get("schedulingBackoff", -1)
    if backoff not in (-1, 1) or isinstance(backoff, bool):
        raise ConvertError(f"spec.schedulingBackoff: {backoff!r} is not -1 or 1")
    conditions = (obj.get("status") or {}).get("schedulingConditions") or []
    failed_here = any(isinstance(c, dict) and (c.get("nodePool") or "default") == "default" for c in conditions)
    return PodGroup(
        uid=str(m.get("uid")), name=str(m.get("name")), namespace=str(m.get("namespace", "")),
        queue=str(spec.get("queue") or DEFAULT_QUEUE), priority=priority,
        mark_unschedulable=mark, backoff_blocked=backoff == 1 and failed_here,
        min_subgroup=_min_subgroup(spec.get("minSubGroup"), "spec.minSubGroup") if subgroups else None,
        preemptible=preemptibility(spec.get("preemptibility"), priority, "spec.preemptibility"),
        creation=timestamp(m.get("creationTimestamp")) or 0.0, min_member=min_member,
        pod_sets=pod_sets, sub_group_sets=sets, topology=_topology(spec.get("topologyConstraint")),
        last_start_time=timestamp(anns.get(LAST_START_ANNOTATION)),
        stale_since=timestamp(anns.get(STALE_ANNOTATION)),
    )


def _min_subgroup(raw: object, where: str) -> int | None:
    """KAI's minSubGroup: absent = every child is needed; else a count >= 0."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ConvertError(f"{where}: {raw!r} is not a non-negative integer")
    return raw


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
        preemptible=preemptibility(labels.get(PREEMPTIBILITY_LABEL), priority,
                                 f"label {PREEMPTIBILITY_LABEL}"),
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
