"""One partial job's walk over the victim sequence, for the victim solver (`solver.py`).

Contract: `Scan.next()` yields, in KAI's order, the victim jobs and their batches that the
solver's scenarios add one after another - the recorded `VictimLog` while it still is the sequence
KAI would pop, a live `VictimQueue` from the first recorded victim that changes what is pushed
back - skipping the recorded victims of the previous partial job. `Scan.bulk_skip` adds at once
the longest run of batches the filters' monotone necessary condition rejects after each of them
(scenarios KAI would neither simulate nor stop at), so the result is the one-by-one walk's.
`Potential` holds the potential victims added so far and answers "every potential victim of
the jobs with one on node X" with numpy. Nothing here touches the session or a statement.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from shoal.actions.common.scenario_filter import IdleGpuFilter
from shoal.actions.common.victim_log import VictimLog
from shoal.actions.common.victim_queue import VictimQueue
from shoal.actions.common.victims import clone_job, tasks_to_evict
from shoal.framework.jobs import Job, Task

#: The bulk scan first reads one entry, then this many times more at each look: a scenario often
#: passes the filters at the very next victim (every preemptor of KAI's consolidation benchmark
#: does), and each entry read is a pop of the victim queue. Reading later pops the same sequence:
#: the victim queue compares its queues as they stood when it was built.
_SCAN_GROWTH = 4

#: Up to this many potential victims, `Potential.of_jobs_on` loops in Python instead of numpy.
_FEW_POTENTIAL = 64


class Potential:
    """A partial job's potential victims in the order added, with their nodes and job ids, so
    "every potential victim of the jobs with one on node X" is a vectorised lookup."""

    def __init__(self, log: VictimLog) -> None:
        self.log = log
        self.tasks: list[Task] = []
        #: Node and job id of each task, in the order added: array chunks (log ranges are added
        #: as slices of the log's columns, thousands of entries at a time, never converted to
        #: Python lists) and, after them, the batches added one by one as lists.
        self._chunks: list[tuple[np.ndarray, np.ndarray]] = []
        self._node_tail: list[int] = []
        self._job_tail: list[int] = []

    def __len__(self) -> int:
        return len(self.tasks)

    def add(self, batch: list[Task]) -> None:
        self.tasks.extend(batch)
        self._node_tail += [t.node for t in batch]
        self._job_tail += [self.log.job_id(t.job.uid) for t in batch]

    def add_log_range(self, a: int, b: int) -> None:
        """Add the log's tasks a..b-1 (flat indices)."""
        node, _gain, jobs = self.log.columns()
        self._flush()
        self.tasks.extend(self.log.tasks[a:b])
        self._chunks.append((node[a:b], jobs[a:b]))

    def _flush(self) -> None:
        """Move the batches added one by one into an array chunk."""
        if self._node_tail:
            self._chunks.append((np.array(self._node_tail, dtype=np.int64),
                                 np.array(self._job_tail, dtype=np.int64)))
            self._node_tail, self._job_tail = [], []

    def of_jobs_on(self, node: int) -> list[Task]:
        """The potential victims of every job with a potential victim on `node` (none for -1),
        in the order added."""
        if node < 0 or not self.tasks:
            return []
        self._flush()
        if len(self._chunks) > 1:
            self._chunks = [(np.concatenate([c[0] for c in self._chunks]),
                             np.concatenate([c[1] for c in self._chunks]))]
        nodes, jobs = self._chunks[0]
        if len(self.tasks) <= _FEW_POTENTIAL:
            jl: list[int] = jobs.tolist()
            wanted = {j for n, j in zip(nodes.tolist(), jl, strict=True) if n == node}
            return [t for t, j in zip(self.tasks, jl, strict=True) if j in wanted]
        pick = np.isin(jobs, np.unique(jobs[nodes == node]))
        return [self.tasks[i] for i in np.flatnonzero(pick).tolist()]


class Scan:
    """One partial job's walk over the victim sequence: the recorded log while it is valid, a
    live queue from the first skip that pushes back something else (see `VictimLog`)."""

    def __init__(self, log: VictimLog, recorded: set[str],
                 located: tuple[list[int], set[str]] | None = None) -> None:
        """`located`: `VictimLog.locate` of the recorded victims, when the caller keeps it (the
        list is not changed here)."""
        self.log = log
        self.rec = recorded
        self.i = 0
        self.live: VictimQueue | None = None
        #: Batches popped from the live queue (KAI's job representatives of their tasks).
        self.batch_of: dict[str, list[Task]] = {}
        #: Sorted log entries holding a recorded victim; recorded victims not in the log yet.
        self._skip: list[int] = [] if located is None else located[0]
        self._unplaced = set(recorded) if located is None else set(located[1])
        if self._unplaced:
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

    def bulk_skip(self, filt: IdleGpuFilter, potential: Potential) -> None:
        """Add, at once, the longest run of entries from here that the filter's necessary
        condition rejects after each of them (so KAI would neither simulate nor stop there),
        stopping before any entry holding a recorded victim."""
        log, i = self.log, self.i
        want = 1
        while True:
            log.extend_to(i + want)
            end = self._skips(i, len(log.entries))
            if end <= i:
                return
            whole = filt.necessary_ok(self._extra(filt, i, end - 1))
            if whole or end < len(log.entries) or log.exhausted:
                break
            want *= _SCAN_GROWTH
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
