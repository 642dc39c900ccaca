"""Pod groups (jobs / gangs): pod sets with their minimums, queue, priority and preemptibility."""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.model.topology import TopologyConstraint

DEFAULT_POD_SET = "default"


@dataclass(frozen=True, slots=True)
class PodSetSpec:
    """A leaf of the pod-group tree: pods that must start together (`min_available` of them)."""

    name: str
    min_available: int
    parent: str = ""
    topology: TopologyConstraint | None = None


@dataclass(frozen=True, slots=True)
class SubGroupSetSpec:
    """An inner node of the pod-group tree (its min is ignored, like KAI's)."""

    name: str
    parent: str = ""
    topology: TopologyConstraint | None = None


@dataclass(slots=True)
class PodGroup:
    """A gang. Without explicit pod sets it has one pod set `default` with `min_member` pods."""

    uid: str
    name: str
    namespace: str
    queue: str
    priority: int
    preemptible: bool
    creation: float
    min_member: int = 1
    pod_sets: list[PodSetSpec] = field(default_factory=list)
    sub_group_sets: list[SubGroupSetSpec] = field(default_factory=list)
    topology: TopologyConstraint | None = None
    last_start_time: float | None = None
    stale_since: float | None = None
    #: Per-PodGroup staleness grace period (seconds); None = the scheduler default.
    staleness_grace_seconds: float | None = None
    #: Problems found while reading the object (bad annotation...). The gang is not scheduled.
    invalid_reasons: list[str] = field(default_factory=list)
    #: KAI's `markUnschedulable`: False = a gang that cannot fit gets events but no
    #: PodScheduled=False condition on its pods (cluster autoscalers then leave it alone).
    mark_unschedulable: bool = True
    #: KAI's `schedulingBackoff` 1 with an UnschedulableOnNodePool condition already recorded: the
    #: gang failed once and is not tried again (KAI: by this node pool's scheduler) until the
    #: condition is cleared. Such a gang is left out of every action and its status untouched.
    backoff_blocked: bool = False

    def __post_init__(self) -> None:
        if not self.pod_sets:
            self.pod_sets = [PodSetSpec(DEFAULT_POD_SET, max(self.min_member, 1), topology=None)]
