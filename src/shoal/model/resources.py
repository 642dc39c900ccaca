"""Resource space and exact integer resource vectors.

Units inside the core: CPU in millicores, memory in bytes, GPU in milli-GPU (1000 = one device),
pods as a count, MIG profiles and other extended resources as counts. A `ResourceSpace` fixes the
column of every resource for one snapshot; vectors are `numpy.int64` arrays in that order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.int64]

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
PODS = "pods"
BASE_RESOURCES = (CPU, MEMORY, GPU, PODS)
CPU_COL, MEM_COL, GPU_COL, PODS_COL = 0, 1, 2, 3

MILLI = 1000
_MIG_RE = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")


def mig_gpu_slices(resource: str) -> int | None:
    """GPU slices (the `g` of `mig-<g>g.<m>gb`) of a MIG resource name, or None if not MIG."""
    m = _MIG_RE.match(resource)
    return int(m.group(1)) if m else None


@dataclass(slots=True)
class ResourceSpace:
    """The ordered resource columns of one snapshot: the four base resources, then extras."""

    names: list[str] = field(default_factory=lambda: list(BASE_RESOURCES))
    index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {n: i for i, n in enumerate(self.names)}

    def add(self, name: str) -> int:
        """Column of `name`, adding it when new."""
        col = self.index.get(name)
        if col is None:
            col = len(self.names)
            self.names.append(name)
            self.index[name] = col
        return col

    @property
    def size(self) -> int:
        return len(self.names)

    def zeros(self) -> Vector:
        return np.zeros(self.size, dtype=np.int64)

    def vector(self, amounts: dict[str, int]) -> Vector:
        v = self.zeros()
        for name, amount in amounts.items():
            v[self.add(name) if name not in self.index else self.index[name]] = amount
        return v

    def mig_columns(self) -> list[tuple[int, int]]:
        """(column, GPU slices) of every MIG resource of the space."""
        out = []
        for name, col in self.index.items():
            g = mig_gpu_slices(name)
            if g is not None:
                out.append((col, g))
        return out


def parse_cpu(value: object) -> int:
    """A CPU quantity (cores or `500m`) in millicores."""
    return _parse_quantity(value, milli=True)


def parse_memory(value: object) -> int:
    """A memory quantity (`4Gi`, `1G`, bytes) in bytes."""
    return _parse_quantity(value, milli=False)


_SUFFIX = {
    "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5, "Ei": 1024**6,
    "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}
_QTY_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(m|Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E)?$")


def _parse_quantity(value: object, *, milli: bool) -> int:
    """Kubernetes quantity -> integer (millis when `milli`), rounding up like `Quantity.MilliValue`."""
    from decimal import ROUND_CEILING, Decimal

    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        d = Decimal(str(value))
    elif isinstance(value, str):
        m = _QTY_RE.match(value.strip())
        if not m:
            raise ValueError(f"not a quantity: {value!r}")
        d = Decimal(m.group(1))
        suffix = m.group(2)
        if suffix == "m":
            d = d / 1000
        elif suffix:
            d = d * _SUFFIX[suffix]
    else:
        raise ValueError(f"not a quantity: {value!r}")
    if d < 0:
        raise ValueError(f"negative quantity: {value!r}")
    if milli:
        d = d * 1000
    return int(d.to_integral_value(rounding=ROUND_CEILING))
