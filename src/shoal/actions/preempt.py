"""The preempt action (kai-spec §3.13): inside one queue, a pending job evicts preemptible jobs of
lower priority. A non-preemptible preemptor may only use its queue's quota (every level)."""

from __future__ import annotations

from shoal.actions.common.job_allocation import tasks_to_allocate
from shoal.actions.common.preemption import candidate_victims, combine, run_preemptors
from shoal.framework.jobs import Job, capacity_request
from shoal.framework.session import Session


def within_quota(job: Job) -> bool:
    """KAI `IsNonPreemptibleJobOverQueueQuota` passes: A_np + req <= quota on the leaf and
    every ancestor (always true for preemptible jobs)."""
    if job.preemptible or job.queue is None:
        return True
    return job.queue.over_nonpreemptible_quota(capacity_request(tasks_to_allocate(job, real=False))) is None


def run(ssn: Session) -> None:
    def pick(job: Job) -> list[Job] | None:
        if not within_quota(job):
            return None
        assert job.queue is not None
        return candidate_victims(ssn, lambda v: (
            v.queue is job.queue and v.priority < job.priority and v is not job
            and all(f(ssn, job, v) for f in ssn.hooks.preempt_victim_filters)), queue=job.queue.name,
            below_priority=job.priority)

    run_preemptors(ssn, "preempt", lambda job: True, pick, combine(ssn, ssn.hooks.preempt_validators))
