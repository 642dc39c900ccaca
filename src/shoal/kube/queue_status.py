"""A Queue's `status` as shoal writes it: allocated / requested / fairShare (and usage) per resource."""

from __future__ import annotations

import numpy as np

from shoal.framework.jobs import QueueInfo
from shoal.kai.objects import JSON


def queue_status(q: QueueInfo, with_usage: bool) -> JSON:
    """Status of one session queue; `with_usage` adds the decayed usage share (time-based fair share)."""
    status: JSON = {
        "allocated": resource_list(q.allocated),
        "allocatedNonPreemptible": resource_list(q.allocated_np),
        "requested": resource_list(q.request),
        "fairShare": resource_list(q.fair_share),
        "childQueues": sorted(c.name for c in q.children),
    }
    if with_usage:
        status["usage"] = {r: round(float(q.usage[i]), 4) for i, r in enumerate(("gpu", "cpu", "memory"))}
    return status


def resource_list(v: object) -> dict[str, str]:
    """A queue 3-vector (GPU milli, CPU milli, memory bytes) as Kubernetes quantities."""
    arr = np.asarray(v, dtype=float)

    def q(x: float, milli: bool) -> str:
        if not np.isfinite(x) or x < 0:
            return "0"
        return f"{round(x)}m" if milli else str(round(x))

    return {"nvidia.com/gpu": q(arr[0], True), "cpu": q(arr[1], True), "memory": q(arr[2], False)}
