"""The simulation of one victim scenario, for the victim solver (`solver.py`), and the request
helpers the preempting actions share.

Contract of `ScenarioSimulation.place(stmt, partial, victims, nodes)`: with the scenario's victims
already evicted in `stmt`, let the preemptor's partial job (pipelined) and the victims' jobs
(re-placed, pipelined) be allocated in KAI's queue order among the pending jobs, all with
`real=False`, on the feasible nodes plus `nodes` (the solver's choice, as KAI's: the nodes of the
recorded victims' tasks that were hit, and of the potential victims evicted; not every victim's).
True when the partial job was placed (its operations and the victims' re-placements left in
`stmt`), False otherwise (whatever it added may be left for the caller to roll back). It never
validates: the solver does. The simulation stops early once nothing else could act (`_inert`);
that shortcut never changes the outcome.
Victims' fit errors and reasons are restored; the preemptor's are the solver's to restore.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from shoal.actions.common.job_allocation import allocate_job, tasks_to_allocate
from shoal.framework.job_queue import JobsByQueue
from shoal.framework.jobs import Job, Task, request_total
from shoal.framework.session import Session
from shoal.framework.statement import Statement


def request_vector(tasks: list[Task]) -> np.ndarray:
    """KAI's job init resource in queue units: GPU-memory tasks count memory/100 GPUs."""
    return request_total(tasks)


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
    judged: set[bytes] = set()  # a gang's pods mostly ask alike: each request is judged once
    for t in tasks:
        if t.pod.gpu.is_shared or t.pod.best_effort:
            return True
        key = t.vec.tobytes()
        if key in judged:
            continue
        judged.add(key)
        if free is None:
            free = nodes.idle + nodes.releasing
        cols = np.flatnonzero(t.vec)
        if not ((free[:, cols] >= t.vec[cols]).all(axis=1) & mask).any():
            return False
    return True


#: A victim job's tasks to allocate as `_inert` judges them, in task order: the request's bytes
#: per whole-resource task, None for a shared or best-effort one.
_Sig = tuple[bytes | None, ...]


class ScenarioSimulation:
    """One per victim solver (its caches outlive a preemptor's search): `start(job)` once per
    preemptor, then `place(...)` per scenario."""

    def __init__(self, ssn: Session, feasible: np.ndarray) -> None:
        self.ssn = ssn
        self.feasible = feasible.copy()
        self.preemptor: Job | None = None
        self._pending: list[Job] = []
        #: Victim job uid -> (job version, `_signature` of its tasks to allocate); request bytes -> request.
        self._sim_sigs: dict[str, tuple[int, _Sig]] = {}
        self._sig_vecs: dict[bytes, np.ndarray] = {}
        #: Job uid -> (job version, queue-order key): the simulations' queues share them.
        self._keys: dict[str, tuple[int, tuple[object, ...]]] = {}

    def start(self, job: Job) -> None:
        """Simulate for preemptor `job`; the pending jobs of the simulations' queues are taken now."""
        self.preemptor = job
        self._pending = [j for j in self.ssn.jobs.values()
                         if j.queue is not None and j.queue.is_leaf and j.pending > 0]

    def place(self, stmt: Statement, partial: list[Task], victims: list[Task], nodes: set[int]) -> bool:
        """Re-place victims and place the preemptor in queue order on the feasible nodes plus
        `nodes`: whether the preemptor was placed."""
        ssn = self.ssn
        job = self.preemptor
        assert job is not None
        mask = self.feasible.copy()
        if nodes:
            mask[list(nodes)] = True
        victim_jobs = {t.job.uid for t in victims}
        jobs = {j.uid: j for j in self._pending}
        for uid in victim_jobs:
            jobs[uid] = ssn.jobs[uid]
        jobs[job.uid] = job
        partial_req = request_vector(partial)

        def request(j: Job) -> np.ndarray:
            # KAI compares queues by the best job's tasks-to-allocate (virtual victims included).
            return partial_req if j is job else simulated_request(j)

        order = JobsByQueue(ssn, jobs.values(), request=request, keys=self._keys)  # it sorts them by uid
        # Only the preemptor and the victims' jobs act; once all of them were popped, the rest of
        # the order would be popped and skipped, so stop there.
        placed = False
        waiting = {uid for uid in victim_jobs if jobs[uid].queue is not None}
        to_act = len(waiting) + (job.uid not in victim_jobs and job.queue is not None)
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
                    return False
                placed = True
                waiting.discard(job.uid)
            elif nxt.uid in victim_jobs:
                waiting.discard(nxt.uid)
                if not could_fit(ssn, tasks_to_allocate(nxt, real=False), mask):
                    continue  # exactly what allocate_job would conclude, without its error texts
                cp = stmt.checkpoint()
                errors, reasons = list(nxt.fit_errors), list(nxt.reasons)
                if not allocate_job(ssn, stmt, nxt, pipeline_only=True, node_mask=mask, real=False):
                    stmt.rollback(cp)
                    nxt.fit_errors, nxt.reasons = errors, reasons
                    continue
                nxt.fit_errors, nxt.reasons = errors, reasons
            else:
                continue
            if placed and self._inert(waiting, mask):
                break  # the victims still to come can no longer be re-placed: nothing else acts
        return placed

    def _inert(self, victim_jobs: set[str], mask: np.ndarray) -> bool:
        """True when no victim job can be re-placed in this simulation: each has a whole-resource
        task to allocate that fits no allowed node even counting releasing resources (`could_fit`
        false, so `allocate_job` must fail). Judged on the state after the evictions; the
        simulation only takes resources from there, so it stays true and the queue order of the
        simulation cannot matter. Victim jobs asking for the same requests in the same order get
        the same verdict, so each distinct signature is judged once."""
        ssn = self.ssn
        sigs: set[_Sig] = set()
        jobs, memo, add = ssn.jobs, self._sim_sigs, sigs.add  # locals: a loop over every victim job
        for uid in victim_jobs:
            version = jobs[uid].version
            hit = memo.get(uid)
            if hit is None or hit[0] != version:
                hit = memo[uid] = (version, self._signature(tasks_to_allocate(jobs[uid], real=False)))
            add(hit[1])
        free: np.ndarray | None = None
        verdict: dict[bytes, bool] = {}
        for sig in sigs:
            for key in sig:  # an empty signature (nothing to allocate) counts as stuck
                if key is None:
                    return False  # a shared / best-effort task: not judged by the whole-resource check
                fits = verdict.get(key)
                if fits is None:
                    if free is None:
                        free = ssn.nodes.idle + ssn.nodes.releasing
                    vec = self._sig_vecs[key]
                    cols = np.flatnonzero(vec)
                    fits = verdict[key] = bool(((free[:, cols] >= vec[cols]).all(axis=1) & mask).any())
                if not fits:
                    break
            else:
                if sig:
                    return False
        return True

    def _signature(self, tasks: list[Task]) -> _Sig:
        sig: list[bytes | None] = []
        for t in tasks:
            if t.pod.gpu.is_shared or t.pod.best_effort:
                sig.append(None)
            else:
                key = t.vec.tobytes()
                self._sig_vecs.setdefault(key, t.vec)
                sig.append(key)
        return tuple(sig)
