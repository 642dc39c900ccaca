"""Pods of other schedulers on our nodes: capacity the core must count, never work it schedules.

They enter the snapshot as Running pods of one synthetic, non-preemptible job in no queue
(`OTHER_JOB`): the session counts them in node usage (idle is right), no action ever takes them
as victims, and `other_usage` (the snapshot's `other_used`) subtracts them from the queue totals.
"""

from __future__ import annotations

from collections.abc import Iterable

from shoal.model.pod import Pod
from shoal.model.podgroup import PodGroup
from shoal.model.resources import GPU

OTHER_JOB = "~other-schedulers"


def other_group() -> PodGroup:
    """The synthetic gang of every other scheduler's pod (never preemptible, in no queue)."""
    return PodGroup(uid=OTHER_JOB, name=OTHER_JOB, namespace="", queue="", priority=1 << 30,
                    preemptible=False, creation=0.0, min_member=1)


def other_usage(pods: Iterable[Pod]) -> dict[str, dict[str, int]]:
    """Per node: CPU, memory, whole GPUs and extended resources the pods hold."""
    out: dict[str, dict[str, int]] = {}
    for p in pods:
        used = out.setdefault(p.node or "", {})
        used["cpu"] = used.get("cpu", 0) + p.cpu_milli
        used["memory"] = used.get("memory", 0) + p.memory
        if p.gpu.whole:
            used[GPU] = used.get(GPU, 0) + p.gpu.whole
        for k, v in p.extended.items():
            used[k] = used.get(k, 0) + v
    return out
