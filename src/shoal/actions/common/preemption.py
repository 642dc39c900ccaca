"""What reclaim, preempt and consolidation share: the preemptor loop around the victim solver."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from shoal.actions.common.job_allocation import eligible, tasks_to_allocate
from shoal.actions.common.simulation import request_vector
from shoal.actions.common.solver import Validator, VictimSolver
from shoal.actions.common.victims import feasible_nodes
from shoal.framework.cycle_state import StateKey
from shoal.framework.faults import isolated
from shoal.framework.job_queue import JobsByQueue
from shoal.framework.jobs import Job, Task
from shoal.framework.session import ScenarioValidator, Session
from shoal.model.status import ACTIVE_ALLOCATED_SET

#: Per preemptor: the victim candidates (in any order; the solver orders them), or None to skip.
VictimPicker = Callable[[Job], list[Job] | None]


def combine(ssn: Session, validators: list[ScenarioValidator],
            extra: Validator | None = None) -> Validator:
    """All registered validators (plugin order), then the action's own check."""
    def check(job: Job, partial: list[Task], victims: dict[str, list[Task]]) -> bool:
        if not all(v(ssn, job, partial, victims) for v in validators):
            return False
        return extra is None or extra(job, partial, victims)
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
        ssn.decisions.attempts.append((action, job.uid))
        with isolated(ssn, job, action):
            _solve(ssn, action, job, pick, validator)


def _solve(ssn: Session, action: str, job: Job, pick: VictimPicker, validator: Validator) -> None:
    """One preemptor's turn: pick its victims, solve, commit what the solver found."""
    victims = pick(job)
    if not victims:
        return
    if not tasks_to_allocate(job, real=False):
        return
    solver = VictimSolver(ssn, action, victims, validator, feasible_nodes(ssn, job.tasks))
    stmt = solver.solve(job)
    if stmt is not None:
        stmt.commit()


#: Per session: candidate victim jobs per queue (None = every queue), in uid order.
_VICTIM_POOLS: StateKey[dict[str | None, list[Job]]] = StateKey("victim pools")
#: Per session and queue: (priorities ascending, the pool's jobs in that order), for bisection.
_VICTIMS_BY_PRIORITY: StateKey[dict[str | None, tuple[list[int], list[Job]]]] = StateKey("victims by priority")


def candidate_victims(ssn: Session, keep: Callable[[Job], bool], queue: str | None = None,
                      below_priority: int | None = None) -> list[Job]:
    """Preemptible jobs with active-allocated pods, in a leaf queue (only `queue` if given; only
    priority < `below_priority` if given), that `keep` accepts, in job-uid order (KAI: Go map
    order) so counters like consolidation's are stable. Pools are built once per session."""
    pools = ssn.state.get(_VICTIM_POOLS)
    if pools is None:
        everyone = [ssn.jobs[uid] for uid in sorted(ssn.jobs)
                    if ssn.jobs[uid].queue is not None and ssn.jobs[uid].preemptible
                    and not _runs_off_the_nodes(ssn.jobs[uid])]
        pools = {None: everyone}
        for job in everyone:
            assert job.queue is not None
            pools.setdefault(job.queue.name, []).append(job)
        ssn.state.set(_VICTIM_POOLS, pools)
    pool = pools.get(queue, [])
    if below_priority is not None:
        pool = _below(ssn, queue, pool, below_priority)
    out = []
    for job in pool:
        if not job.fault and any(ps.active_allocated for ps in job.pod_sets.values()) and keep(job):
            out.append(job)
    return out


def _runs_off_the_nodes(job: Job) -> bool:
    """A pod of the job runs on a node missing from the snapshot (deleted, pod not yet collected).

    KAI's Statement.Evict fails for a node not in the session, so such a job is never a victim;
    evicting it would free nothing on any node (and the victim solver indexes victims by node)."""
    return any(t.node < 0 and t.status in ACTIVE_ALLOCATED_SET for t in job.tasks)


def _below(ssn: Session, queue: str | None, pool: list[Job], priority: int) -> list[Job]:
    """The jobs of `pool` with priority < `priority`, still in uid order (bisect on a per-pool
    priority-sorted copy built once)."""
    by_prio = ssn.state.setdefault(_VICTIMS_BY_PRIORITY, dict)
    if queue not in by_prio:
        ordered = sorted(pool, key=lambda j: (j.priority, j.uid))
        by_prio[queue] = ([j.priority for j in ordered], ordered)
    prios, ordered = by_prio[queue]
    return sorted(ordered[: bisect_left(prios, priority)], key=lambda j: j.uid)
