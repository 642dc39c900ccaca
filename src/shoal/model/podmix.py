"""The pod mix: the kinds of pods the cluster is likely to see next, as an adapter learned them.

A history field of `ClusterSnapshot` (`pod_mix`), read by the ``fragaware`` plugin; the adapters
learn it with `shoal.history.podmix`. The text form and FGD's typical pods are in
`shoal.policy.fragaware_mix`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MixEntry:
    """One kind of pod in the mix: CPU milli, GPU milli per device (0 = CPU-only), devices,
    allowed GPU models (empty = any) and a non-negative weight (frequencies are weights / sum)."""

    cpu_milli: int
    gpu_milli: int
    devices: int
    models: tuple[str, ...]
    weight: float

    def encode(self) -> str:
        models = "@" + "|".join(self.models) if self.models else ""
        return f"{self.cpu_milli}/{self.gpu_milli}x{self.devices}{models}={self.weight:.6g}"
