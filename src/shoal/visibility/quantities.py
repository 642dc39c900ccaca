"""Units of the scheduling report: core units (milli-GPU, milli-CPU, bytes) to what users read."""

from __future__ import annotations

MILLI = 1000.0


def gpus(milli: float) -> float:
    """GPU milli -> GPU devices (fractions kept to 0.01, like KAI)."""
    return round(float(milli) / MILLI, 2)


def cores(milli: float) -> float:
    return round(float(milli) / MILLI, 3)


def limit_value(v: float, scale: float) -> float | None:
    """A quota or limit in report units; None = unlimited (-1)."""
    return None if v == -1 else round(float(v) / scale, 3)


def gpu_text(n: float) -> str:
    """`4 GPUs`, `1 GPU`, `0.5 GPU`."""
    v = round(float(n), 2)
    return f"{v:g} GPU" + ("" if v == 1 or 0 < v < 1 else "s")


def bytes_text(n: float) -> str:
    """Binary units, one decimal: `512Gi`, `1.5Gi`, `100Mi`."""
    v = float(n)
    for unit, size in (("Ti", 1024.0**4), ("Gi", 1024.0**3), ("Mi", 1024.0**2), ("Ki", 1024.0)):
        if abs(v) >= size:
            return f"{v / size:.1f}".rstrip("0").rstrip(".") + unit
    return f"{v:g}"


def duration_text(seconds: float | None) -> str:
    """`45s`, `12m`, `3h05m`, `2d4h`; `-` for None."""
    if seconds is None:
        return "-"
    s = max(round(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"
