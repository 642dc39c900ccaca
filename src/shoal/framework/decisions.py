"""What a cycle returns: binds, pipelines, evictions and per-gang explanations.

A pod decision names its pod by uid (`pod`) and by what an API call needs (`name`, `namespace`),
so an adapter applies it without keeping its own index of pods."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Bind:
    """Bind `pod` to `node`. Shared-GPU pods carry their GPU groups and the portion per device."""

    pod: str
    name: str
    namespace: str
    job: str
    node: str
    gpu_groups: tuple[str, ...] = ()
    #: `Regular`, `Fraction` or `MigInstance` (KAI's `received-resource-type`).
    resource_type: str = "Regular"
    gpu_portion_milli: int = 0
    #: Unbound claims of the pod: (claim name, PV to bind it to, or "" = provision on `node`).
    volumes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Pipeline:
    """`pod` will go to `node` once resources being released there are free; nothing to bind now."""

    pod: str
    name: str
    namespace: str
    job: str
    node: str
    gpu_groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Evict:
    """Evict `pod`; `action` took it (reclaim, preempt, consolidation, stalegangeviction)."""

    pod: str
    name: str
    namespace: str
    job: str
    node: str
    action: str
    reason: str
    preemptor: str = ""


@dataclass(frozen=True, slots=True)
class JobFault:
    """An exception raised while `stage` (an action, `session`) handled `job` ("" = not one job)."""

    job: str
    namespace: str
    stage: str
    message: str


#: The explanation of every pending gang in a cluster without nodes (whatever actions ran).
NO_NODES = "no nodes in the cluster"


@dataclass(slots=True)
class GangExplanation:
    """Why a pod group is (still) pending: KAI reason codes and human-readable messages."""

    job: str
    namespace: str
    queue: str
    reasons: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Decisions:
    binds: list[Bind] = field(default_factory=list)
    pipelines: list[Pipeline] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    explanations: dict[str, GangExplanation] = field(default_factory=dict)
    #: PodGroup uid -> new last-start time / stale-since time (None clears it).
    last_start_times: dict[str, float] = field(default_factory=dict)
    stale_since: dict[str, float | None] = field(default_factory=dict)
    #: Failures contained while handling one job (or, with `job == ""`, an action as a whole);
    #: the job was skipped for the rest of the cycle (see framework.faults).
    faults: list[JobFault] = field(default_factory=list)
    #: (action, PodGroup uid) of each pending job reclaim, preempt or consolidation tried as a
    #: preemptor, in the order tried (KAI's "podgroups considered by action"), whether or not it
    #: found room: where two schedulers' searches part, this says which preemptor's turn it was.
    attempts: list[tuple[str, str]] = field(default_factory=list)
