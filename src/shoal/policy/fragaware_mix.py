"""The pod mix for ``fragaware``: the kind of a pod, the mix's text form (the plugin's optional
``mix`` argument) and its conversion to FGD's typical pods. Pure; no I/O. The mix itself
(`MixEntry`) is a model type: adapters hand it to the core as `ClusterSnapshot.pod_mix`."""

from __future__ import annotations

import numpy as np

from shoal.model.pod import Pod, portion_for_memory
from shoal.model.podmix import MixEntry
from shoal.model.resources import MILLI
from shoal.policy.fragmentation import TypicalPods

__all__ = ["DEFAULT_MODEL_LABEL", "MixEntry", "MixFormatError", "MixKey", "encode_mix", "parse_mix", "pod_kind",
           "typical_from_mix"]

#: The node label naming the GPU model (NVIDIA GPU feature discovery).
DEFAULT_MODEL_LABEL = "nvidia.com/gpu.product"

MixKey = tuple[int, int, int, tuple[str, ...]]


def pod_kind(pod: Pod, model_label: str = DEFAULT_MODEL_LABEL, device_memory_mib: int = 0) -> MixKey:
    """(CPU milli, GPU milli per device, devices, allowed models) of a pod.

    A GPU-memory request becomes a portion of a ``device_memory_mib`` device (a whole device if
    that is unknown); the allowed models come from the pod's node selector on ``model_label``.
    """
    g = pod.gpu
    if g.whole:
        milli, devices = MILLI, g.whole
    elif g.portion_milli:
        milli, devices = g.portion_milli, g.devices
    elif g.memory_mib:
        milli, devices = min(MILLI, portion_for_memory(g.memory_mib, device_memory_mib)), g.devices
    else:
        milli, devices = 0, 0
    model = pod.node_selector.get(model_label)
    models = (model,) if model and devices else ()
    return pod.cpu_milli, milli, devices, models


class MixFormatError(ValueError):
    """A pod-mix string that cannot be parsed; the message names the bad entry."""


def encode_mix(entries: list[MixEntry]) -> str:
    """``cpu/gpu_milli x devices [@model|model] = weight`` entries joined by ``;`` (the plugin's
    ``mix`` argument), e.g. ``4000/500x1=0.3;12000/1000x2@A100=0.1;8000/0x0=0.05``."""
    return ";".join(e.encode() for e in entries)


def parse_mix(text: str) -> list[MixEntry]:
    """Inverse of :func:`encode_mix`; blank entries are skipped. Raises :class:`MixFormatError`."""
    out: list[MixEntry] = []
    for raw in text.split(";"):
        part = raw.strip()
        if not part:
            continue
        try:
            shape, weight = part.split("=")
            shape, _, models = shape.partition("@")
            cpu, gpu = shape.split("/")
            milli, devices = gpu.split("x")
            entry = MixEntry(int(cpu), int(milli), int(devices),
                             tuple(m for m in models.split("|") if m), float(weight))
        except ValueError:
            raise MixFormatError(f"bad pod-mix entry {part!r} (expected cpu/millixdevices[@models]=weight)") from None
        negative = min(entry.cpu_milli, entry.gpu_milli, entry.devices, entry.weight) < 0
        if negative or entry.gpu_milli > MILLI:
            raise MixFormatError(f"bad pod-mix entry {part!r}: negative amount or more than 1000 milli per GPU")
        out.append(entry)
    return out


def typical_from_mix(entries: list[MixEntry], models: list[str]) -> TypicalPods:
    """The mix as FGD's :class:`TypicalPods` over the node GPU models ``models`` (column k of
    ``allowed`` = ``models[k]``). Zero-weight entries are dropped; an empty mix gives no pods
    (every fragment is then 0 and only the packing terms rank nodes)."""
    kept = [e for e in entries if e.weight > 0]
    total = sum(e.weight for e in kept)
    allowed = np.ones((len(kept), max(len(models), 1)), dtype=np.bool_)
    for i, e in enumerate(kept):
        if e.models and e.gpu_milli > 0:
            allowed[i, : len(models)] = [m in e.models for m in models]
    return TypicalPods(
        cpu_milli=np.array([e.cpu_milli for e in kept], dtype=np.int64),
        milli=np.array([e.gpu_milli if e.devices else 0 for e in kept], dtype=np.int64),
        count=np.array([e.devices if e.gpu_milli else 0 for e in kept], dtype=np.int64),
        allowed=allowed,
        freq=np.array([e.weight / total for e in kept], dtype=np.float64),
    )
