"""What reclaim, preempt and consolidation share: the preemptor loop around the victim solver."""

from __future__ import annotations

from collections.abc import Callable

from shoal.actions.allocate import eligible
from shoal.actions.job_allocation import tasks_to_allocate
from shoal.actions.solver import Validator, VictimSolver, request_vector
from shoal.actions.victims import feasible_nodes
from shoal.framework.job_queue import JobsByQueue
from shoal.framework.jobs import Job, Task
from shoal.framework.session import ScenarioValidator, Session

#: Per preemptor: the victim candidates (in any order; the solver orders them), or None to skip.
VictimPicker = Callable[[Job], list[Job] | None]


def combine(ssn: Session, validators: list[ScenarioValidator],
            extra: Validator | None = None) -> Validator:
    """All registered validators (plugin order), then the action's own check."""
    def check(job: Job, victims: dict[str, list[Task]]) -> bool:
        if not all(v(ssn, job, victims) for v in validators):
            return False
        return extra is None or extra(job, victims)
    return check


def run_preemptors(ssn: Session, action: str, preemptor_ok: Callable[[Job], bool], pick: VictimPicker,
                   validator: Validator) -> None:
    """Pop ready pending jobs in queue order; for each that `preemptor_ok`, solve and commit."""
    queue = JobsByQueue(ssn, (j for j in ssn.jobs.values() if eligible(j) and preemptor_ok(j)),
                        depth=ssn.config.queue_depth_per_action.get(action),
                        request=lambda j: request_vector(tasks_to_allocate(j, real=False)))
    while True:
        job = queue.pop()
        if job is None:
            break
        victims = pick(job)
        if not victims:
            continue
        tasks = tasks_to_allocate(job, real=False)
        if not tasks:
            continue
        solver = VictimSolver(ssn, action, victims, validator, feasible_nodes(ssn, job.tasks))
        stmt = solver.solve(job)
        if stmt is not None:
            stmt.commit()


def candidate_victims(ssn: Session, keep: Callable[[Job], bool]) -> list[Job]:
    """Preemptible jobs with active-allocated pods, in a leaf queue, that `keep` accepts.
    Iterated in job-uid order (KAI: Go map order) so counters like consolidation's are stable."""
    out = []
    for uid in sorted(ssn.jobs):
        job = ssn.jobs[uid]
        if job.queue is None or not job.preemptible or job.active_allocated() == 0:
            continue
        if keep(job):
            out.append(job)
    return out
