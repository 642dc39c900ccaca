"""Queue loader: KAI Queue objects (`scheduling.run.ai/v2`, kind Queue) into `shoal.model.Queue`.

CRD units (kai-spec §5.1): GPU in devices, CPU in millicores, memory in MB (10^6 bytes); -1 =
unlimited. Core units: GPU milli, CPU milli, memory bytes. Also accepts the short form
`{name, parent, priority, gpu: {quota, limit, weight}}` used inline in scenarios.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shoal.model import Queue, QueueResource
from shoal.sim.errors import SimInputError
from shoal.sim.loaders.yamlio import duration, load_docs, mapping, number, where

_SCALE = {"gpu": 1000.0, "cpu": 1.0, "memory": 1e6}


def _resource(raw: object, at: str, field: str, scale: float) -> QueueResource:
    r = mapping(raw, at, field)
    unknown = set(r) - {"quota", "limit", "overQuotaWeight", "weight"}
    if unknown:
        raise SimInputError(f"{at}: {field}: unknown field(s) {', '.join(sorted(unknown))}")

    def amount(key: str) -> int:
        v = number(r.get(key, -1), at, f"{field}.{key}")
        if v < 0 and v != -1:
            raise SimInputError(f"{at}: {field}.{key}: must be -1 (unlimited) or >= 0, got {v:g}")
        return -1 if v == -1 else round(v * scale)

    weight = number(r.get("overQuotaWeight", r.get("weight", 1)), at, f"{field}.overQuotaWeight", minimum=0)
    return QueueResource(quota=amount("quota"), limit=amount("limit"), over_quota_weight=weight)


def queue_from_object(obj: dict[str, Any], at: str, index: int) -> Queue:
    """A Queue CRD object or the short form."""
    if "spec" in obj or "kind" in obj:
        if obj.get("kind") not in (None, "Queue"):
            raise SimInputError(f"{at}: kind: expected Queue, got {obj.get('kind')!r}")
        api = obj.get("apiVersion")
        if api not in (None, "scheduling.run.ai/v2"):
            raise SimInputError(f"{at}: apiVersion: expected scheduling.run.ai/v2, got {api!r}")
        name = mapping(obj.get("metadata"), at, "metadata").get("name")
        spec = mapping(obj.get("spec"), at, "spec")
        res = mapping(spec.get("resources"), at, "spec.resources")
        parent, prefix = spec.get("parentQueue") or "", "spec.resources."
    else:
        name, spec, res, prefix = obj.get("name"), obj, obj, ""
        parent = obj.get("parent") or ""
    if not isinstance(name, str) or not name:
        raise SimInputError(f"{at}: metadata.name: missing")
    resources = {r: _resource(res.get(r), at, prefix + r, _SCALE[r]) for r in ("gpu", "cpu", "memory")}
    prio = spec.get("priority", 100)
    kwargs: dict[str, Any] = {}
    for key, attr in (
        ("preemptMinRuntime", "preempt_min_runtime"),
        ("reclaimMinRuntime", "reclaim_min_runtime"),
    ):
        if spec.get(key) is not None:
            kwargs[attr] = duration(spec[key], at, key)
    return Queue(
        name=name,
        parent=str(parent),
        priority=int(number(prio, at, "priority")),
        creation=float(index),
        display_name=str(spec.get("displayName") or ""),
        gpu=resources["gpu"],
        cpu=resources["cpu"],
        memory=resources["memory"],
        **kwargs,
    )


def queues_from_list(items: list[Any], source: str | Path) -> list[Queue]:
    out: list[Queue] = []
    seen: set[str] = set()
    for i, obj in enumerate(items):
        at = where(source, obj)
        if not isinstance(obj, dict):
            raise SimInputError(f"{at}: queue {i}: expected a mapping")
        q = queue_from_object(obj, at, i)
        if q.name in seen:
            raise SimInputError(f"{at}: metadata.name: duplicate queue {q.name!r}")
        seen.add(q.name)
        out.append(q)
    names = {q.name for q in out}
    for q in out:
        if q.parent and q.parent not in names:
            raise SimInputError(f"{source}: queue {q.name}: parentQueue {q.parent!r} does not exist")
    return out


def load_queues(path: Path) -> list[Queue]:
    if not path.is_file():
        raise SimInputError(f"{path}: no such file")
    items: list[Any] = []
    for doc in load_docs(path):
        if isinstance(doc, dict) and doc.get("kind") == "List":
            items.extend(doc.get("items") or [])
        elif isinstance(doc, list):
            items.extend(doc)
        else:
            items.append(doc)
    return queues_from_list(items, path)


def leaf_names(queues: list[Queue]) -> list[str]:
    parents = {q.parent for q in queues if q.parent}
    return [q.name for q in queues if q.name not in parents]
