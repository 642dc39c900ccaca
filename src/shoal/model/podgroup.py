"""Pod groups (jobs / gangs): pod sets with their minimums, queue, priority and preemptibility."""

from __future__ import annotations

from collections.abc import Callable
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
    #: KAI's `minSubGroup`: how many direct children must be satisfied (None = all of them).
    min_subgroup: int | None = None


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
    #: KAI's `minSubGroup` of the root: how many direct children (subgroups) must be satisfied for
    #: the gang to be (None = every one, the minMember semantics).
    min_subgroup: int | None = None
    #: KAI's `markUnschedulable`: False = a gang that cannot fit gets events but no
    #: PodScheduled=False condition on its pods (cluster autoscalers then leave it alone).
    mark_unschedulable: bool = True
    #: KAI's `schedulingBackoff` 1 with an UnschedulableOnNodePool condition already recorded: the
    #: gang failed once and is not tried again (KAI: by this node pool's scheduler) until the
    #: condition is cleared. Such a gang is left out of every action and its status untouched.
    backoff_blocked: bool = False
    #: Conformance scenarios only: what KAI's test builder adds to the job's `Allocated` beyond
    #: the sum of its allocated pods (GPU milli, CPU milli, memory bytes); see
    #: `shoal.conformance.loader.kai_builder_bias`. Zero for every live job.
    allocated_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        if not self.pod_sets:
            self.pod_sets = [PodSetSpec(DEFAULT_POD_SET, max(self.min_member, 1), topology=None)]

    @property
    def uses_min_subgroup(self) -> bool:
        return self.min_subgroup is not None or any(s.min_subgroup is not None for s in self.sub_group_sets)

    def children(self) -> dict[str, list[tuple[bool, str]]]:
        """The tree: parent name ("" = root) -> (is a sub-group set, name) of its direct children.
        A child naming an unknown parent (or itself) hangs under the root."""
        groups = {s.name for s in self.sub_group_sets}
        out: dict[str, list[tuple[bool, str]]] = {}
        for s in self.sub_group_sets:
            parent = s.parent if s.parent in groups and s.parent != s.name else ""
            out.setdefault(parent, []).append((True, s.name))
        for ps in self.pod_sets:
            out.setdefault(ps.parent if ps.parent in groups else "", []).append((False, ps.name))
        return out

    def satisfied(self, ok: Callable[[str], bool]) -> bool:
        """Is the gang satisfied, given which pod sets (by name) are? Without minSubGroup every pod
        set must be; with it, each level needs `min_subgroup` satisfied direct children. Pure."""
        if not self.uses_min_subgroup:
            return all(ok(ps.name) for ps in self.pod_sets)
        tree = self.children()
        mins = {s.name: s.min_subgroup for s in self.sub_group_sets}

        def node(name: str, need: int | None) -> bool:
            got = [node(c, mins[c]) if is_group else ok(c) for is_group, c in tree.get(name, [])]
            return all(got) if need is None else sum(got) >= need

        return node("", self.min_subgroup)
