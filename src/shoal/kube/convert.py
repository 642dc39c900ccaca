"""Kubernetes JSON objects -> core model: pods, nodes, queues, pod groups, topologies.

Every converter is pure and raises `ConvertError` (a message naming the object's field and the bad
value) on an object the scheduler must not use; callers skip that object and report the message
as an event or condition on it. No converter ever raises anything else on malformed input.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from shoal.model.node import DEFAULT_GPU_MEMORY_MIB, Node, Taint
from shoal.model.pod import GpuRequest, Pod, Toleration
from shoal.model.resources import CPU, GPU, MEMORY, PODS, parse_cpu, parse_memory
from shoal.model.status import PodStatus

JSON = dict[str, Any]

QUEUE_LABEL = "kai.scheduler/queue"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
PODGROUP_ANNOTATION = "pod-group-name"
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY = "gpu-memory"
GPU_DEVICES = "gpu-fraction-num-devices"
GPU_GROUP_LABEL = "runai-gpu-group"
TASK_PRIORITY_LABEL = "kai.scheduler/task-priority"
LAST_START_ANNOTATION = "kai.scheduler/last-start-timestamp"
STALE_ANNOTATION = "kai.scheduler/stale-podgroup-timestamp"
DEFAULT_QUEUE = "default-queue"
DEFAULT_PRIORITY = 50
#: Queue CRD units -> core units: GPU devices -> milli-GPU, CPU millicores, memory MB -> bytes.
QUEUE_UNITS = {"gpu": 1000, "cpu": 1, "memory": 10**6}
_SKIPPED_NODE_RESOURCES = ("ephemeral-storage", "hugepages-")


class ConvertError(ValueError):
    """An object the scheduler cannot use; the message is meant for the object's owner."""


def meta(obj: JSON) -> JSON:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def timestamp(value: object) -> float | None:
    """RFC 3339 timestamp -> epoch seconds; None when absent or unparsable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# -- nodes ------------------------------------------------------------------------------------
def node_from(obj: JSON) -> Node:
    """A Node object -> model Node (resources in core units; GPU memory from its label)."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = dict(m.get("labels") or {})
    alloc: dict[str, int] = {}
    for name, qty in (status.get("allocatable") or {}).items():
        if name.startswith(_SKIPPED_NODE_RESOURCES):
            continue
        try:
            alloc[name] = parse_cpu(qty) if name == CPU else parse_memory(qty)
        except ValueError:
            continue  # a resource we cannot read is one we never place against
    for base in (CPU, MEMORY, GPU, PODS):
        alloc.setdefault(base, 0)
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or [] if isinstance(c, dict)}
    gpu_mem, synced = _gpu_memory_mib(labels.get("nvidia.com/gpu.memory"))
    return Node(
        name=str(m.get("name")),
        allocatable=alloc,
        labels=labels,
        taints=[Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
                for t in spec.get("taints") or [] if isinstance(t, dict)],
        ready=conds.get("Ready") == "True" and not any(
            conds.get(c) == "True" for c in ("MemoryPressure", "DiskPressure", "PIDPressure",
                                             "NetworkUnavailable")),
        unschedulable=bool(spec.get("unschedulable")),
        gpu_memory_mib=gpu_mem,
        gpu_memory_synced=synced,
        mig_strategy=labels.get("nvidia.com/mig.strategy", "none"),
        mig_enabled=labels.get("node-role.kubernetes.io/mig-enabled") == "true",
    )


def _gpu_memory_mib(label: str | None) -> tuple[int, bool]:
    """KAI: MiB if < 1,048,576 else bytes; floored to a multiple of 100; default 100 (not synced)."""
    if not label:
        return DEFAULT_GPU_MEMORY_MIB, False
    try:
        value = int(label)
    except ValueError:
        return DEFAULT_GPU_MEMORY_MIB, False
    if value >= 1_048_576:
        value //= 1024 * 1024
    value = value // 100 * 100
    return (value, True) if value > 0 else (DEFAULT_GPU_MEMORY_MIB, False)


# -- pods -------------------------------------------------------------------------------------
def pod_requests(spec: JSON) -> dict[str, int]:
    """Σ container requests (limits when a request is unset), max with each init container, + overhead."""
    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for name, amount in _container_requests(c).items():
            total[name] = total.get(name, 0) + amount
    for c in spec.get("initContainers") or []:
        for name, amount in _container_requests(c).items():
            total[name] = max(total.get(name, 0), amount)
    for name, qty in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + _quantity(name, qty)
    return total


def _container_requests(c: JSON) -> dict[str, int]:
    res = c.get("resources") or {}
    merged = dict(res.get("limits") or {})
    merged.update(res.get("requests") or {})
    return {name: _quantity(name, qty) for name, qty in merged.items()}


def _quantity(name: str, qty: object) -> int:
    try:
        return parse_cpu(qty) if name == CPU else parse_memory(qty)
    except ValueError:
        raise ConvertError(f"resources.{name}: {qty!r} is not a valid quantity") from None


def gpu_request(annotations: JSON, whole: int) -> GpuRequest:
    """KAI's GPU annotations -> GpuRequest; raises ConvertError naming the annotation."""
    frac = annotations.get(GPU_FRACTION)
    mem = annotations.get(GPU_MEMORY)
    devices = 1
    raw_devices = annotations.get(GPU_DEVICES)
    if raw_devices is not None:
        try:
            devices = int(str(raw_devices))
        except ValueError:
            raise ConvertError(f"annotation {GPU_DEVICES}={raw_devices!r}: not an integer") from None
        if devices < 1:
            raise ConvertError(f"annotation {GPU_DEVICES}={raw_devices!r}: must be at least 1")
    if frac is not None and mem is not None:
        raise ConvertError(f"annotations {GPU_FRACTION} and {GPU_MEMORY} are mutually exclusive")
    if frac is not None:
        try:
            f = float(str(frac))
        except ValueError:
            raise ConvertError(f"annotation {GPU_FRACTION}={frac!r}: not a number") from None
        if not math.isfinite(f) or f <= 0 or f > 1:
            raise ConvertError(f"annotation {GPU_FRACTION}={frac!r}: must be in (0, 1]")
        if whole:
            raise ConvertError(f"annotation {GPU_FRACTION} with an nvidia.com/gpu request: use one of them")
        portion = round(f * 100) * 10
        if portion <= 0:
            raise ConvertError(f"annotation {GPU_FRACTION}={frac!r}: below 0.01 GPU")
        if portion >= 1000:  # a whole device asked as a fraction is a whole-GPU request
            return GpuRequest(whole=devices)
        return GpuRequest(portion_milli=portion, devices=devices)
    if mem is not None:
        try:
            mib = int(str(mem))
        except ValueError:
            raise ConvertError(f"annotation {GPU_MEMORY}={mem!r}: not an integer number of MiB") from None
        if mib <= 0:
            raise ConvertError(f"annotation {GPU_MEMORY}={mem!r}: must be positive")
        if whole:
            raise ConvertError(f"annotation {GPU_MEMORY} with an nvidia.com/gpu request: use one of them")
        return GpuRequest(memory_mib=mib, devices=devices)
    return GpuRequest(whole=whole)


def pod_status(obj: JSON) -> PodStatus:
    """The KAI status of a pod as the API shows it (Binding is the cache's business)."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    phase = (obj.get("status") or {}).get("phase", "Pending")
    if phase == "Succeeded":
        return PodStatus.SUCCEEDED
    if phase == "Failed":
        return PodStatus.FAILED
    node = spec.get("nodeName")
    if m.get("deletionTimestamp"):
        return PodStatus.RELEASING if node else PodStatus.DELETED
    if node:
        return PodStatus.RUNNING if phase == "Running" else PodStatus.BOUND
    if spec.get("schedulingGates"):
        return PodStatus.GATED
    return PodStatus.PENDING


def gpu_groups_of(labels: JSON) -> list[str]:
    """GPU groups written at bind: `runai-gpu-group/<g>` labels, else the single `runai-gpu-group`."""
    multi = sorted(v for k, v in labels.items() if k.startswith(GPU_GROUP_LABEL + "/"))
    if multi:
        return [str(v) for v in multi]
    one = labels.get(GPU_GROUP_LABEL)
    return [str(one)] if one else []


def pod_from(obj: JSON, job: str) -> Pod:
    """A pod object -> model Pod of job `job`; raises ConvertError on a bad request or annotation."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = dict(m.get("labels") or {})
    req = pod_requests(spec)
    cpu = req.pop(CPU, 0)
    mem = req.pop(MEMORY, 0)
    whole = req.pop(GPU, 0)
    req.pop(PODS, None)
    for name in list(req):
        if name.startswith(_SKIPPED_NODE_RESOURCES):
            req.pop(name)
    mig = {k: v for k, v in req.items() if k.startswith("nvidia.com/mig-")}
    extended = {k: v for k, v in req.items() if k not in mig}
    gpu = gpu_request(m.get("annotations") or {}, whole)
    st = pod_status(obj)
    node = spec.get("nodeName") or None
    task_priority, tp_invalid = _task_priority(labels.get(TASK_PRIORITY_LABEL))
    return Pod(
        uid=str(m.get("uid")), name=str(m.get("name")), namespace=str(m.get("namespace", "")), job=job,
        status=st, cpu_milli=cpu, memory=mem, gpu=gpu, mig=mig, extended=extended, node=node,
        gpu_groups=gpu_groups_of(labels) if node and gpu.is_shared else [],
        labels=labels, subgroup=labels.get(SUBGROUP_LABEL, ""),
        task_priority=task_priority, task_priority_invalid=tp_invalid,
        creation=timestamp(m.get("creationTimestamp")) or 0.0,
        node_selector=dict(spec.get("nodeSelector") or {}),
        node_affinity=_node_affinity(spec),
        tolerations=[Toleration(str(t.get("key", "")), str(t.get("operator", "Equal")),
                                str(t.get("value", "")), str(t.get("effect", "")))
                     for t in spec.get("tolerations") or [] if isinstance(t, dict)],
        nominated_node=status.get("nominatedNodeName") or None,
        start_time=timestamp(status.get("startTime")),
    )


def _task_priority(value: str | None) -> tuple[int | None, bool]:
    if value is None:
        return None, False
    try:
        return int(value), False
    except ValueError:
        return None, True


def _node_affinity(spec: JSON) -> list[list[tuple[str, str, tuple[str, ...]]]]:
    req = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = []
    for term in req.get("nodeSelectorTerms") or []:
        exprs = [(str(e.get("key", "")), str(e.get("operator", "In")), tuple(str(v) for v in e.get("values") or []))
                 for e in (term or {}).get("matchExpressions") or []]
        terms.append(exprs)
    return terms


# -- queues -----------------------------------------------------------------------------------
