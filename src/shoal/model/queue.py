"""Queues: a tree with quota (deserved), over-quota weight, limit and priority per resource."""

from __future__ import annotations

from dataclasses import dataclass, field

UNLIMITED = -1
#: Resources a queue has a share of, and the whole unit the fair-share division floors to.
QUEUE_RESOURCES = ("gpu", "cpu", "memory")


@dataclass(frozen=True, slots=True)
class QueueResource:
    """One resource of a queue, in core units (GPU milli, CPU milli, memory bytes); -1 = unlimited."""

    quota: int = UNLIMITED
    limit: int = UNLIMITED
    over_quota_weight: float = 1.0


@dataclass(slots=True)
class Queue:
    """A queue. A queue with children is a department-like parent; only leaves hold jobs."""

    name: str
    parent: str = ""
    priority: int = 100
    creation: float = 0.0
    gpu: QueueResource = field(default_factory=QueueResource)
    cpu: QueueResource = field(default_factory=QueueResource)
    memory: QueueResource = field(default_factory=QueueResource)
    preempt_min_runtime: float | None = None
    reclaim_min_runtime: float | None = None
    display_name: str = ""

    def resource(self, name: str) -> QueueResource:
        r: QueueResource = getattr(self, name)
        return r
