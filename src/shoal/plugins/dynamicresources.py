"""The dynamicresources plugin (kai-spec §3.10, §3.15): a pod's DRA claims must exist, have room
for one more consumer, and (shared GPU claims) carry the job's queue label; on a node, each claim
must be held there already or find enough free node-bound devices (kube's DynamicResources filter,
which KAI runs with its predicates).

The GPUs the claims ask for are counted by the core as whole GPUs of the pod (`Pod.dra_gpus`,
set by the adapter), so quota, fit and topology need nothing here. Devices depend on where other
pods hold claims, so the device checks are pick-time filters (never cached).
"""

from __future__ import annotations

import numpy as np

from shoal.framework.dra import DraDevices, DraState
from shoal.framework.jobs import Task
from shoal.framework.session import Session


def open_dynamicresources(ssn: Session, args: dict[str, str]) -> None:
    claims = ssn.snapshot.resource_claims
    users = [t for t in ssn.tasks.values() if t.pod.resource_claims]
    if not users:
        return
    state = DraState(claims, users)

    def pre_predicate(s: Session, task: Task) -> str | None:
        if not task.pod.resource_claims:
            return None
        return state.check(task)
    ssn.hooks.pre_predicates.append(pre_predicate)
    if not ssn.snapshot.resource_slices:
        return  # the adapter models no devices
    devices = DraDevices(ssn.snapshot.resource_slices, ssn.nodes.index, state)

    def bound(s: Session, task: Task) -> tuple[np.ndarray, str] | None:
        return devices.bound_mask(task) if task.pod.resource_claims else None

    def free_devices(s: Session, task: Task) -> tuple[np.ndarray, str] | None:
        return devices.devices_mask(task) if task.pod.resource_claims else None
    ssn.hooks.dynamic_filters.extend([bound, free_devices])
