"""Pod objects -> model Pods: requests, KAI's GPU annotations, status, placement constraints.

Every decoder is pure and raises `ConvertError` (a message naming the field and the bad value)
on a pod the scheduler must not use; callers skip that pod and report the message as an event
on it. No decoder raises anything else on malformed input.
"""

from __future__ import annotations

import dataclasses

from shoal.kai.constraints import (
    host_ports_from,
    node_affinity_from,
    pod_affinity_from,
    spread_from,
    tolerations_from,
)
from shoal.kai.dra import pod_claim_names
from shoal.kai.names import (
    GPU_DEVICES,
    GPU_FRACTION,
    GPU_GROUP_LABEL,
    GPU_MEMORY,
    SUBGROUP_LABEL,
    TASK_PRIORITY_LABEL,
)
from shoal.kai.objects import JSON, meta, timestamp
from shoal.kai.sharing import is_reservation_pod
from shoal.kai.units import ConvertError, fraction_request
from shoal.kai.volumes import volume_claims_from
from shoal.model.pod import GpuRequest, Pod
from shoal.model.resources import CPU, GPU, MEMORY, PODS, parse_cpu, parse_memory
from shoal.model.status import PodStatus

#: Pod-level requests (spec.resources) replace the containers' sum for these (PodLevelResources).
_POD_LEVEL = ("cpu", "memory")


def pod_requests(spec: JSON) -> dict[str, int]:
    """kube's PodRequests: Σ containers (limits when a request is unset) + sidecars (restartable
    init containers), max with each regular init container (+ the sidecars started before it),
    pod-level requests for cpu / memory / hugepages when set, + overhead."""
    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        _add(total, _container_requests(c))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        req = _container_requests(c)
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            _add(total, req)
            _add(sidecars, req)
            req = dict(sidecars)
        else:
            req = dict(req)
            _add(req, sidecars)
        for name, amount in req.items():
            init_max[name] = max(init_max.get(name, 0), amount)
    for name, amount in init_max.items():
        total[name] = max(total.get(name, 0), amount)
    for name, qty in ((spec.get("resources") or {}).get("requests") or {}).items():
        if name in _POD_LEVEL or name.startswith("hugepages-"):
            total[name] = _quantity(name, qty)
    for name, qty in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + _quantity(name, qty)
    return total


def _add(total: dict[str, int], more: dict[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _container_requests(c: JSON) -> dict[str, int]:
    res = c.get("resources") or {}
    merged = dict(res.get("limits") or {})
    merged.update(res.get("requests") or {})
    return {name: _quantity(name, qty) for name, qty in merged.items()}


#: Larger requests (or negative ones) are not quantities any real object asks for; the core's
#: int64 matrices could not hold them.
MAX_QUANTITY = 1 << 53


def _quantity(name: str, qty: object) -> int:
    try:
        value = parse_cpu(qty) if name == CPU else parse_memory(qty)
    except (ValueError, TypeError):
        raise ConvertError(f"resources.{name}: {qty!r} is not a valid quantity") from None
    if not 0 <= value < MAX_QUANTITY:
        raise ConvertError(f"resources.{name}: {qty!r} is out of range")
    return value


def node_name_of(spec: JSON) -> str | None:
    """`spec.nodeName` (None when unset); raises ConvertError when it is not a string."""
    node = spec.get("nodeName") or None
    if node is not None and not isinstance(node, str):
        raise ConvertError(f"spec.nodeName: {node!r} is not a string")
    return node


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
        if whole:
            raise ConvertError(f"annotation {GPU_FRACTION} with an nvidia.com/gpu request: use one of them")
        return fraction_request(f, devices, f"annotation {GPU_FRACTION}={frac!r}")
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
    mig = {k: v for k, v in req.items() if k.startswith("nvidia.com/mig-")}
    extended = {k: v for k, v in req.items() if k not in mig}
    gpu = gpu_request(m.get("annotations") or {}, whole)
    st = pod_status(obj)
    node = node_name_of(spec)
    task_priority, tp_invalid = _task_priority(labels.get(TASK_PRIORITY_LABEL))
    return Pod(
        uid=str(m.get("uid")), name=str(m.get("name")), namespace=str(m.get("namespace", "")), job=job,
        status=st, cpu_milli=cpu, memory=mem, gpu=gpu, mig=mig, extended=extended, node=node,
        gpu_groups=gpu_groups_of(labels) if node and gpu.is_shared else [],
        labels=labels, subgroup=labels.get(SUBGROUP_LABEL, ""),
        task_priority=task_priority, task_priority_invalid=tp_invalid,
        creation=timestamp(m.get("creationTimestamp")) or 0.0,
        node_selector=dict(spec.get("nodeSelector") or {}),
        node_affinity=node_affinity_from(spec),
        pod_affinity=pod_affinity_from(spec, str(m.get("namespace", "")), labels),
        spread=spread_from(spec, labels),
        host_ports=host_ports_from(spec),
        tolerations=tolerations_from(spec),
        volume_claims=volume_claims_from(spec, str(m.get("name"))),
        nominated_node=status.get("nominatedNodeName") or None,
        start_time=timestamp(status.get("startTime")),
        resource_claims=pod_claim_names(obj),
    )


def placed_pod_from(obj: JSON, job: str) -> Pod:
    """A pod another scheduler placed (or one of ours we cannot read) -> a model Pod on its node:
    what it uses, its labels and the inter-pod terms and host ports that constrain our pods.
    KAI annotations are not read; a GPU reservation pod holds no whole GPU of its own.
    Never raises: a part that cannot be decoded is left out."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    labels = dict(m.get("labels") or {})
    namespace = str(m.get("namespace", ""))
    try:
        req = pod_requests(spec)
    except ConvertError:
        req = {}
    try:
        affinity = pod_affinity_from(spec, namespace, labels)
    except ConvertError:
        affinity = None
    extended = {k: v for k, v in req.items() if k not in (CPU, MEMORY, PODS, GPU)}
    node = spec.get("nodeName")
    return Pod(
        uid=str(m.get("uid")), name=str(m.get("name")), namespace=namespace, job=job,
        status=PodStatus.RELEASING if m.get("deletionTimestamp") else PodStatus.RUNNING,
        cpu_milli=req.get(CPU, 0), memory=req.get(MEMORY, 0),
        # A reservation pod's device is its GPU group's, already counted by the group's pods (KAI).
        gpu=GpuRequest(whole=0 if is_reservation_pod(obj) else req.get(GPU, 0)),
        extended=extended, node=node if isinstance(node, str) and node else None, labels=labels,
        pod_affinity=affinity,
        host_ports=host_ports_from(spec), best_effort=False,
        creation=timestamp(m.get("creationTimestamp")) or 0.0)


def _task_priority(value: str | None) -> tuple[int | None, bool]:
    if value is None:
        return None, False
    try:
        return int(value), False
    except ValueError:
        return None, True


def mutable_fields(obj: JSON) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """The parts of a pod object `pod_from` reads that can change after creation, as (placement,
    the rest): an update that leaves both equal (status noise: conditions, IPs, container states)
    needs no decoding, one that changes only the placement needs `with_placement` (a bind, the pod
    starting or ending). The values are the object's own (compared, never mutated). Whoever makes
    `pod_from` read another mutable field adds it here (and to `with_placement` if it is placement)."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    placement = (spec.get("nodeName"), status.get("phase"), m.get("deletionTimestamp"),
                 status.get("nominatedNodeName"), status.get("startTime"))
    return placement, (m.get("labels"), m.get("annotations"), spec.get("schedulingGates"),
                       spec.get("containers"), spec.get("initContainers"),
                       # Mutable on gated pods (tolerations: additions on any pod).
                       spec.get("tolerations"), spec.get("affinity"), spec.get("nodeSelector"),
                       # The claims the resource-claim controller makes from the pod's templates.
                       status.get("resourceClaimStatuses"))


def with_placement(prev: Pod, obj: JSON) -> Pod:
    """`prev`, decoded by `pod_from` from an earlier version of `obj` whose non-placement
    `mutable_fields` were equal, with `obj`'s placement: what `pod_from` would return, without
    decoding the requests and constraints again (a bind and a start are most watch events)."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    node = node_name_of(spec)
    return dataclasses.replace(
        prev, status=pod_status(obj), node=node,
        gpu_groups=gpu_groups_of(m.get("labels") or {}) if node and prev.gpu.is_shared else [],
        nominated_node=status.get("nominatedNodeName") or None, start_time=timestamp(status.get("startTime")))
