"""Queue loader: KAI Queue objects (`scheduling.run.ai/v2`, kind Queue) into `shoal.model.Queue`.

CRD units (kai-spec §5.1): GPU in devices, CPU in millicores, memory in MB (10^6 bytes); -1 =
unlimited. Core units: GPU milli, CPU milli, memory bytes. Also accepts the short form
`{name, parent, priority, gpu: {quota, limit, weight}}` used inline in scenarios.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from shoal.kai.crds import queue_from
from shoal.kai.names import QUEUE_API
from shoal.kai.units import QUEUE_UNITS, ConvertError
from shoal.model import Queue
from shoal.sim.errors import SimInputError
from shoal.sim.loaders.yamlio import load_docs, mapping, where

_RESOURCE_FIELDS = {"quota", "limit", "overQuotaWeight", "weight"}
_SHORT_SPEC = {"priority": "priority", "preemptMinRuntime": "preemptMinRuntime",
               "reclaimMinRuntime": "reclaimMinRuntime", "displayName": "displayName"}


def _resources(res: dict[str, Any], at: str, prefix: str) -> dict[str, Any]:
    """The CRD's `spec.resources`, with the short form's `weight` spelled `overQuotaWeight`."""
    out: dict[str, Any] = {}
    for r in QUEUE_UNITS:
        part = mapping(res.get(r), at, prefix + r)
        unknown = set(part) - _RESOURCE_FIELDS
        if unknown:
            raise SimInputError(f"{at}: {prefix}{r}: unknown field(s) {', '.join(sorted(unknown))}")
        part = dict(part)
        if "weight" in part:
            part.setdefault("overQuotaWeight", part.pop("weight"))
        out[r] = part
    return out


def queue_from_object(obj: dict[str, Any], at: str, index: int) -> Queue:
    """A Queue CRD object or the short form, decoded by KAI's rules (`shoal.kai.crds.queue_from`).

    The queue's creation time is its position in the file (queues are ordered by it)."""
    if "spec" in obj or "kind" in obj:
        if obj.get("kind") not in (None, "Queue"):
            raise SimInputError(f"{at}: kind: expected Queue, got {obj.get('kind')!r}")
        api = obj.get("apiVersion")
        if api not in (None, QUEUE_API):
            raise SimInputError(f"{at}: apiVersion: expected {QUEUE_API}, got {api!r}")
        name = mapping(obj.get("metadata"), at, "metadata").get("name")
        spec = dict(mapping(obj.get("spec"), at, "spec"))
        spec["resources"] = _resources(mapping(spec.get("resources"), at, "spec.resources"), at, "spec.resources.")
    else:
        name = obj.get("name")
        spec = {crd: obj[key] for key, crd in _SHORT_SPEC.items() if obj.get(key) is not None}
        spec["parentQueue"] = obj.get("parent") or ""
        spec["resources"] = _resources(obj, at, "")
    if not isinstance(name, str) or not name:
        raise SimInputError(f"{at}: metadata.name: missing")
    if isinstance(spec.get("priority"), float) and spec["priority"] == int(spec["priority"]):
        spec["priority"] = int(spec["priority"])
    try:
        queue = queue_from({"metadata": {"name": name}, "spec": spec})
    except ConvertError as err:
        raise SimInputError(f"{at}: {err}") from None
    return replace(queue, creation=float(index))


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
