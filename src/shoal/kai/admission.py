"""What the admission webhook refuses and what it adds, as pure functions of the object.

Validation uses the scheduler's own decoders (`kai.pods.gpu_request`, `kai.crds.podgroup_from`,
`kai.sharing.fraction_container`), so a pod refused at `kubectl apply` is exactly one the scheduler
would report as invalid; each message names the field. Mutation returns JSON-patch operations
(RFC 6902) for the fields it changed, never for anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shoal.kai.crds import podgroup_from
from shoal.kai.names import QUEUE_LABEL
from shoal.kai.objects import JSON, meta
from shoal.kai.pods import gpu_request, pod_requests
from shoal.kai.sharing import fraction_container, link_configmaps, new_configmap_prefix, requests_shared_gpu
from shoal.kai.units import ConvertError
from shoal.model.resources import GPU


@dataclass(frozen=True, slots=True)
class MutationOptions:
    #: runtimeClassName given to fractional pods that set none ("" = leave it).
    runtime_class: str = ""
    #: Queue of a pod without the queue label, when its namespace names none (label `kai.scheduler/queue`).
    default_queue: str = ""


def pod_problem(obj: JSON, queues: Mapping[str, list[str]] | None) -> str | None:
    """Why the pod must be refused, or None. `queues` maps each Queue to its children (None = not known:
    queue checks are skipped)."""
    try:
        whole = pod_requests(obj.get("spec") or {}).get(GPU, 0)
        gpu = gpu_request(meta(obj).get("annotations") or {}, whole)
        if gpu.is_shared:
            fraction_container(obj)
    except ConvertError as e:
        return str(e)
    queue = (meta(obj).get("labels") or {}).get(QUEUE_LABEL)
    if queue is not None and queues is not None:
        return queue_problem(str(queue), queues, f"label {QUEUE_LABEL}")
    return None


def queue_problem(queue: str, queues: Mapping[str, list[str]], where: str) -> str | None:
    if queue not in queues:
        return f"{where}={queue!r}: no Queue of that name exists"
    if queues[queue]:
        return f"{where}={queue!r}: the queue is not a leaf (child queues: {', '.join(sorted(queues[queue]))})"
    return None


def podgroup_problem(obj: JSON, queues: Mapping[str, list[str]] | None) -> str | None:
    """Why the PodGroup must be refused, or None: what the scheduler refuses (minMember, subgroups),
    a minSubGroup above its number of children, and a queue that does not exist or is not a leaf."""
    try:
        pg = podgroup_from(obj, {})
    except ConvertError as e:
        return str(e)
    spec = obj.get("spec") or {}
    subgroups = [s for s in spec.get("subGroups") or [] if isinstance(s, dict)]
    children: dict[str, int] = {}
    for s in subgroups:
        parent = str(s.get("parent") or "")
        children[parent] = children.get(parent, 0) + 1
    if pg.min_subgroup is not None and pg.min_subgroup > children.get("", 0):
        return (f"spec.minSubGroup: {pg.min_subgroup} is impossible, the PodGroup has {children.get('', 0)} "
                f"top-level subgroups")
    for s in subgroups:
        name, want = str(s.get("name") or ""), s.get("minSubGroup")
        if isinstance(want, int) and want > children.get(name, 0):
            return (f"spec.subGroups[{name}].minSubGroup: {want} is impossible, the subgroup has "
                    f"{children.get(name, 0)} children")
    if queues is not None and spec.get("queue"):
        return queue_problem(str(spec["queue"]), queues, "spec.queue")
    return None


def pod_patch(obj: JSON, opts: MutationOptions, namespace_queue: str | None, token: str) -> list[JSON]:
    """JSON-patch operations: a fractional pod gets its shared-GPU ConfigMap links (KAI's names; the
    name token is random, 7 characters) and `opts.runtime_class`; a pod without a queue label gets
    its namespace's queue, else `opts.default_queue`. [] when nothing changes or the pod is invalid."""
    new: JSON = obj
    if requests_shared_gpu(obj) and pod_problem(obj, None) is None:
        ref = fraction_container(obj)
        if not (meta(obj).get("annotations") or {}).get("runai/shared-gpu-configmap"):
            new = link_configmaps(obj, ref, new_configmap_prefix(obj, ref, token))
        if opts.runtime_class and not (new.get("spec") or {}).get("runtimeClassName"):
            new = {**new, "spec": {**new["spec"], "runtimeClassName": opts.runtime_class}}
    queue = namespace_queue or opts.default_queue
    labels = meta(new).get("labels") or {}
    if queue and QUEUE_LABEL not in labels:
        new = {**new, "metadata": {**meta(new), "labels": {**labels, QUEUE_LABEL: queue}}}
    return _diff(obj, new)


def _diff(old: JSON, new: JSON) -> list[JSON]:
    """`add` operations (which replace) for each changed metadata / spec field."""
    ops: list[JSON] = []
    for part in ("metadata", "spec"):
        before: dict[str, Any] = old.get(part) or {}
        after: dict[str, Any] = new.get(part) or {}
        for key, value in after.items():
            if before.get(key) != value:
                ops.append({"op": "add", "path": f"/{part}/{key}", "value": value})
    return ops
