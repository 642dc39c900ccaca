"""Session-side DRA state (kai-spec §3.15): the claims of the snapshot and who consumes them.

A claim may be reserved for at most `MAX_CLAIM_CONSUMERS` pods. The snapshot gives the pods it
is reserved for already; pods that reference it and are placed during this session (allocated
or pipelined from Pending) are counted on top, so a rollback frees their places automatically.
"""

from __future__ import annotations

from shoal.framework.jobs import Task
from shoal.model.dra import MAX_CLAIM_CONSUMERS, QUEUE_LABEL, ResourceClaim
from shoal.model.status import ACTIVE_ALLOCATED, PodStatus


class DraState:
    """The claims of one session and, per claim, the tasks that reference it."""

    def __init__(self, claims: dict[tuple[str, str], ResourceClaim], tasks: list[Task]) -> None:
        self.claims = claims
        self.consumers: dict[tuple[str, str], list[Task]] = {}
        for task in tasks:
            for name in task.pod.resource_claims:
                self.consumers.setdefault((task.pod.namespace, name), []).append(task)

    def new_consumers(self, key: tuple[str, str], besides: Task) -> int:
        """Pods placed on the claim in this session (pending in the snapshot), `besides` excluded."""
        return sum(1 for t in self.consumers.get(key, ())
                   if t is not besides and t.pod.status == PodStatus.PENDING and t.status & ACTIVE_ALLOCATED)

    def check(self, task: Task) -> str | None:
        """Why the task cannot be placed because of its claims, or None."""
        pod = task.pod
        queue = task.job.pg.queue
        for name in pod.resource_claims:
            key = (pod.namespace, name)
            claim = self.claims.get(key)
            if claim is None:
                return f"resource claim {pod.namespace}/{name} not found"
            # A pod running already is among the claim's reserved_for; a pending one needs a place.
            taken = claim.reserved_for + self.new_consumers(key, task) + (pod.status == PodStatus.PENDING)
            if taken > MAX_CLAIM_CONSUMERS:
                return (f"resource claim {pod.namespace}/{name} is reserved for the maximum of "
                        f"{MAX_CLAIM_CONSUMERS} pods")
            if claim.gpus and not claim.from_template and claim.labels.get(QUEUE_LABEL) != queue:
                return (f"shared GPU resource claim {pod.namespace}/{name} has queue label "
                        f"{claim.labels.get(QUEUE_LABEL)!r}, the job's queue is {queue!r}")
        return None
