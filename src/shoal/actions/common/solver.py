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

from bisect import bisect_left
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from shoal.actions.common.job_allocation import allocate_job, tasks_to_allocate
from shoal.actions.common.scenario_filter import IdleGpuFilter, TopologyGpuFilter, gpu_gains, idle_gpus
from shoal.actions.common.victim_log import VictimLog
from shoal.actions.common.victim_queue import VictimQueue
from shoal.actions.common.victims import clone_job, tasks_to_evict
from shoal.framework.job_queue import JobsByQueue
from shoal.framework.jobs import Job, Task
from shoal.framework.session import Session
from shoal.framework.statement import Statement
from shoal.model.status import ACTIVE_ALLOCATED_SET, PodStatus


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


#: Validator: preemptor, victim tasks per victim job uid (state after the simulation).
Validator = Callable[[Job, dict[str, list[Task]]], bool]

#: A victim job's tasks to allocate as `_inert` judges them, in task order: the request's bytes
#: per whole-resource task, None for a shared or best-effort one.
_Sig = tuple[bytes | None, ...]


#: A victim that lost (Releasing) or moved (Pipelined) a pod: its batch is a recorded victim.
_HIT = (PodStatus.RELEASING, PodStatus.PIPELINED)

#: Entries the bulk scan reads before it first checks the filters' necessary condition.
_FIRST_SCAN = 64


@dataclass(slots=True)
class _Solution:
    stmt: Statement
    #: Victim batches (KAI's job representatives) that lost or moved a task, in the order first
    #: hit: the recorded victims of the next partial job.
    victim_batches: list[list[Task]] = field(default_factory=list)


class VictimSolver:
    """One solver per preemptor and action run: `solve(job)`.

    KAI's job solver (kai-spec §3.14), exactly: for the partial jobs of k = 1, 2, ..., n tasks of
    the preemptor's tasks to allocate, scenarios are tried in order - the recorded victims of the
    previous partial job alone, then those plus each longer prefix of the victim queue's sequence -
    and a scenario is simulated only when KAI's accumulated filters let it through. The first
    scenario that places the partial job and passes the validator wins; its victims (the batches
    that lost or moved a pod) are the next partial job's recorded victims. The first partial job
    without a solution ends the search (the preemptor stays pending).

    Invariant (minimality, as in KAI): a solution's statement evicts or moves only the recorded
    victims and the victims of the jobs touching one node of the latest victim job, and the
    recorded victims are only the batches that were really hit in the previous partial job. No
    victim is ever added because of the gang's size: the partial jobs grow one task at a time
    whatever the number of tasks or victims.

    Speed without changing the result: the victim sequence is popped once (`VictimLog`); runs of
    scenarios that the filters' monotone necessary condition rejects are skipped in bulk with
    numpy instead of being built one by one; the whole search is skipped when even every
    candidate victim could not free enough GPUs for the whole job.
    """

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
        self._reps: dict[str, list[Task]] = {}
        self._rec_batches: list[list[Task]] = []
        self._rec_disjoint = False
        self._rec_uids: set[str] = set()
        #: Where the recorded victims' evictions end in the search's statement, and whether every
        #: recorded victim is Releasing or Pipelined there.
        self._base = 0
        self._base_hit = True
        self._log: VictimLog | None = None
        self._scan: _Scan | None = None
        self._caps = np.zeros(0, dtype=np.int64)
        #: Victim job uid -> (job version, `_signature` of its tasks to allocate); request bytes -> request.
        self._sim_sigs: dict[str, tuple[int, _Sig]] = {}
        self._sig_vecs: dict[bytes, np.ndarray] = {}
        #: Job uid -> (job version, queue-order key): the simulations' queues share them.
        self._keys: dict[str, tuple[int, tuple[object, ...]]] = {}

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
        """Partial jobs of 1, 2, ..., n tasks; the whole job's statement is the result."""
        caps = self._caps = idle_gpus(self.ssn)
        if not self._whole_job_may_fit(tasks, caps):
            return None
        self._log = VictimLog(self.base_queue)
        recorded: list[list[Task]] = []
        n = len(tasks)
        # One statement for the whole search: its first `base` operations evict the recorded
        # victims; every scenario works after them and is rolled back when it fails. KAI evicts
        # the recorded victims afresh in every scenario - the same state, without redoing (and
        # re-deriving the victims' jobs from) thousands of evictions per partial job.
        # The filter's capacities with the recorded victims counted are kept the same way.
        stmt = Statement(self.ssn)
        base = 0
        evicted: set[str] = set()
        rec_caps = caps
        for k in range(1, n + 1):
            sol = self._solve_partial(stmt, base, tasks[:k], recorded, rec_caps)
            if sol is None:
                stmt.discard()
                return None
            if k == n:
                return stmt
            stmt.rollback(base)
            recorded = sol.victim_batches
            now = {t.uid for b in recorded for t in b}
            if not evicted <= now:
                stmt.discard()  # a recorded victim was dropped: rebuild the base
                evicted, rec_caps, self._base_hit = set(), caps, True
            fresh = [t for b in recorded for t in b if t.uid not in evicted]
            self._evict(stmt, fresh)
            self._base_hit = self._base_hit and all(t.status in _HIT for t in fresh)
            rec_caps = rec_caps + gpu_gains(fresh, len(caps))
            evicted = now
            base = stmt.checkpoint()
        return None

    def _whole_job_may_fit(self, tasks: list[Task], caps: np.ndarray) -> bool:
        """The filters' necessary condition for the largest scenario there is: the whole job with
        every active task of every candidate victim evicted. When it fails, every scenario of the
        last partial job is filtered (their victims are subsets), so the search must fail: skip it."""
        bound = IdleGpuFilter(caps, tasks)
        bound.add([t for job in self.victims for t in job.tasks if t.status in ACTIVE_ALLOCATED_SET])
        return bound.necessary_ok()

    # -- scenarios -------------------------------------------------------------------------
    def _solve_partial(self, stmt: Statement, base: int, partial: list[Task],
                       recorded_batches: list[list[Task]], rec_caps: np.ndarray) -> _Solution | None:
        """KAI `solvePartialJob`: the scenarios of one partial job in order, each simulated only
        when the filters pass; the first solution (its operations left in `stmt`), or None
        (`stmt` back at `base`, where the recorded victims are evicted). `rec_caps`: the filter's
        capacities with the recorded victims' GPUs added."""
        assert self.preemptor is not None and self._log is not None
        recorded = [t for b in recorded_batches for t in b]
        self._reps = {t.uid: b for b in recorded_batches for t in b}
        self._rec_batches = recorded_batches
        self._rec_disjoint = len(self._reps) == len(recorded)
        self._base = base
        rec = self._rec_uids = {t.uid for t in recorded}
        filt = IdleGpuFilter(rec_caps, partial)
        topo = TopologyGpuFilter(self.ssn, self._caps, self.preemptor, partial)
        topo.add(recorded)

        def ok() -> bool:
            return filt.passes() and (not topo.active or topo.passes())

        if recorded and ok():
            sol = self._try(stmt, base, partial, recorded, None, None)
            if sol is not None:
                return sol
        potential = _Potential(self._log)
        scan = self._scan = _Scan(self._log, rec)
        while True:
            if scan.live is None and not topo.active:
                scan.bulk_skip(filt, potential)
            step = scan.next()
            if step is None:
                return None
            vjob, batch = step
            potential.add(batch)
            filt.add(batch)
            topo.add(batch)
            if not ok():
                continue
            sol = self._try(stmt, base, partial, recorded, potential, self.ssn.jobs[vjob.uid])
            if sol is not None:
                return sol

    def _try(self, stmt: Statement, base: int, partial: list[Task], recorded: list[Task],
             potential: _Potential | None, latest: Job | None) -> _Solution | None:
        """KAI's by-pod solver for one scenario (the recorded victims are already evicted up to
        `base`): recorded victims alone (no latest victim job), or recorded plus, node by node of
        the latest victim job (its pods' nodes, name order; a pod without a node stands for none),
        the potential victims of the jobs with a potential victim on that node. On failure the
        statement is rolled back to `base`."""
        self._rejected = False
        if latest is None or potential is None:
            sol = self._simulate(stmt, partial, recorded)
            if sol is None:
                stmt.rollback(base)
            return sol
        for node in sorted({t.node for t in latest.tasks}):
            chosen = potential.of_jobs_on(node)
            self._evict(stmt, chosen)
            sol = self._simulate(stmt, partial, recorded + chosen)
            if sol is not None:
                return sol
            stmt.rollback(base)
            if self._rejected:
                break  # KAI: a scenario the validator rejects is not retried on other nodes
        return None

    def _evict(self, stmt: Statement, tasks: list[Task]) -> None:
        assert self.preemptor is not None
        reason = f"{self.action}: making room for {self.preemptor.pg.namespace}/{self.preemptor.pg.name}"
        for t in tasks:
            if t.status in ACTIVE_ALLOCATED_SET:  # allocated, binding, bound, running, pipelined
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

        order = JobsByQueue(ssn, jobs.values(), request=request, keys=self._keys)  # it sorts them by uid
        # Only the preemptor and the victims' jobs act; once all of them were popped, the rest of
        # the order would be popped and skipped, so stop there.
        to_act = sum(1 for uid in victim_jobs | {job.uid} if jobs[uid].queue is not None)
        placed = False
        waiting = {uid for uid in victim_jobs if jobs[uid].queue is not None}
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
        if not placed:
            return None
        return self._validate(stmt, victims)

    def _inert(self, victim_jobs: set[str], mask: np.ndarray) -> bool:
        """True when no victim job can be re-placed in this simulation: each has a whole-resource
        task to allocate that fits no allowed node even counting releasing resources (`could_fit`
        false, so `allocate_job` must fail). Judged on the state after the evictions; the
        simulation only takes resources from there, so it stays true and the queue order of the
        simulation cannot matter. Victim jobs asking for the same requests in the same order get
        the same verdict, so each distinct signature is judged once."""
        ssn = self.ssn
        sigs: set[_Sig] = set()
        for uid in victim_jobs:
            j = ssn.jobs[uid]
            hit = self._sim_sigs.get(uid)
            if hit is None or hit[0] != j.version:
                hit = self._sim_sigs[uid] = (j.version, self._signature(tasks_to_allocate(j, real=False)))
            sigs.add(hit[1])
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

    def _validate(self, stmt: Statement, victims: list[Task]) -> _Solution | None:
        job = self.preemptor
        assert job is not None
        by_job: dict[str, list[Task]] = {}
        group = by_job.setdefault
        for t in victims:
            group(t.job.pg.uid, []).append(t)
        if self.validator is not None and not self.validator(job, by_job):
            self._rejected = True
            return None
        batches: dict[int, list[Task]] = {}
        rest = victims
        if self._rec_disjoint:
            # Disjoint recorded batches lead `victims`, each its own tasks' representative, and no
            # potential victim shares one: taking them batch by batch keeps the first-hit order.
            if self._rec_all_hit(stmt):
                batches = {id(b): b for b in self._rec_batches}
            else:
                for b in self._rec_batches:
                    if any(t.status in _HIT for t in b):
                        batches[id(b)] = b
            rest = victims[len(self._rec_uids):]
        for t in rest:
            if t.status in _HIT:
                b = self._batch_of(t)
                batches.setdefault(id(b), b)
        return _Solution(stmt, list(batches.values()))

    def _rec_all_hit(self, stmt: Statement) -> bool:
        """Every recorded victim ends Releasing or Pipelined: each was so at the base (checked
        when the base was built), and no operation since put one back (un-evicted or allocated);
        a pipeline or an eviction leaves it Pipelined or Releasing."""
        if not self._base_hit:
            return False
        rec = self._rec_uids
        return not any(op.kind in ("unevict", "allocate") and op.task.uid in rec for op in stmt.ops[self._base:])

    def _batch_of(self, task: Task) -> list[Task]:
        """KAI's job representative of a victim task: its recorded batch, or the batch it was
        popped in."""
        assert self._log is not None and self._scan is not None
        for source in (self._reps, self._scan.batch_of, self._log.batch_of):
            b = source.get(task.uid)
            if b is not None:
                return b
        return [task]


class _Potential:
    """A partial job's potential victims in the order added, with their nodes and job ids, so
    "every potential victim of the jobs with one on node X" is a vectorised lookup."""

    def __init__(self, log: VictimLog) -> None:
        self.log = log
        self.tasks: list[Task] = []
        self._nodes: list[np.ndarray] = []
        self._jobs: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.tasks)

    def add(self, batch: list[Task]) -> None:
        self.tasks.extend(batch)
        self._nodes.append(np.array([t.node for t in batch], dtype=np.int64))
        self._jobs.append(np.array([self.log.job_id(t.job.uid) for t in batch], dtype=np.int64))

    def add_log_range(self, a: int, b: int) -> None:
        """Add the log's tasks a..b-1 (flat indices)."""
        node, _gain, jobs = self.log.columns()
        self.tasks.extend(self.log.tasks[a:b])
        self._nodes.append(node[a:b])
        self._jobs.append(jobs[a:b])

    def of_jobs_on(self, node: int) -> list[Task]:
        """The potential victims of every job with a potential victim on `node` (none for -1)."""
        if node < 0 or not self.tasks:
            return []
        if len(self._nodes) > 1:
            self._nodes = [np.concatenate(self._nodes)]
            self._jobs = [np.concatenate(self._jobs)]
        nodes, jobs = self._nodes[0], self._jobs[0]
        pick = np.isin(jobs, np.unique(jobs[nodes == node]))
        return [self.tasks[i] for i in np.flatnonzero(pick).tolist()]


class _Scan:
    """One partial job's walk over the victim sequence: the recorded log while it is valid, a
    live queue from the first skip that pushes back something else (see `VictimLog`)."""

    def __init__(self, log: VictimLog, recorded: set[str]) -> None:
        self.log = log
        self.rec = recorded
        self.i = 0
        self.live: VictimQueue | None = None
        #: Batches popped from the live queue (KAI's job representatives of their tasks).
        self.batch_of: dict[str, list[Task]] = {}
        #: Sorted log entries holding a recorded victim; recorded victims not in the log yet.
        self._skip: list[int] = []
        self._unplaced = set(recorded)
        self._locate()

    def _locate(self) -> None:
        found = [uid for uid in self._unplaced if uid in self.log.entry_of]
        if found:
            self._unplaced.difference_update(found)
            self._skip = sorted(set(self._skip) | {self.log.entry_of[uid] for uid in found})

    def _skips(self, lo: int, hi: int) -> int:
        """The first entry in [lo, hi) whose batch holds a recorded victim, else hi."""
        if self._unplaced:
            self._locate()
        k = bisect_left(self._skip, lo)
        return min(self._skip[k], hi) if k < len(self._skip) else hi

    def bulk_skip(self, filt: IdleGpuFilter, potential: _Potential) -> None:
        """Add, at once, the longest run of entries from here that the filter's necessary
        condition rejects after each of them (so KAI would neither simulate nor stop there),
        stopping before any entry holding a recorded victim."""
        log, i = self.log, self.i
        want = _FIRST_SCAN
        while True:
            log.extend_to(i + want)
            end = self._skips(i, len(log.entries))
            if end <= i:
                return
            whole = filt.necessary_ok(self._extra(filt, i, end - 1))
            if whole or end < len(log.entries) or log.exhausted:
                break
            want *= 2
        # The first p in [lo, hi) whose prefix passes the condition; hi if none (monotone: when
        # the whole run fails, every shorter prefix fails too, so no search is needed).
        lo, hi = (i, end) if whole else (end, end)
        while lo < hi:
            mid = (lo + hi) // 2
            if filt.necessary_ok(self._extra(filt, i, mid)):
                hi = mid
            else:
                lo = mid + 1
        if lo == i:
            return
        a, b = log.entries[i].start, log.end_of(lo - 1)
        node, gain, _jobs = log.columns()
        filt.add_bulk(node[a:b], gain[a:b])
        potential.add_log_range(a, b)
        self.i = lo

    def _extra(self, filt: IdleGpuFilter, i: int, p: int) -> np.ndarray:
        """GPUs the batches of entries i..p free, per node."""
        a, b = self.log.entries[i].start, self.log.end_of(p)
        node, gain, _jobs = self.log.columns()
        return np.bincount(node[a:b], weights=gain[a:b], minlength=len(filt.caps)).astype(np.int64)

    def next(self) -> tuple[Job, list[Task]] | None:
        """The next victim job and its batch to add as potential victims; None at the end."""
        while True:
            if self.live is not None:
                step = self._next_live()
                if step is None or step[1]:
                    return step
                continue
            e = self.log.get(self.i)
            if e is None:
                return None
            self.i += 1
            batch = e.batch
            if len(batch) == 1:  # the common case, without the general checks below
                if batch[0].uid not in self.rec:
                    return e.job, batch
                if e.pushed is None and len(e.job.tasks) == 1:
                    continue  # its only task is recorded: nothing pushed back, as in the log
            if not batch:
                continue
            if not any(t.uid in self.rec for t in batch):
                return e.job, batch
            rest = [t for t in e.job.tasks if t.uid not in self.rec]
            logged = e.pushed.tasks if e.pushed is not None else []
            if [t.uid for t in rest] == [t.uid for t in logged]:
                continue  # the same push as in the log: the sequence goes on unchanged
            self.live = self.log.replay_until(self.i - 1)
            popped = self.live.pop()
            assert popped is not None and popped.uid == e.job.uid
            if rest:
                self.live.push(clone_job(e.job, rest))

    def _next_live(self) -> tuple[Job, list[Task]] | None:
        assert self.live is not None
        vjob = self.live.pop() if self.live else None
        if vjob is None:
            return None
        batch, more = tasks_to_evict(vjob)
        if not batch:
            return vjob, []
        if any(t.uid in self.rec for t in batch):
            rest = [t for t in vjob.tasks if t.uid not in self.rec]
            if rest:
                self.live.push(clone_job(vjob, rest))
            return vjob, []
        if more:
            ids = {t.uid for t in batch}
            self.live.push(clone_job(vjob, [t for t in vjob.tasks if t.uid not in ids]))
        self.batch_of.update((t.uid, batch) for t in batch)
        return vjob, batch
