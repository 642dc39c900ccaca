"""KAI's GPU-sharing objects, as pure functions: reservation pods, the fraction container, the
shared-GPU ConfigMaps and the mutation that links them to a pod, the GPU Fractioning Operator's
per-container annotations.

Names are KAI's (`pkg/binder/binding/resourcereservation`, `pkg/binder/common`,
`pkg/binder/common/gpusharingconfigmap`), so tooling written for KAI finds the same objects.
Nothing here does I/O; a pod KAI would refuse raises `ConvertError` naming the field.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from shoal.kai.names import GPU_FRACTION, GPU_GROUP_LABEL, GPU_MEMORY
from shoal.kai.objects import JSON, meta
from shoal.kai.units import ConvertError

RESERVATION_NAMESPACE = "kai-resource-reservation"
#: `app=<this>` marks a reservation pod (KAI's ResourceReservationAppLabelValue).
RESERVATION_APP = "kai-resource-reservation"
APP_LABEL = "app"
RESERVATION_POD_PREFIX = "gpu-reservation"
RESERVATION_CONTAINER = "resource-reservation"
#: Written by the agent in the reservation pod: the UUID of the device it was given.
RESERVED_DEVICE_ANNOTATION = "run.ai/reserve_for_gpu_index"
#: Set by the admission webhook: the name prefix of the pod's shared-GPU ConfigMaps.
CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"
FRACTION_CONTAINER_ANNOTATION = "gpu-fraction-container-name"
DO_NOT_DISRUPT_ANNOTATION = "karpenter.sh/do-not-disrupt"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
GPU_PORTION = "GPU_PORTION"
#: Deprecated names KAI still fills (backwards compatibility of old images).
NUM_GPUS_BC = "RUNAI_NUM_OF_GPUS"
#: The GPU Fractioning Operator's annotation prefix (fractiond's default).
FRACTIONING_PREFIX = "nvidia.com/container."
CONFIGMAP_SUFFIX = "shared-gpu"
_MAX_VOLUME_NAME = 63


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """The container that gets the shared GPU: its name, index, and whether it is an init container."""

    name: str
    index: int
    init: bool = False

    @property
    def suffix(self) -> str:
        """`<index>` or `i<index>` (KAI's ConfigMap name part)."""
        return f"i{self.index}" if self.init else str(self.index)


def requests_shared_gpu(obj: JSON) -> bool:
    """The pod asks for a GPU share (`gpu-fraction` or `gpu-memory`), whatever the value."""
    ann = meta(obj).get("annotations") or {}
    return GPU_FRACTION in ann or GPU_MEMORY in ann


def fraction_container(obj: JSON) -> ContainerRef:
    """KAI's GetFractionContainerRef: the container named by `gpu-fraction-container-name` (init
    containers first), else the first container. Raises ConvertError when the name matches none."""
    spec = obj.get("spec") or {}
    name = (meta(obj).get("annotations") or {}).get(FRACTION_CONTAINER_ANNOTATION)
    containers = spec.get("containers") or []
    if name is None:
        if not containers:
            raise ConvertError("spec.containers: the pod has no container to give the GPU to")
        return ContainerRef(str(containers[0].get("name", "")), 0)
    for init, group in ((True, spec.get("initContainers") or []), (False, containers)):
        for i, c in enumerate(group):
            if c.get("name") == name:
                return ContainerRef(str(name), i, init)
    raise ConvertError(f"annotation {FRACTION_CONTAINER_ANNOTATION}={name!r}: no container or init container "
                       f"of that name")


def configmap_names(prefix: str, ref: ContainerRef) -> tuple[str, str]:
    """(capabilities ConfigMap, env ConfigMap) of the fraction container: `<prefix>-<i>`, `<prefix>-<i>-evar`."""
    base = f"{prefix}-{ref.suffix}"
    return base, f"{base}-evar"


def configmap_prefix(obj: JSON) -> str | None:
    """The prefix the webhook recorded on the pod, or None (the pod was not mutated)."""
    value = (meta(obj).get("annotations") or {}).get(CONFIGMAP_ANNOTATION)
    return str(value) if value else None


def new_configmap_prefix(obj: JSON, ref: ContainerRef, token: str) -> str:
    """KAI's generateConfigMapNamePrefix: `<owner or pod name, cut>-<token>-shared-gpu`, short enough
    that `<prefix>-<i>-evar-vol` stays a valid volume name. `token` is 7 random characters."""
    m = meta(obj)
    owners = m.get("ownerReferences") or []
    base = str(owners[0].get("name") if owners else m.get("name") or m.get("generateName") or "pod").strip("-")
    room = _MAX_VOLUME_NAME - (len(token) + 6) - len(CONFIGMAP_SUFFIX) - len(str(ref.index)) - 1 - 5
    return f"{base[:room].rstrip('-.')}-{token}-{CONFIGMAP_SUFFIX}"


def link_configmaps(obj: JSON, ref: ContainerRef, prefix: str) -> JSON:
    """A copy of the pod with KAI's links to its shared-GPU ConfigMaps: the prefix annotation, env
    `NVIDIA_VISIBLE_DEVICES`/`RUNAI_NUM_OF_GPUS`/`GPU_PORTION` from the capabilities map, the env map as
    `envFrom` (optional: false, so the container waits for it) and the capabilities map as a volume."""
    import copy

    pod = copy.deepcopy(obj)
    pod.setdefault("metadata", {}).setdefault("annotations", {})[CONFIGMAP_ANNOTATION] = prefix
    caps, evar = configmap_names(prefix, ref)
    spec = pod.setdefault("spec", {})
    container = spec["initContainers" if ref.init else "containers"][ref.index]
    env = [e for e in container.get("env") or [] if e.get("name") not in (VISIBLE_DEVICES, NUM_GPUS_BC, GPU_PORTION)]
    for key in (VISIBLE_DEVICES, NUM_GPUS_BC, GPU_PORTION):
        env.append({"name": key, "valueFrom": {"configMapKeyRef": {"name": caps, "key": key}}})
    container["env"] = env
    env_from = container.setdefault("envFrom", [])
    if not any((e.get("configMapRef") or {}).get("name") == evar for e in env_from):
        env_from.append({"configMapRef": {"name": evar, "optional": False}})
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != f"{caps}-vol"]
    volumes.append({"name": f"{caps}-vol", "configMap": {"name": caps}})
    spec["volumes"] = volumes
    return pod


def visible_devices_key_map(obj: JSON, ref: ContainerRef, prefix: str) -> str:
    """Which ConfigMap holds NVIDIA_VISIBLE_DEVICES (KAI's SetNvidiaVisibleDevices): the capabilities map
    when the container's env reads it from a ConfigMap key, else the env (`-evar`) map."""
    spec = obj.get("spec") or {}
    container = (spec.get("initContainers" if ref.init else "containers") or [{}])[ref.index]
    caps, evar = configmap_names(prefix, ref)
    for e in container.get("env") or []:
        if e.get("name") == VISIBLE_DEVICES and ((e.get("valueFrom") or {}).get("configMapKeyRef")):
            return caps
    return evar


def is_reservation_pod(obj: JSON) -> bool:
    """KAI's IsResourceReservationTask: the pod carries `app=kai-resource-reservation`."""
    return (meta(obj).get("labels") or {}).get(APP_LABEL) == RESERVATION_APP


def reservation_key(obj: JSON) -> tuple[str, str] | None:
    """(node, GPU group) a reservation pod holds a device for; None when it names neither."""
    node = (obj.get("spec") or {}).get("nodeName")
    group = (meta(obj).get("labels") or {}).get(GPU_GROUP_LABEL)
    return (str(node), str(group)) if node and group else None


def reserved_device(obj: JSON) -> str | None:
    """The device UUID the reservation pod's agent reported, or None (not yet)."""
    value = (meta(obj).get("annotations") or {}).get(RESERVED_DEVICE_ANNOTATION)
    return str(value) if value and value != "-1" else None


def reservation_pod_name(node: str, group: str) -> str:
    """`gpu-reservation-<node>-<group>`, deterministic so that a retry (or a restarted scheduler)
    finds the pod it created instead of creating a second one; long names keep a hash of the rest."""
    name = f"{RESERVATION_POD_PREFIX}-{node}-{group}".lower()
    name = re.sub(r"[^a-z0-9.-]", "-", name)
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(f"{node}/{group}".encode()).hexdigest()[:10]
    return f"{name[:52].rstrip('-.')}-{digest}"


@dataclass(frozen=True, slots=True)
class ReservationSpec:
    """How reservation pods are made (chart values / `shoal run` flags)."""

    namespace: str = RESERVATION_NAMESPACE
    image: str = "shoal:latest"
    service_account: str = RESERVATION_APP
    runtime_class: str = ""
    cpu: str = "2m"
    memory: str = "48Mi"


def reservation_pod(node: str, group: str, rs: ReservationSpec) -> JSON:
    """The pod that holds one whole `nvidia.com/gpu` on `node` for GPU group `group` and runs
    `shoal gpu-reservation-agent` to report which device it got. `nodeName` is set: no scheduler
    places it; kubelet and the device plugin account for the device."""
    resources: dict[str, Any] = {"limits": {"nvidia.com/gpu": "1", "memory": rs.memory},
                                 "requests": {"nvidia.com/gpu": "1", "cpu": rs.cpu, "memory": rs.memory}}
    field_env = [{"name": n, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.{f}"}}}
                 for n, f in (("POD_NAME", "name"), ("POD_NAMESPACE", "namespace"))]
    spec: JSON = {"nodeName": node, "serviceAccountName": rs.service_account, "restartPolicy": "Always",
                  "terminationGracePeriodSeconds": 0,
                  "tolerations": [{"operator": "Exists"}],
                  "containers": [{"name": RESERVATION_CONTAINER, "image": rs.image, "imagePullPolicy": "IfNotPresent",
                                  "args": ["gpu-reservation-agent"], "env": field_env, "resources": resources}]}
    if rs.runtime_class:
        spec["runtimeClassName"] = rs.runtime_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": reservation_pod_name(node, group), "namespace": rs.namespace,
                         "labels": {APP_LABEL: RESERVATION_APP, GPU_GROUP_LABEL: group},
                         "annotations": {DO_NOT_DISRUPT_ANNOTATION: "true"}},
            "spec": spec}


def fractioning_annotations(container: str, devices: list[str], memory_mib: int) -> dict[str, str]:
    """The GPU Fractioning Operator's per-container annotations (what fractiond injects at container
    creation): `<prefix><c>.gpus.devices` (comma-separated UUIDs) and `<prefix><c>.gpu-memory.request`
    / `.limit` (binary quantities, the device memory the pod may use on each device)."""
    key = f"{FRACTIONING_PREFIX}{container}"
    out = {f"{key}.gpus.devices": ",".join(devices)}
    if memory_mib > 0:
        out[f"{key}.gpu-memory.request"] = f"{memory_mib}Mi"
        out[f"{key}.gpu-memory.limit"] = f"{memory_mib}Mi"
    return out
