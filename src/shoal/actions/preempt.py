"""The preempt action (kai-spec §3.13): inside one queue, a pending job evicts preemptible jobs of
lower priority. A non-preemptible preemptor may only use its queue's quota (every level)."""

from __future__ import annotations

import numpy as np

from shoal.actions.job_allocation import tasks_to_allocate
from shoal.actions.preemption import candidate_victims, combine, run_preemptors
from shoal.framework.jobs import Job
from shoal.framework.session import Session


def within_quota(job: Job) -> bool:
    """KAI `IsNonPreemptibleJobOverQueueQuota` passes: A_np + req <= quota on the leaf and
    every ancestor (always true for preemptible jobs)."""
    if job.preemptible or job.queue is None:
        return True
    req = np.zeros(3)
    for t in tasks_to_allocate(job, real=False):
        req += np.array([t.pod.gpu_quota_milli, t.pod.cpu_milli, t.pod.memory], dtype=np.float64)
    for q in job.queue.ancestors():
        for r in range(3):
            d = q.deserved[r]
            if d != -1 and req[r] != 0 and d < q.allocated_np[r] + req[r]:
                return False
    return True


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
