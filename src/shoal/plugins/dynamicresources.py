"""The dynamicresources plugin (kai-spec §3.10, §3.15): a pod's DRA claims must exist, have room
for one more consumer, and (shared GPU claims) carry the job's queue label.

The GPUs the claims ask for are counted by the core as whole GPUs of the pod (`Pod.dra_gpus`,
set by the adapter), so quota, fit and topology need nothing here.
"""

from __future__ import annotations

from shoal.framework.dra import DraState
from shoal.framework.jobs import Task
from shoal.framework.session import Session


def open_dynamicresources(ssn: Session, args: dict[str, str]) -> None:
    claims = ssn.snapshot.resource_claims
    users = [t for t in ssn.tasks.values() if t.pod.resource_claims]
    if not users:
        return
    state = DraState(claims, users)
    ssn.hooks.extra["dra"] = state

    def pre_predicate(s: Session, task: Task) -> str | None:
        if not task.pod.resource_claims:
            return None
        return state.check(task)
    ssn.hooks.pre_predicates.append(pre_predicate)
