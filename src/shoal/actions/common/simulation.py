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

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from operator import itemgetter

import numpy as np

from shoal.actions.common.job_allocation import allocate_job, tasks_to_allocate
from shoal.framework.job_queue import JobsByQueue, order_key
from shoal.framework.jobs import Job, Task, request_total
from shoal.framework.scenario_victims import RecordedJobs
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


_Head = tuple[str, tuple[object, ...], Job]


def _heads(entries: list[_Head]) -> list[_Head]:
    """Of (uid, order key, job) entries, those whose (key, uid) is less than that of every entry
    before them in uid order in their leaf queue (jobs with a queue only), in uid order."""
    entries.sort(key=itemgetter(0))  # uids are unique
    least: dict[str, tuple[object, ...]] = {}
    out: list[_Head] = []
    for e in entries:
        q = e[2].queue
        assert q is not None
        best = least.get(q.name)
        if best is None or e[1] < best:  # equal keys: the earlier uid stays the top
            least[q.name] = e[1]
            out.append(e)
    return out


@dataclass(slots=True)
class _Recorded:
    """What `ScenarioSimulation._preemptor_first` reads of the recorded victims' jobs (`source`),
    as they stand at the search's base (every recorded victim evicted, nothing else): the `_heads`
    of their queue entries and their `_signature`s (jobs with a queue). The base changes only by
    evicting more recorded victims, so this holds for every scenario of a partial job that leaves
    those jobs alone, and extends to the next partial job's `RecordedJobs` when that one is a
    child of `source` (its new victims belong to other jobs)."""

    source: RecordedJobs
    heads: list[_Head]
    sigs: set[_Sig]

    def extended(self, source: RecordedJobs, jobs: list[str], sim: ScenarioSimulation) -> _Recorded:
        """This plus the jobs `jobs` of `source` (none of them here already)."""
        entries = list(self.heads)
        sigs = set(self.sigs)
        for uid in jobs:
            j = source.by_job[uid][0].job
            if j.queue is None:
                continue
            sigs.add(sim._job_signature(j))
            key = None if j.fault else order_key(sim.ssn, j, sim._keys)
            if key is not None:
                entries.append((uid, key, j))
        return _Recorded(source, _heads(entries), sigs)


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
        #: The recorded victims' jobs as `_preemptor_first` reads them (this preemptor's search).
        self._rec: _Recorded | None = None
        #: The last `place` placed the preemptor and nothing else acted (`_preemptor_first`): every
        #: recorded victim's job is as it stands at the base, and no other victim touches one.
        self.fast = False
        #: This preemptor's scenarios decided by `_preemptor_first`, and those where it placed the
        #: preemptor only to find a victim that could still be re-placed (the allocation undone):
        #: once those dominate, it is not tried again for this preemptor (a speed choice only).
        self._hits = self._wasted = 0

    def start(self, job: Job) -> None:
        """Simulate for preemptor `job`; the pending jobs of the simulations' queues are taken now."""
        self.preemptor = job
        self._rec = None
        self._hits = self._wasted = 0
        self._pending = [j for j in self.ssn.jobs.values()
                         if j.queue is not None and j.queue.is_leaf and j.pending > 0]

    def place(self, stmt: Statement, partial: list[Task], victims: list[Task], nodes: set[int],
              recorded: RecordedJobs | None = None) -> bool:
        """Re-place victims and place the preemptor in queue order on the feasible nodes plus
        `nodes`: whether the preemptor was placed. `recorded`, when given, is the partial job's
        recorded victims, which `victims` starts with, all evicted at the search's base (the rest
        of `victims` were evicted after it): what is read of their jobs is then kept from one
        scenario and partial job to the next (`_Recorded`)."""
        job = self.preemptor
        assert job is not None
        mask = self.feasible.copy()
        if nodes:
            mask[list(nodes)] = True
        partial_req = request_vector(partial)

        def request(j: Job) -> np.ndarray:
            # KAI compares queues by the best job's tasks-to-allocate (virtual victims included).
            return partial_req if j is job else simulated_request(j)

        rec = recorded if recorded is not None else RecordedJobs([])
        fast = self._preemptor_first(stmt, partial, rec, victims[len(rec.tasks):], mask, request)
        self.fast = fast is True
        if fast is not None:
            return fast
        return self._in_queue_order(stmt, partial, victims, mask, request)

    def _in_queue_order(self, stmt: Statement, partial: list[Task], victims: list[Task], mask: np.ndarray,
                        request: Callable[[Job], np.ndarray]) -> bool:
        """`place`'s general path: every job of the simulation in queue order."""
        ssn = self.ssn
        job = self.preemptor
        assert job is not None
        victim_jobs = {t.job.uid for t in victims}
        jobs = {j.uid: j for j in self._pending}
        for uid in victim_jobs:
            jobs[uid] = ssn.jobs[uid]
        jobs[job.uid] = job
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
                if self._allocate_preemptor(stmt, partial, mask) is None:
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

    def _preemptor_first(self, stmt: Statement, partial: list[Task], recorded: RecordedJobs,
                         chosen: list[Task], mask: np.ndarray,
                         request: Callable[[Job], np.ndarray]) -> bool | None:
        """`place`'s outcome in the common case, without ordering thousands of victim jobs: when
        the preemptor is the first job of the simulation's queue order and, once it is placed, no
        victim job can be re-placed (`_inert`), nothing else acts, so the outcome is the
        preemptor's allocation alone. None when that does not hold (the statement as it was).

        Only the first pop is needed, and it depends on each leaf's heap only through its top at
        each link of a new leaf (the least entry pushed before that leaf's first one) and after
        the build (`JobsByQueue._push_all`): the least (key, sequence) of every prefix of the
        leaf's entries in uid order. Those entries (`_heads`) are all the queue is built from; the
        others could never be a top before a pop. The recorded victims' jobs give theirs from
        `_Recorded`, as they stand at the base: the heads of a union are among the heads of its
        parts, and a scenario whose other victims touch a recorded job takes the general path."""
        job = self.preemptor
        assert job is not None
        if job.queue is None or self._wasted > max(2, 2 * self._hits):
            return None  # victims that keep fitting elsewhere (consolidation): not worth trying
        chosen_jobs = {t.job.uid: t.job for t in chosen}
        rec = self._recorded(recorded, chosen_jobs)
        if rec is None or job.uid in recorded.by_job or job.uid in chosen_jobs:
            return None
        ssn = self.ssn
        entries = list(rec.heads)
        sigs = set(rec.sigs)
        others = {j.uid: j for j in self._pending if j.uid not in recorded.by_job}
        others.update((uid, ssn.jobs[uid]) for uid in chosen_jobs)
        others[job.uid] = job
        for uid, j in others.items():
            if j.queue is None:
                continue
            if uid in chosen_jobs:  # a victim job waiting to be re-placed, as `_inert` reads it
                sigs.add(self._job_signature(j))
            key = None if j.fault else order_key(ssn, j, self._keys)
            if key is not None:
                entries.append((uid, key, j))
        first = JobsByQueue(ssn, [e[2] for e in _heads(entries)], request=request, keys=self._keys).pop()
        if first is not job:
            return None
        cp = self._allocate_preemptor(stmt, partial, mask)
        if cp is None:
            return False
        # The victims' signatures were read before the preemptor's allocation, which changes none
        # of their tasks (the preemptor is not a victim).
        if self._stuck(sigs, mask):
            self._hits += 1
            return True
        stmt.rollback(cp)
        self._wasted += 1
        return None

    def _allocate_preemptor(self, stmt: Statement, partial: list[Task], mask: np.ndarray) -> int | None:
        """Pipeline the partial job on `mask`: the statement's checkpoint before it, or None when
        it could not be placed (the statement then as it was)."""
        job = self.preemptor
        assert job is not None
        cp = stmt.checkpoint()
        with partial_minimums(job, partial):
            ok = allocate_job(self.ssn, stmt, job, pipeline_only=True, node_mask=mask, real=False)
        if not ok:
            stmt.rollback(cp)
            return None
        return cp

    def _recorded(self, recorded: RecordedJobs, chosen_jobs: dict[str, Job]) -> _Recorded | None:
        """The `_Recorded` of these recorded victims (kept, extended from the parent's, or built),
        or None when this scenario's other victims (`chosen_jobs`) touch a recorded job: its state
        is then not the base's."""
        if any(uid in recorded.by_job for uid in chosen_jobs):
            return None
        had = self._rec
        if had is not None and had.source is recorded:
            return had
        if had is not None and recorded.parent is had.source:
            self._rec = had.extended(recorded, list(recorded.added), self)
        else:
            self._rec = _Recorded(recorded, [], set()).extended(recorded, list(recorded.by_job), self)
        return self._rec

    def _job_signature(self, job: Job) -> _Sig:
        """The job's `_signature`, memoised per job version."""
        version = job.version
        hit = self._sim_sigs.get(job.uid)
        if hit is None or hit[0] != version:
            hit = self._sim_sigs[job.uid] = (version, self._signature(tasks_to_allocate(job, real=False)))
        return hit[1]

    def _inert(self, victim_jobs: set[str], mask: np.ndarray) -> bool:
        """True when no victim job can be re-placed in this simulation: each has a whole-resource
        task to allocate that fits no allowed node even counting releasing resources (`could_fit`
        false, so `allocate_job` must fail). Judged on the state after the evictions; the
        simulation only takes resources from there, so it stays true and the queue order of the
        simulation cannot matter. Victim jobs asking for the same requests in the same order get
        the same verdict, so each distinct signature is judged once."""
        jobs, sig = self.ssn.jobs, self._job_signature
        return self._stuck({sig(jobs[uid]) for uid in victim_jobs}, mask)

    def _stuck(self, sigs: set[_Sig], mask: np.ndarray) -> bool:
        """`_inert`'s verdict for the victim jobs of these signatures, on the current state."""
        ssn = self.ssn
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
