"""The victim solver shared by reclaim, preempt and consolidation (kai-spec §3.14).

For a pending job the solver grows a partial job one task at a time (the tasks of KAI's
`GetTasksToAllocate(real=False)`); for each partial job it tries victim scenarios of growing
size - first the victims recorded for the previous partial job, then those plus the next
victim batches of the action's victim queue - and simulates each: evict the victims, then let
the victims (re-placed, pipelined) and the preemptor (pipelined) be allocated in queue order on
the feasible nodes. A scenario that places the preemptor and passes the action's validator is
kept; its victims become the recorded victims of the next partial job. The last partial job's
statement is the result: victims Releasing (or moved: Pipelined elsewhere), the preemptor
Pipelined, to bind in a later cycle's allocate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from shoal.actions.job_allocation import allocate_job, tasks_to_allocate
from shoal.actions.victims import VictimQueue, clone_job, tasks_to_evict
from shoal.framework.job_queue import JobsByQueue
from shoal.framework.jobs import Job, Task
from shoal.framework.session import Session
from shoal.framework.statement import Statement
from shoal.model.resources import GPU_COL, MILLI
from shoal.model.status import PodStatus


def request_vector(tasks: list[Task]) -> np.ndarray:
    """KAI's job init resource in queue units: GPU-memory tasks count memory/100 GPUs."""
    total = np.zeros(3)
    for t in tasks:
        total += t.request_quota_vector()
    return total


def simulated_request(job: Job) -> np.ndarray:
    """`request_vector` of the job's tasks to allocate in a simulation (`real=False`), cached per job
    version: the queue-order comparator asks for it on every comparison, and a job's tasks to
    allocate change only when one of its tasks changes status. Never call it for a job inside
    `partial_minimums` (its minimums change without a version bump)."""
    return job.cached("sim_request", job.version, lambda: request_vector(tasks_to_allocate(job, real=False)))


@contextmanager
def partial_minimums(job: Job, tasks: list[Task]) -> Iterator[None]:
    """KAI's partial pending job, without a copy: while open, every pod set's minimum is its
    active-allocated count plus its tasks among `tasks` (a prefix of the job's tasks to
    allocate), so one allocation attempt places exactly `tasks`. Restored on exit."""
    saved = {name: ps.spec for name, ps in job.pod_sets.items()}
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.pod_set.name] = counts.get(t.pod_set.name, 0) + 1
    try:
        for name, ps in job.pod_sets.items():
            ps.spec = replace(ps.spec, min_available=ps.active_allocated + counts.get(name, 0))
        yield
    finally:
        for name, ps in job.pod_sets.items():
            ps.spec = saved[name]


def could_fit(ssn: Session, tasks: list[Task], mask: np.ndarray) -> bool:
    """False when some whole-resource task fits no allowed node even counting releasing
    resources (so an allocation attempt must fail); True otherwise (shared / best-effort
    tasks are not judged here)."""
    nodes = ssn.nodes
    free: np.ndarray | None = None
    for t in tasks:
        if t.pod.gpu.is_shared or t.pod.best_effort:
            return True
        if free is None:
            free = nodes.idle + nodes.releasing
        cols = np.flatnonzero(t.vec)
        if not ((free[:, cols] >= t.vec[cols]).all(axis=1) & mask).any():
            return False
    return True


class _CapacityBound:
    """A necessary condition for a scenario (KAI's idle-GPU filter), kept incrementally: the whole
    GPUs idle or releasing on feasible and victim nodes, plus what the victims hold, must cover
    the partial job in total and its largest task on some node. Shared, MIG and best-effort
    partial jobs are never pruned (their capacity is not counted in whole GPUs)."""

    def __init__(self, ssn: Session, partial: list[Task], feasible: np.ndarray) -> None:
        self.off = any(t.pod.gpu.is_shared or t.pod.mig or t.pod.best_effort for t in partial)
        need = [int(t.vec[GPU_COL]) for t in partial]
        self.off |= not any(need)
        self.total_need = sum(need)
        self.max_need = max(need, default=0)
        if self.off:
            return
        nodes = ssn.nodes
        self.cap = np.maximum(nodes.idle[:, GPU_COL] + nodes.releasing[:, GPU_COL], 0).astype(np.int64)
        self.mask = feasible.copy()
        self.total = int(self.cap[self.mask].sum())
        self.best = int(self.cap[self.mask].max(initial=0))

    def add(self, victims: list[Task]) -> None:
        if self.off:
            return
        for v in victims:
            if v.node < 0 or v.status == PodStatus.RELEASING:
                continue
            i = v.node
            if not self.mask[i]:
                self.mask[i] = True
                self.total += int(self.cap[i])
            # A shared victim may free each of its devices (an upper bound keeps this sound).
            gain = MILLI * len(v.groups) if v.pod.gpu.is_shared else int(v.vec[GPU_COL])
            self.cap[i] += gain
            self.total += gain
            self.best = max(self.best, int(self.cap[i]))

    def may_fit(self) -> bool:
        return self.off or (self.total >= self.total_need and self.best >= self.max_need)


#: Gangs up to this many tasks are solved one task at a time (KAI's snapshot behaviour, the
#: one the conformance corpus records); larger gangs probe partial jobs by doubling.
LINEAR_UP_TO = 16


#: Validator: preemptor, victim tasks per victim job uid (state after the simulation).
Validator = Callable[[Job, dict[str, list[Task]]], bool]


@dataclass(slots=True)
class _Solution:
    stmt: Statement
    #: Victim batches (clones) that lost or moved a task: recorded for the next partial job.
    victim_jobs: list[Job] = field(default_factory=list)


class VictimSolver:
    """One solver per action run; `solve(job)` per preemptor."""

    def __init__(self, ssn: Session, action: str, victims: list[Job], validator: Validator | None,
                 feasible: np.ndarray) -> None:
        self.ssn = ssn
        self.action = action
        self.validator = validator
        self.victims = victims
        self.base_queue = VictimQueue(ssn, victims)
        self.feasible = feasible.copy()
        self.preemptor: Job | None = None
        self._pending: list[Job] = []
        self._rejected = False
        self.full_set = False

    # -- entry point ---------------------------------------------------------------------
    def solve(self, job: Job) -> Statement | None:
        """A statement that makes room for `job` and pipelines it, or None (session unchanged)."""
        self.preemptor = job
        # Simulated allocations must not leave fit errors behind (victims restore their own).
        saved = {j.uid: (list(j.fit_errors), list(j.reasons)) for j in self.ssn.jobs.values()
                 if j is job or j.fit_errors or j.reasons or j.has_status(PodStatus.PENDING)}
        before = job.active_used()
        tasks = tasks_to_allocate(job, real=False)
        self._pending = [j for j in self.ssn.jobs.values()
                         if j.queue is not None and j.queue.is_leaf and j.has_status(PodStatus.PENDING)]
        stmt = self._search(tasks) if tasks else None
        for uid, (errs, reasons) in saved.items():
            self.ssn.jobs[uid].fit_errors, self.ssn.jobs[uid].reasons = errs, reasons
        if stmt is None:
            return None
        if not (job.is_gang_satisfied() and job.active_used() > before):
            stmt.discard()
            return None
        return stmt

    def _search(self, tasks: list[Task]) -> Statement | None:
        """Partial jobs of k = 1, 2, ... tasks (one task at a time up to `LINEAR_UP_TO` tasks,
        then doubling, then a binary search below the first failure, like KAI's newer solver);
        every success records its victims for the next probe. The last probe is the whole job;
        its statement is the result (None when it fails)."""
        n = len(tasks)
        self.full_set = n > LINEAR_UP_TO
        if n > 1 and not self._whole_job_may_fit(tasks):
            return None  # only the last probe (the whole job) yields a statement, and it must fail
        recorded: list[Job] = []
        lo, k, hi = 0, 1, n + 1
        while True:
            sol = self._solve_partial(tasks[:k], recorded)
            if sol is not None and k == n:
                return sol.stmt
            if sol is not None:
                sol.stmt.discard()
                recorded, lo = sol.victim_jobs, k
            elif k == n or n <= LINEAR_UP_TO:
                return None
            else:
                hi = k
            if hi <= n:
                if hi - lo <= 1:
                    k = n  # the best partial job is found: one last probe for the whole job
                    hi = n + 1
                    if lo == 0:
                        return None
                else:
                    k = (lo + hi) // 2
            else:
                k = k + 1 if n <= LINEAR_UP_TO else min(2 * k, n)

    def _whole_job_may_fit(self, tasks: list[Task]) -> bool:
        """KAI's idle-GPU scenario filter for the largest scenario there is: the whole job with every
        task of every candidate victim evicted. When even that cannot cover the job's whole GPUs,
        no probe's victims can (they are subsets), so the search is skipped: same result, none of
        the partial probes (a big gang would otherwise simulate every victim batch for each of its
        first `LINEAR_UP_TO` partial jobs, every cycle)."""
        bound = _CapacityBound(self.ssn, tasks, self.feasible)
        bound.add([t for job in self.victims for t in job.tasks])
        return bound.may_fit()

    # -- scenarios -------------------------------------------------------------------------
    def _solve_partial(self, partial: list[Task], recorded_jobs: list[Job]) -> _Solution | None:
        recorded = [t for j in recorded_jobs for t in j.tasks]
        rec_uids = {t.uid for t in recorded}
        bound = _CapacityBound(self.ssn, partial, self.feasible)
        bound.add(recorded)
        if recorded and bound.may_fit():
            sol = self._try(partial, recorded, [], None)
            if sol is not None:
                return sol
        queue = self.base_queue.copy()
        potential: list[Task] = []
        while queue:
            vjob = queue.pop()
            if vjob is None:
                break
            batch, more = tasks_to_evict(vjob)
            if not batch:
                continue
            if any(t.uid in rec_uids for t in batch):
                rest = [t for t in vjob.tasks if t.uid not in rec_uids]
                if rest:
                    queue.push(clone_job(vjob, rest))
                continue
            if more:
                ids = {t.uid for t in batch}
                queue.push(clone_job(vjob, [t for t in vjob.tasks if t.uid not in ids]))
            potential.extend(batch)
            bound.add(batch)
            if not bound.may_fit():
                continue  # KAI's idle-GPU scenario filter: prune without simulating
            sol = self._try(partial, recorded, potential, self.ssn.jobs[vjob.uid])
            if sol is not None:
                return sol
        return None

    def _try(self, partial: list[Task], recorded: list[Task], potential: list[Task],
             latest: Job | None) -> _Solution | None:
        """KAI's by-pod solver for one scenario: recorded victims alone, or recorded plus the
        potential victims of the jobs touching each node of the latest victim job."""
        stmt = Statement(self.ssn)
        self._rejected = False
        self._evict(stmt, recorded)
        if latest is None:
            sol = self._simulate(stmt, partial, recorded)
            if sol is not None:
                return sol
            stmt.discard()
            return None
        by_node: dict[int, set[str]] = {}
        for t in potential:
            by_node.setdefault(t.node, set()).add(t.job.uid)
        tried: list[list[Task]] = []
        for node in sorted({t.node for t in latest.tasks if t.node >= 0}):
            jobs = by_node.get(node)
            if jobs:
                tried.append([t for t in potential if t.job.uid in jobs])
        if self.full_set and (not tried or len(tried[-1]) < len(potential)):
            # Probes that add several tasks at once may need victims on several nodes: also try
            # every accumulated victim (KAI's newer solver has the same fallback).
            tried.append(list(potential))
        for chosen in tried:
            cp = stmt.checkpoint()
            self._evict(stmt, chosen)
            sol = self._simulate(stmt, partial, recorded + chosen)
            if sol is not None:
                return sol
            if self._rejected:
                break  # KAI: a scenario the validator rejects is not retried on other nodes
            stmt.rollback(cp)
        stmt.discard()
        return None

    def _evict(self, stmt: Statement, tasks: list[Task]) -> None:
        assert self.preemptor is not None
        reason = f"{self.action}: making room for {self.preemptor.pg.namespace}/{self.preemptor.pg.name}"
        for t in tasks:
            if t.status & (PodStatus.ALLOCATED | PodStatus.BINDING | PodStatus.BOUND | PodStatus.RUNNING
                           | PodStatus.PIPELINED):
                stmt.evict(t, self.action, reason, self.preemptor.uid)

    def _simulate(self, stmt: Statement, partial: list[Task], victims: list[Task]) -> _Solution | None:
        """Re-place victims and place the preemptor in queue order; validate."""
        ssn = self.ssn
        job = self.preemptor
        assert job is not None
        mask = self.feasible.copy()
        for v in victims:
            if v.node >= 0:
                mask[v.node] = True
        victim_jobs = {t.job.uid for t in victims}
        jobs = {j.uid: j for j in self._pending}
        for uid in victim_jobs:
            jobs[uid] = ssn.jobs[uid]
        jobs[job.uid] = job
        partial_req = request_vector(partial)

        def request(j: Job) -> np.ndarray:
            # KAI compares queues by the best job's tasks-to-allocate (virtual victims included).
            return partial_req if j is job else simulated_request(j)

        order = JobsByQueue(ssn, sorted(jobs.values(), key=lambda j: j.uid), request=request)
        # Only the preemptor and the victims' jobs act; once all of them were popped, the rest of
        # the order would be popped and skipped, so stop there.
        to_act = sum(1 for uid in victim_jobs | {job.uid} if jobs[uid].queue is not None)
        placed = False
        while to_act:
            nxt = order.pop()
            if nxt is None:
                break
            if nxt is job or nxt.uid in victim_jobs:
                to_act -= 1
            if nxt is job:
                cp = stmt.checkpoint()
                with partial_minimums(job, partial):
                    ok = allocate_job(ssn, stmt, job, pipeline_only=True, node_mask=mask, real=False)
                if not ok:
                    stmt.rollback(cp)
                    return None
                placed = True
            elif nxt.uid in victim_jobs:
                if not could_fit(ssn, tasks_to_allocate(nxt, real=False), mask):
                    continue  # exactly what allocate_job would conclude, without its error texts
                cp = stmt.checkpoint()
                errors, reasons = list(nxt.fit_errors), list(nxt.reasons)
                if not allocate_job(ssn, stmt, nxt, pipeline_only=True, node_mask=mask, real=False):
                    stmt.rollback(cp)
                nxt.fit_errors, nxt.reasons = errors, reasons
        if not placed:
            return None
        return self._validate(stmt, victims)

    def _validate(self, stmt: Statement, victims: list[Task]) -> _Solution | None:
        job = self.preemptor
        assert job is not None
        by_job: dict[str, list[Task]] = {}
        for t in victims:
            by_job.setdefault(t.job.uid, []).append(t)
        if self.validator is not None and not self.validator(job, by_job):
            self._rejected = True
            return None
        hit = {t.uid for t in victims if t.status in (PodStatus.RELEASING, PodStatus.PIPELINED)}
        recorded: list[Job] = []
        for uid, tasks in by_job.items():
            if any(t.uid in hit for t in tasks):
                recorded.append(clone_job(self.ssn.jobs[uid], tasks))
        return _Solution(stmt, recorded)
