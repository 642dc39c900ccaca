"""The allocate action (kai-spec §3.13): place pending gangs in queue order, one statement each.

A job that fits is committed (bound, or pipelined when part of it must wait for releasing
resources); an elastic job is pushed back while it has pending pods, so it grows one pod per
turn, interleaved with other queues. A job that does not fit is rolled back and not retried
in this action.
"""

from __future__ import annotations

from shoal.actions.common.capacity_pruning import CapacityPruner
from shoal.actions.common.job_allocation import allocate_job, eligible
from shoal.framework.faults import isolated
from shoal.framework.job_queue import JobsByQueue
from shoal.framework.jobs import Job
from shoal.framework.session import Session
from shoal.framework.statement import Statement
from shoal.model.status import ALLOCATED, PodStatus


def run(ssn: Session) -> None:
    queue = JobsByQueue(ssn, (j for j in ssn.jobs.values() if eligible(j)),
                        depth=ssn.config.queue_depth_per_action.get("allocate"))
    pruner = CapacityPruner(ssn, queue)
    while True:
        job = queue.pop()
        if job is None:
            break
        with isolated(ssn, job, "allocate"):
            _try(ssn, queue, pruner, job)


def _try(ssn: Session, queue: JobsByQueue, pruner: CapacityPruner, job: Job) -> None:
    """One job's turn: skip it if doomed, else place it in one statement (pushed back while it
    still has pending pods, so an elastic job grows one turn at a time)."""
    if pruner.doomed(job):
        pruner.refuse(job)
        return
    had_allocated = job.has_status(ALLOCATED)
    stmt = Statement(ssn)
    job.capacity_block = None
    if not allocate_job(ssn, stmt, job):
        stmt.discard()
        pruner.learn(job)
        return
    pipelined = should_pipeline(job)
    if pipelined:
        convert_to_pipelined(stmt, job)
    stmt.commit()
    if not pipelined and not had_allocated:
        job.last_start_time = ssn.now
        ssn.decisions.last_start_times[job.uid] = ssn.now
    if job.has_pending():
        queue.push(job)


def should_pipeline(job: Job) -> bool:
    """Some pod set has a pipelined pod and too few non-pipelined ones to reach its minimum."""
    for ps in job.pod_sets.values():
        pipelined = sum(1 for t in ps.tasks if t.status == PodStatus.PIPELINED)
        if pipelined and ps.active_allocated - pipelined < ps.min_available:
            return True
    return False


def convert_to_pipelined(stmt: Statement, job: Job) -> None:
    """Every task of `job` allocated in `stmt` becomes pipelined on the same node and devices."""
    allocated = [(op.task, op.task.node, list(op.task.groups)) for op in stmt.ops
                 if op.kind == "allocate" and op.task.job is job and op.task.status == PodStatus.ALLOCATED]
    for task, node, groups in allocated:
        stmt.pipeline(task, node, groups, update_if_exists=True)
