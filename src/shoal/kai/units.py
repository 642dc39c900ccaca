"""KAI's unit rules: GPU fractions at 0.01 resolution, the GPU-memory floor, queue CRD units,
priority classes and preemptibility, durations.

Every adapter (the live service, the simulator, the conformance harness, the cluster file of
`shoal cycle`) turns its input into the model through these functions, so one job is the same
model object whichever way it enters (tests/kai/test_four_adapters.py holds them to it).
Functions are pure; a value KAI would refuse raises `ConvertError` naming it.
"""

from __future__ import annotations

import math

from shoal.model.durations import parse_duration
from shoal.model.node import DEFAULT_GPU_MEMORY_MIB
from shoal.model.pod import GpuRequest
from shoal.model.queue import UNLIMITED
from shoal.model.resources import MILLI

__all__ = [
    "DEFAULT_PRIORITY",
    "GPU_MEMORY_FLOOR_MIB",
    "NON_PREEMPTIBLE_FROM",
    "PRIORITY_CLASSES",
    "QUEUE_UNITS",
    "ConvertError",
    "default_preemptible",
    "fraction_request",
    "gpu_fraction_milli",
    "gpus_request",
    "node_gpu_memory_mib",
    "parse_duration",
    "preemptibility",
    "priority_of",
    "queue_amount",
]


class ConvertError(ValueError):
    """An object (or a field of a file) the scheduler cannot use; the message is meant for its owner."""


# -- GPUs ---------------------------------------------------------------------------------------
#: KAI keeps a GPU portion as a fixed-point number of hundredths of a device.
_HUNDREDTHS = 100


def gpu_fraction_milli(fraction: float) -> int:
    """KAI's `round(portion x 100) / 100` in milli-GPU: 0.333 -> 330, 0.125 -> 130.

    Rounds half away from zero like Go's `math.Round` (Python's `round` rounds half to even,
    which would make 0.125 -> 120). Exact for every float: the half test is on `x - trunc(x)`."""
    x = fraction * _HUNDREDTHS
    whole = math.trunc(x)
    if abs(x - whole) >= 0.5:
        whole += 1 if x > 0 else -1
    return int(whole) * (MILLI // _HUNDREDTHS)


def fraction_request(fraction: float, devices: int, what: str) -> GpuRequest:
    """A `gpu-fraction` of `devices` devices -> GpuRequest; `what` names the field in errors.

    KAI accepts 0 < f <= 1; a fraction that rounds to a whole device is a whole-GPU request of
    `devices` GPUs, one that rounds to 0 is refused."""
    if not math.isfinite(fraction) or fraction <= 0 or fraction > 1:
        raise ConvertError(f"{what}: must be in (0, 1]")
    portion = gpu_fraction_milli(fraction)
    if portion <= 0:
        raise ConvertError(f"{what}: below 0.01 GPU")
    if portion >= MILLI:
        return GpuRequest(whole=devices)
    return GpuRequest(portion_milli=portion, devices=devices)


def gpus_request(gpus: float, what: str = "gpus", devices: int = 1) -> GpuRequest:
    """GPUs per pod as shoal's files write them (whole devices, or a fraction of one below 1)."""
    if not math.isfinite(gpus) or gpus < 0:
        raise ConvertError(f"{what}: must be >= 0, got {gpus:g}")
    if 0 < gpus < 1:
        return fraction_request(gpus, devices, f"{what}: {gpus:g}")
    if gpus != int(gpus):
        raise ConvertError(f"{what}: a pod asks for whole GPUs or a fraction below 1, got {gpus:g}")
    return GpuRequest(whole=int(gpus))


#: KAI's smallest GPU-memory unit (MiB): node GPU memory is floored to a multiple of it, and a
#: node without a readable `nvidia.com/gpu.memory` label counts this much (and is "not synced").
GPU_MEMORY_FLOOR_MIB = DEFAULT_GPU_MEMORY_MIB
#: `nvidia.com/gpu.memory` at or above this is bytes, below it MiB.
_GPU_MEMORY_BYTES_FROM = 1_048_576


def node_gpu_memory_mib(mib: int) -> int:
    """Memory of one device as KAI counts it: floored to 100 MiB, and 100 when that leaves 0."""
    return mib // GPU_MEMORY_FLOOR_MIB * GPU_MEMORY_FLOOR_MIB or GPU_MEMORY_FLOOR_MIB


def gpu_memory_label(label: str | None) -> tuple[int, bool]:
    """The `nvidia.com/gpu.memory` node label -> (MiB per device, synced).

    KAI: MiB if < 1,048,576 else bytes; floored to 100s; unset, unreadable or 0 -> (100, False)."""
    if not label:
        return GPU_MEMORY_FLOOR_MIB, False
    try:
        value = int(label)
    except ValueError:
        return GPU_MEMORY_FLOOR_MIB, False
    if value >= _GPU_MEMORY_BYTES_FROM:
        value //= 1024 * 1024
    floored = value // GPU_MEMORY_FLOOR_MIB * GPU_MEMORY_FLOOR_MIB
    return (floored, True) if floored > 0 else (GPU_MEMORY_FLOOR_MIB, False)


# -- queues -------------------------------------------------------------------------------------
#: Queue CRD units -> core units: GPU devices -> milli-GPU, CPU millicores, memory MB -> bytes.
QUEUE_UNITS = {"gpu": MILLI, "cpu": 1, "memory": 10**6}


def queue_amount(value: float, resource: str) -> int:
    """A Queue CRD quota or limit (`-1` = unlimited) in core units."""
    return UNLIMITED if value == UNLIMITED else round(value * QUEUE_UNITS[resource])


# -- priorities ---------------------------------------------------------------------------------
#: The priority classes KAI ships (kai-spec §5.5): name -> value.
PRIORITY_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
#: A pod group whose priority class is unknown, with no cluster-wide default class.
DEFAULT_PRIORITY = 50
#: Without `preemptibility`, priority >= this makes a job non-preemptible.
NON_PREEMPTIBLE_FROM = 100


def priority_of(class_name: str, priorities: dict[str, int], global_default: int | None) -> int:
    """KAI: the class's value; missing class -> the global default class's value, else 50."""
    if class_name and class_name in priorities:
        return priorities[class_name]
    return global_default if global_default is not None else DEFAULT_PRIORITY


def default_preemptible(priority: int) -> bool:
    """KAI's derived preemptibility: priority < 100."""
    return priority < NON_PREEMPTIBLE_FROM


def preemptibility(value: object, priority: int, where: str) -> bool:
    """`preemptible` / `non-preemptible`, or derived from the priority when unset."""
    if value in (None, ""):
        return default_preemptible(priority)
    if value == "preemptible":
        return True
    if value == "non-preemptible":
        return False
    raise ConvertError(f"{where}: {value!r} is not preemptible or non-preemptible")
