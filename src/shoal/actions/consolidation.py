"""The consolidation action (kai-spec §3.13): move preemptible pods to other nodes so a pending
preemptible job fits. Nothing is killed: every victim must be re-placed (pipelined) elsewhere or
back where it was, else the scenario is rejected. Off when max preemptees is 0."""

from __future__ import annotations

import numpy as np

from shoal.actions.common.job_allocation import tasks_to_allocate
from shoal.actions.common.preemption import candidate_victims, run_preemptors
from shoal.actions.common.victims import kai_gpu_sums
from shoal.framework.cycle_state import StateKey
from shoal.framework.jobs import Job, Task
from shoal.framework.session import Session
from shoal.model.resources import MILLI
from shoal.model.status import PodStatus


def all_reallocated(job: Job, partial: list[Task], victims: dict[str, list[Task]]) -> bool:
    return not any(t.status == PodStatus.RELEASING for tasks in victims.values() for t in tasks)


#: Per session: (sum of node versions when computed, free GPUs of ready nodes).
_FREE_GPUS: StateKey[tuple[int, float]] = StateKey("free GPUs")


def enough_gpus(ssn: Session, job: Job) -> bool:
    """KAI `IsEnoughGPUsAllocatableForJob`: the idle + releasing GPUs of ready nodes, as KAI's
    `GetSumOfIdleGPUs` / `GetSumOfReleasingGPUs` read them (`victims.kai_gpu_sums`: a shared
    device's room counts beside its allocated shares only, not its pipelined ones), cover the
    GPUs the job's next tasks ask for."""
    need = sum(t.pod.gpu.milli for t in tasks_to_allocate(job, real=False)) / MILLI
    return free_gpus(ssn) >= need


def free_gpus(ssn: Session) -> float:
    """The gate's free GPUs: idle + releasing GPUs of ready nodes as KAI sums them; cached until a
    node changes (node versions only grow)."""
    nodes = ssn.nodes
    stamp = int(nodes.version.sum())
    cached = ssn.state.get(_FREE_GPUS)
    if cached is not None and cached[0] == stamp:
        return float(cached[1])
    ready = np.array([n.ready for n in nodes.nodes], dtype=bool)
    idle, releasing = kai_gpu_sums(ssn)
    free = float((idle[ready] + releasing[ready]).sum()) / 100
    ssn.state.set(_FREE_GPUS, (stamp, free))
    return free


def run(ssn: Session) -> None:
    limit = ssn.config.max_consolidation_preemptees
    if limit == 0:
        return

    def pick(job: Job) -> list[Job] | None:
        if not enough_gpus(ssn, job):
            return None
        counter = 0

        def keep(v: Job) -> bool:
            nonlocal counter
            if v is job or (limit != -1 and counter > limit):
                return False
            counter += 1
            return True

        return candidate_victims(ssn, keep)

    run_preemptors(ssn, "consolidation", lambda job: job.preemptible, pick, all_reallocated)
