"""Pod (task) statuses: KAI's status set and the groups the scheduler reasons with."""

from __future__ import annotations

from enum import IntFlag


class PodStatus(IntFlag):
    """KAI's pod statuses (bit flags, same values as KAI's `pod_status`)."""

    PENDING = 1
    GATED = 2
    ALLOCATED = 4
    PIPELINED = 8
    BINDING = 16
    BOUND = 32
    RUNNING = 64
    RELEASING = 128
    SUCCEEDED = 256
    FAILED = 512
    UNKNOWN = 1024
    DELETED = 2048

    @classmethod
    def parse(cls, name: str) -> PodStatus:
        """Parse a status name (case-insensitive); raises ValueError naming the bad value."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            valid = ", ".join(s.name.title() for s in cls if s.name)
            raise ValueError(f"unknown pod status {name!r} (valid: {valid})") from None

    @property
    def title(self) -> str:
        return (self.name or "").title()


S = PodStatus
#: Occupies node resources (Releasing included).
ACTIVE_USED = S.ALLOCATED | S.PIPELINED | S.BINDING | S.BOUND | S.RUNNING | S.RELEASING
#: Occupies node resources and is not on its way out.
ACTIVE_ALLOCATED = S.ALLOCATED | S.PIPELINED | S.BINDING | S.BOUND | S.RUNNING
#: Counted as the queue's allocation (excludes Pipelined and Releasing).
ALLOCATED = S.ALLOCATED | S.BINDING | S.BOUND | S.RUNNING
#: Alive pods: will run or run now.
ALIVE = S.ALLOCATED | S.PIPELINED | S.BINDING | S.BOUND | S.RUNNING | S.PENDING | S.GATED


def is_active_used(status: PodStatus) -> bool:
    return bool(status & ACTIVE_USED)


def is_active_allocated(status: PodStatus) -> bool:
    return bool(status & ACTIVE_ALLOCATED)


def is_allocated(status: PodStatus) -> bool:
    return bool(status & ALLOCATED)


def is_alive(status: PodStatus) -> bool:
    return bool(status & ALIVE)


#: The same groups as frozensets of members: membership tests avoid IntFlag arithmetic in hot loops.
ACTIVE_USED_SET = frozenset(s for s in PodStatus if s & ACTIVE_USED)
ACTIVE_ALLOCATED_SET = frozenset(s for s in PodStatus if s & ACTIVE_ALLOCATED)
ALLOCATED_SET = frozenset(s for s in PodStatus if s & ALLOCATED)
ALIVE_SET = frozenset(s for s in PodStatus if s & ALIVE)
