"""The victim queue's pop sequence, recorded once per preemptor and replayed for every partial job.

KAI rebuilds the victim queue from the session for each partial job of the preemptor; the session
is the same each time (every earlier scenario was discarded), so the queue pops the same jobs in
the same order. The only difference between partial jobs is the recorded victims: a popped job
holding one of them is skipped and its other tasks are pushed back. `VictimLog` pops the queue
once, lazily, and keeps each pop as an `Entry` with flat numpy columns over the batch tasks, so a
partial job reads the sequence without popping again and can scan many entries at once.

A skip that pushes back exactly what the recorded pop pushed (the common case: single-pod or
whole-gang victims) leaves the sequence unchanged. Any other skip makes the rest of the sequence
differ; `replay_until` then rebuilds the real queue state at that point, so the result is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shoal.actions.common.scenario_filter import victim_gain
from shoal.actions.common.victim_queue import Leaf, VictimQueue
from shoal.actions.common.victims import clone_job, tasks_to_evict
from shoal.framework.jobs import Job, Task


@dataclass(slots=True)
class Entry:
    """One pop: the job (or pushed-back clone), its victim batch, and the clone pushed back."""

    job: Job
    batch: list[Task]
    pushed: Job | None
    #: Index of the batch's first task in the log's flat task columns.
    start: int


class VictimLog:
    """Lazily recorded pops of a fresh copy of `queue` (see the module docstring)."""

    def __init__(self, queue: VictimQueue) -> None:
        self.base = queue
        self._live = queue.copy()
        self.entries: list[Entry] = []
        self.tasks: list[Task] = []
        #: Flat columns over `tasks`: node index, GPUs freed (milli), entry index.
        self._node: list[int] = []
        self._gain: list[int] = []
        self._entry: list[int] = []
        self._job: list[int] = []
        #: Victim job uid -> a small integer (for vectorised "tasks of these jobs" lookups).
        self.job_ids: dict[str, int] = {}
        self.entry_of: dict[str, int] = {}
        #: Victim task uid -> the batch it was popped in (KAI's job representative).
        self.batch_of: dict[str, list[Task]] = {}
        self.exhausted = False
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        #: The live queue's only leaf once one is left: popped directly (`VictimQueue.sole_leaf`).
        self._sole: Leaf | None = None

    def get(self, i: int) -> Entry | None:
        """Entry i, popping the queue as far as needed; None past the end of the sequence."""
        while len(self.entries) <= i and not self.exhausted:
            self._pop_one()
        return self.entries[i] if i < len(self.entries) else None

    def extend_to(self, n: int) -> None:
        """Record at least n entries (fewer only when the queue runs out)."""
        while len(self.entries) < n and not self.exhausted:
            self._pop_one()

    def _pop_one(self) -> None:
        sole = self._sole
        if sole is None:
            job = self._live.pop() if self._live else None
            self._sole = self._live.sole_leaf()
        else:
            job = sole.pop() if sole else None
        if job is None:
            self.exhausted = True
            return
        batch, more = tasks_to_evict(job)
        pushed = None
        if more:
            ids = {t.uid for t in batch}
            pushed = clone_job(job, [t for t in job.tasks if t.uid not in ids])
            if sole is None:
                self._live.push(pushed)
            else:
                self._live.push_back(sole, pushed)
        e = len(self.entries)
        self.entries.append(Entry(job, batch, pushed, len(self.tasks)))
        for t in batch:
            self.tasks.append(t)
            self._node.append(t.node)
            self._gain.append(victim_gain(t))
            self._entry.append(e)
            self._job.append(self.job_id(t.job.uid))
            self.entry_of.setdefault(t.uid, e)
            self.batch_of.setdefault(t.uid, batch)
        self._arrays = None

    def locate(self, tasks: list[Task], located: tuple[list[int], set[str]]) -> tuple[list[int], set[str]]:
        """`located` - the sorted entries holding one of some victims, and those of them not in the
        log yet - with `tasks` added as the log stands now: a new pair, `located` unchanged."""
        skip, unplaced = located
        entry_of = self.entry_of
        found = {entry_of[t.uid] for t in tasks if t.uid in entry_of}
        missing = {t.uid for t in tasks if t.uid not in entry_of}
        return sorted(found.union(skip)) if found else skip, unplaced | missing if missing else unplaced

    def job_id(self, uid: str) -> int:
        return self.job_ids.setdefault(uid, len(self.job_ids))

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(node, gain, job id) per recorded task, as arrays (rebuilt only after new pops)."""
        if self._arrays is None:
            self._arrays = (np.array(self._node, dtype=np.int64), np.array(self._gain, dtype=np.int64),
                            np.array(self._job, dtype=np.int64))
        return self._arrays

    def end_of(self, i: int) -> int:
        """Flat index one past entry i's last task."""
        return self.entries[i + 1].start if i + 1 < len(self.entries) else len(self.tasks)

    def replay_until(self, i: int) -> VictimQueue:
        """A fresh queue in the state after popping entries 0..i-1 as recorded (each pushing back
        what it pushed in the log): where a partial job's sequence leaves the log."""
        queue = self.base.copy()
        for j in range(i):
            popped = queue.pop()
            assert popped is not None and popped.uid == self.entries[j].job.uid
            back = self.entries[j].pushed
            if back is not None:
                queue.push(back)
        return queue
