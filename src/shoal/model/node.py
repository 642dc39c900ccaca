"""Nodes: allocatable resources, GPU devices, labels, taints and conditions."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_GPU_MEMORY_MIB = 100


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(slots=True)
class Node:
    """A node. `allocatable` holds core units by resource name (cpu milli, memory bytes,
    `nvidia.com/gpu` whole devices, pods, MIG profiles and extended resources as counts)."""

    name: str
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    ready: bool = True
    unschedulable: bool = False
    #: Memory of one GPU device in MiB (label `nvidia.com/gpu.memory`), floored to 100s.
    gpu_memory_mib: int = DEFAULT_GPU_MEMORY_MIB
    gpu_memory_synced: bool = True
    #: `none`, `single` or `mixed` (label `nvidia.com/mig.strategy`).
    mig_strategy: str = "none"
    mig_enabled: bool = False

    @property
    def gpu_count(self) -> int:
        """Devices on the node: label `nvidia.com/gpu.count`, else allocatable whole GPUs."""
        label = self.labels.get("nvidia.com/gpu.count")
        if label is not None:
            try:
                return int(label)
            except ValueError:
                pass
        return int(self.allocatable.get("nvidia.com/gpu", 0))

    @property
    def is_mig(self) -> bool:
        return self.mig_enabled or any(k.startswith("nvidia.com/mig-") for k in self.allocatable)
