"""The stale-gang eviction action (kai-spec §3.13): a gang that has running pods but fewer than
its minimum in some pod set (and nothing succeeded) is stale; after the grace period every
active-allocated pod of it is evicted. The stale-since time is recorded in the decisions."""

from __future__ import annotations

from shoal.framework.faults import isolated
from shoal.framework.jobs import Job
from shoal.framework.session import Session
from shoal.framework.statement import Statement
from shoal.model.status import ACTIVE_ALLOCATED, PodStatus


def is_stale(job: Job) -> bool:
    if any(t.status == PodStatus.SUCCEEDED for t in job.tasks):
        return False
    if job.active_used() == 0:
        return False
    return not job.is_gang_satisfied()


def run(ssn: Session) -> None:
    for uid in sorted(ssn.jobs):
        job = ssn.jobs[uid]
        if job.fault or _plainly_fresh(job):
            continue
        with isolated(ssn, job, "stalegangeviction"):
            _check(ssn, job)


def _plainly_fresh(job: Job) -> bool:
    """Not stale now and not before, read from the session's counters alone (which cannot raise):
    most running jobs, skipped without an isolation scope each (a cycle of 20,000 jobs spent a
    third of this action opening and closing those scopes)."""
    if job.stale_since is not None or job.pg.uses_min_subgroup:
        return False
    return all(ps.active_used >= ps.min_available for ps in job.pod_sets.values())


def _check(ssn: Session, job: Job) -> None:
    """Track when `job` went stale; evict its allocated pods once the grace period is over."""
    uid = job.uid
    if not is_stale(job):
        if job.stale_since is not None:
            job.stale_since = None
            ssn.decisions.stale_since[uid] = None
        return
    if job.stale_since is None:
        job.stale_since = ssn.now
        ssn.decisions.stale_since[uid] = ssn.now
    grace = job.pg.staleness_grace_seconds
    if grace is None:
        grace = ssn.config.staleness_grace_seconds
    if grace < 0 or ssn.now - job.stale_since < grace:
        return
    stmt = Statement(ssn)
    for t in job.tasks:
        if t.status & ACTIVE_ALLOCATED and t.node >= 0:
            stmt.evict(t, "stalegangeviction", "gang below its minimum for longer than the grace period")
    stmt.commit()
