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

This module holds the search (partial jobs, the scenarios of each, the filters that gate them)
and the bookkeeping of the search's one statement: its first operations evict the recorded
victims (the base) and every scenario is rolled back to there. The walk over the victim sequence
and its bulk skipping are in `victim_scan`, the simulation of one scenario in `simulation`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from shoal.actions.common.job_allocation import tasks_to_allocate
from shoal.actions.common.scenario_filter import IdleGpuFilter, TopologyGpuFilter, gpu_gains, idle_gpus
from shoal.actions.common.simulation import ScenarioSimulation
from shoal.actions.common.victim_log import VictimLog
from shoal.actions.common.victim_queue import VictimQueue
from shoal.actions.common.victim_scan import Potential, Scan
from shoal.framework.jobs import Job, Task
from shoal.framework.scenario_victims import RecordedJobs, ScenarioVictims, group_by_job
from shoal.framework.session import Session
from shoal.framework.statement import Statement
from shoal.model.status import ACTIVE_ALLOCATED_SET, PodStatus

#: Validator: preemptor, the partial job's tasks (the scenario's preemptor, as KAI's validators
#: see it), victim tasks per victim job uid (state after the simulation).
Validator = Callable[[Job, list[Task], dict[str, list[Task]]], bool]

#: A victim that lost (Releasing) or moved (Pipelined) a pod: its batch is a recorded victim.
_HIT = (PodStatus.RELEASING, PodStatus.PIPELINED)


@dataclass(slots=True)
class _Solution:
    stmt: Statement
    #: Victim batches (KAI's job representatives) that lost or moved a task, in the order first
    #: hit: the recorded victims of the next partial job.
    victim_batches: list[list[Task]] = field(default_factory=list)
    #: The victim tasks themselves that ended Releasing or Pipelined (KAI's `victimsTasks`): their
    #: nodes, and not those of the rest of their batches, join the next partial job's nodes.
    hit: list[Task] = field(default_factory=list)


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
    whatever the number of tasks or victims. It is KAI's minimality, not a global one: each
    partial job starts from the victims the previous one hit, so the final statement can keep a
    move that a search for the whole job at once would not make (docs/reclaim.md, r500-s679).

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
        self.sim = ScenarioSimulation(ssn, feasible)
        self.preemptor: Job | None = None
        self._rejected = False
        #: Recorded victim uid -> its batch (KAI's job representative), for this partial job.
        self._reps: dict[str, list[Task]] = {}
        #: The victim log's entries holding a recorded victim (sorted) and the recorded victims
        #: not in the log yet (`VictimLog.locate`), for this partial job's scan.
        self._located: tuple[list[int], set[str]] = ([], set())
        self._rec_batches: list[list[Task]] = []
        self._rec_disjoint = False
        self._rec_uids: set[str] = set()
        #: Nodes the recorded victims' hit tasks were on when this partial job began.
        self._rec_nodes: set[int] = set()
        #: Nodes of the potential victims of this partial job's validator-rejected scenarios: they
        #: stay usable by its later scenarios (KAI's `solveOnPotentialNodes` returns the rejected
        #: result before `feasibleNodesRollback`, so they stay in the partial job's feasible-node map).
        self._kept_nodes: set[int] = set()
        #: Where the recorded victims' evictions end in the search's statement, and whether every
        #: recorded victim is Releasing or Pipelined there.
        self._base = 0
        self._base_hit = True
        self._log: VictimLog | None = None
        self._scan: Scan | None = None
        self._caps = np.zeros(0, dtype=np.int64)
        #: This partial job's recorded victims, grouped by job (chained to the previous one's).
        self._rec_jobs = RecordedJobs([])

    # -- entry point ---------------------------------------------------------------------
    def solve(self, job: Job) -> Statement | None:
        """A statement that makes room for `job` and pipelines it, or None (session unchanged)."""
        self.preemptor = job
        # Simulated allocations must not leave fit errors behind (victims restore their own).
        # `pending` is the session's count of a job's pending pods: no scan of every job's tasks.
        saved = {j.uid: (list(j.fit_errors), list(j.reasons)) for j in self.ssn.jobs.values()
                 if j is job or j.fit_errors or j.reasons or j.pending > 0}
        before = job.active_used()
        tasks = tasks_to_allocate(job, real=False)
        self.sim.start(job)
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
        self._rec_nodes = set()
        flat: list[Task] = []
        self._reps = {}
        self._located = ([], set())
        self._rec_jobs = RecordedJobs(flat)
        for k in range(1, n + 1):
            sol = self._solve_partial(stmt, base, tasks[:k], recorded, flat, evicted, rec_caps)
            if sol is None:
                stmt.discard()
                return None
            if k == n:
                return stmt
            stmt.rollback(base)
            # Read once the scenario is undone: where the hit tasks are, not where it moved them.
            self._rec_nodes = {t.node for t in sol.hit if t.node >= 0}
            m = len(recorded)
            if sol.victim_batches[:m] == recorded:
                # The usual step: the same recorded batches first, new ones after. Everything
                # derived from the recorded victims is extended, not rebuilt (the values are the
                # same; at scale these lists hold thousands of victims per partial job).
                added = [t for b in sol.victim_batches[m:] for t in b]
                recorded = sol.victim_batches
                flat = flat + added
                now = evicted | {t.uid for t in added}
                fresh = [t for t in added if t.uid not in evicted]
                self._keep_recorded(recorded, m, flat, added, fresh)
            else:
                recorded = sol.victim_batches
                flat = [t for b in recorded for t in b]
                now = {t.uid for t in flat}
                if not evicted <= now:
                    stmt.discard()  # a recorded victim was dropped: rebuild the base
                    evicted, rec_caps, self._base_hit = set(), caps, True
                fresh = [t for t in flat if t.uid not in evicted]
                self._keep_recorded(recorded, 0, flat, None, flat)
            self._evict(stmt, fresh)
            self._base_hit = self._base_hit and all(t.status in _HIT for t in fresh)
            rec_caps = rec_caps + gpu_gains(fresh, len(caps))
            evicted = now
            base = stmt.checkpoint()
        return None

    def _keep_recorded(self, recorded: list[list[Task]], m: int, flat: list[Task], added: list[Task] | None,
                       fresh: list[Task]) -> None:
        """What is derived from the next partial job's recorded victims (`recorded` batches, their
        tasks `flat`): extended by the batches from `m` on (tasks `added`, `fresh` of them not yet
        recorded), or, when `added` is None, built anew."""
        assert self._log is not None
        if added is None:
            self._reps, self._located, self._rec_jobs = {}, ([], set()), RecordedJobs(flat)
        else:
            self._rec_jobs = self._rec_jobs.extended(flat, added)
        self._reps = self._reps | {t.uid: b for b in recorded[m:] for t in b}
        self._located = self._log.locate(fresh, self._located)

    def _whole_job_may_fit(self, tasks: list[Task], caps: np.ndarray) -> bool:
        """The filters' necessary condition for the largest scenario there is: the whole job with
        every active task of every candidate victim evicted. When it fails, every scenario of the
        last partial job is filtered (their victims are subsets), so the search must fail: skip it."""
        bound = IdleGpuFilter(caps, tasks)
        bound.add([t for job in self.victims for t in job.tasks if t.status in ACTIVE_ALLOCATED_SET])
        return bound.necessary_ok()

    # -- scenarios -------------------------------------------------------------------------
    def _solve_partial(self, stmt: Statement, base: int, partial: list[Task],
                       recorded_batches: list[list[Task]], recorded: list[Task], rec: set[str],
                       rec_caps: np.ndarray) -> _Solution | None:
        """KAI `solvePartialJob`: the scenarios of one partial job in order, each simulated only
        when the filters pass; the first solution (its operations left in `stmt`), or None
        (`stmt` back at `base`, where the recorded victims are evicted). `recorded`: the tasks of
        `recorded_batches` in order, `rec` their uids; `rec_caps`: the filter's capacities with
        the recorded victims' GPUs added."""
        assert self.preemptor is not None and self._log is not None
        self._rec_batches = recorded_batches
        self._rec_disjoint = len(self._reps) == len(recorded)
        self._base = base
        self._rec_uids = rec
        self._kept_nodes = set()
        filt = IdleGpuFilter(rec_caps, partial)
        topo = TopologyGpuFilter(self.ssn, self._caps, self.preemptor, partial)
        topo.add(recorded)

        def ok() -> bool:
            return filt.passes() and (not topo.active or topo.passes())

        if recorded and ok():
            sol = self._try(stmt, base, partial, recorded, None, None)
            if sol is not None:
                return sol
        potential = Potential(self._log)
        scan = self._scan = Scan(self._log, rec, self._located)
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
             potential: Potential | None, latest: Job | None) -> _Solution | None:
        """KAI's by-pod solver for one scenario (the recorded victims are already evicted up to
        `base`): recorded victims alone (no latest victim job), or recorded plus, node by node of
        the latest victim job (its pods' nodes, name order; a pod without a node stands for none),
        the potential victims of the jobs with a potential victim on that node. On failure the
        statement is rolled back to `base`. A scenario the validator rejects ends the walk over
        the nodes, and its potential victims' nodes stay usable by the partial job's later
        scenarios (`_kept_nodes`, as KAI's feasible-node map keeps them)."""
        self._rejected = False
        if latest is None or potential is None:
            sol = self._simulate(stmt, partial, recorded, self._rec_nodes)
            if sol is None:
                stmt.rollback(base)
            return sol
        for node in sorted({t.node for t in latest.tasks}):
            chosen = potential.of_jobs_on(node)
            self._evict(stmt, chosen)
            added = {t.node for t in chosen if t.node >= 0}
            sol = self._simulate(stmt, partial, recorded + chosen, self._rec_nodes | self._kept_nodes | added)
            if sol is not None:
                return sol
            stmt.rollback(base)
            if self._rejected:
                # KAI: a scenario the validator rejects is not retried on other nodes, and the
                # nodes its potential victims added stay feasible for the partial job's later
                # scenarios (the rejection returns before those nodes are taken out again).
                self._kept_nodes |= added
                break
        return None

    def _evict(self, stmt: Statement, tasks: list[Task]) -> None:
        assert self.preemptor is not None
        reason = f"{self.action}: making room for {self.preemptor.pg.namespace}/{self.preemptor.pg.name}"
        for t in tasks:
            if t.status in ACTIVE_ALLOCATED_SET:  # allocated, binding, bound, running, pipelined
                stmt.evict(t, self.action, reason, self.preemptor.uid)


    def _simulate(self, stmt: Statement, partial: list[Task], victims: list[Task],
                  nodes: set[int]) -> _Solution | None:
        """Simulate the scenario (`ScenarioSimulation.place`) on the feasible nodes plus `nodes`;
        validate it when the preemptor was placed. `victims` starts with the partial job's
        recorded victims (`_rec_jobs`, evicted at the base)."""
        if not self.sim.place(stmt, partial, victims, nodes, self._rec_jobs):
            return None
        return self._validate(stmt, partial, victims)

    def _by_job(self, victims: list[Task]) -> ScenarioVictims:
        """The scenario's victims per job uid (first-seen order, each job's tasks in victim
        order), from the recorded victims' grouping (`_rec_jobs`) plus the other victims;
        with the recorded part named (`base`) when the simulation left it as at the base."""
        rec = self._rec_jobs
        chosen = group_by_job(victims[len(rec.tasks):])
        by_job = ScenarioVictims(rec.by_job)
        for uid, tasks in chosen.items():
            had = by_job.get(uid)
            by_job[uid] = tasks if had is None else had + tasks  # never extend a recorded list
        if self.sim.fast:  # no other victim touches a recorded job: see ScenarioSimulation.fast
            by_job.base, by_job.extra = rec, tuple(chosen)
        return by_job

    def _validate(self, stmt: Statement, partial: list[Task], victims: list[Task]) -> _Solution | None:
        job = self.preemptor
        assert job is not None
        by_job = self._by_job(victims)
        if self.validator is not None and not self.validator(job, partial, by_job):
            self._rejected = True
            return None
        batches: dict[int, list[Task]] = {}
        hit: list[Task] = []
        rest = victims
        if self._rec_disjoint:
            # Disjoint recorded batches lead `victims`, each its own tasks' representative, and no
            # potential victim shares one: taking them batch by batch keeps the first-hit order.
            if self._rec_all_hit(stmt):
                batches = {id(b): b for b in self._rec_batches}
                hit = victims[:len(self._rec_uids)]
            else:
                for b in self._rec_batches:
                    got = [t for t in b if t.status in _HIT]
                    if got:
                        batches[id(b)] = b
                        hit += got
            rest = victims[len(self._rec_uids):]
        for t in rest:
            if t.status in _HIT:
                hit.append(t)
                b = self._batch_of(t)
                batches.setdefault(id(b), b)
        return _Solution(stmt, list(batches.values()), hit)

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
