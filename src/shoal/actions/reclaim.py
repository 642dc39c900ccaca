"""The reclaim action (kai-spec §3.13, §4.5): a queue below its fair share takes resources back
from preemptible jobs of other queues that are above theirs. The reclaimer is pipelined."""

from __future__ import annotations

from shoal.actions.common.job_allocation import tasks_to_allocate
from shoal.actions.common.preemption import candidate_victims, combine, run_preemptors
from shoal.actions.common.simulation import request_vector
from shoal.framework.jobs import Job
from shoal.framework.session import Session


def run(ssn: Session) -> None:
    def may_reclaim(job: Job) -> bool:
        req = request_vector(tasks_to_allocate(job, real=False))
        return all(gate(ssn, job, req) for gate in ssn.hooks.can_reclaim)

    def pick(job: Job) -> list[Job] | None:
        if not may_reclaim(job):
            return None
        return candidate_victims(ssn, lambda v: v.queue is not job.queue and all(
            f(ssn, job, v) for f in ssn.hooks.reclaim_victim_filters))

    run_preemptors(ssn, "reclaim", lambda job: True, pick, combine(ssn, ssn.hooks.reclaim_validators))
