"""Victim-side job handling shared by reclaim, preempt and consolidation (kai-spec §3.6, §3.7).

* `clone_job` - a job restricted to some of its tasks (KAI `CloneWithTasks`): pod-set counters
  recomputed from those tasks, minimums kept.
* `tasks_to_evict` - the next victim batch of a job: one pod of an elastic job above its
  minimum, else the whole gang.
* `VictimQueue` - the victim-mode job order over the queue tree: the most over-served queue
  first, inside a leaf the job that would be scheduled last first.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

import numpy as np

from shoal.framework.job_queue import job_allocated
from shoal.framework.jobs import Job, PodSet, QueueInfo, Task
from shoal.framework.session import Session
from shoal.model.resources import GPU_COL
from shoal.model.status import ACTIVE_ALLOCATED


def clone_job(job: Job, tasks: Iterable[Task]) -> Job:
    """`job` restricted to `tasks` (same PodGroup, queue and times; counters of those tasks)."""
    keep = list(tasks)
    out = Job(pg=job.pg, queue=job.queue, last_start_time=job.last_start_time, stale_since=job.stale_since)
    for name, ps in job.pod_sets.items():
        out.pod_sets[name] = PodSet(ps.spec)
    for t in keep:
        ps = out.pod_sets[t.pod_set.name]
        ps.tasks.append(t)
        ps.count(t.status, 1)
    out.tasks = keep
    return out


def tasks_to_evict(job: Job) -> tuple[list[Task], bool]:
    """KAI `GetTasksToEvict`: (batch, job has more active tasks after it).

    A pod set above its minimum gives one pod (the highest allocated/min ratio set, its last
    task in task order); otherwise every active-allocated task of the job goes (whole gang)."""
    above = [ps for ps in job.pod_sets.values() if ps.active_allocated > ps.min_available]
    if above:
        above.sort(key=lambda ps: (-ps.active_allocated / max(ps.min_available, 1), ps.name))
        active = [t for t in above[0].tasks if t.status & ACTIVE_ALLOCATED]
        batch = [max(active, key=lambda t: t.order_key)]
    else:
        batch = [t for t in job.tasks if t.status & ACTIVE_ALLOCATED]
    return batch, len(batch) < job.active_allocated()


class _Rev:
    """Reverses the order of one key element (strings included)."""

    __slots__ = ("v",)

    def __init__(self, v: object) -> None:
        self.v = v

    def __lt__(self, other: _Rev) -> bool:
        return bool(other.v < self.v)  # type: ignore[operator]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Rev) and bool(self.v == other.v)

    def __hash__(self) -> int:
        return hash(self.v)


class _Leaf:
    """The victims of one leaf queue, most victimisable first: the initial jobs as a list sorted
    once (shared by copies, read through a cursor) merged with a heap of pushed-back clones."""

    __slots__ = ("cursor", "heap", "keys", "ordered")

    def __init__(self, ordered: list[Job], keys: list[tuple[object, ...]]) -> None:
        self.ordered = ordered
        self.keys = keys
        self.cursor = 0
        self.heap: list[tuple[tuple[_Rev, ...], int, tuple[object, ...], Job]] = []

    def copy(self) -> _Leaf:
        out = _Leaf(self.ordered, self.keys)
        out.cursor = self.cursor
        out.heap = list(self.heap)
        return out

    def __bool__(self) -> bool:
        return self.cursor < len(self.ordered) or bool(self.heap)

    def _from_list(self) -> bool:
        if self.cursor >= len(self.ordered):
            return False
        # Larger job key = scheduled later = victim first; on a tie the initial job goes first.
        return not self.heap or not self.keys[self.cursor] < self.heap[0][2]

    def top(self) -> Job:
        return self.ordered[self.cursor] if self._from_list() else self.heap[0][3]

    def pop(self) -> Job:
        if self._from_list():
            self.cursor += 1
            return self.ordered[self.cursor - 1]
        return heapq.heappop(self.heap)[3]


class VictimQueue:
    """Victim-mode `JobsOrderByQueues`: at every level of the queue tree the queue compared
    last by the proportion comparator (with the resources of the victims already taken from
    it and of its next victim subtracted) goes first; inside a leaf, the reverse job order.

    `copy()` gives a fresh queue in the initial state cheaply (the initial order is sorted once)."""

    def __init__(self, ssn: Session, jobs: Iterable[Job] = ()) -> None:
        self.ssn = ssn
        self._seq = 0
        self.leaves: dict[str, _Leaf] = {}
        self.popped: dict[str, np.ndarray] = {}
        by_queue: dict[str, list[tuple[tuple[object, ...], Job]]] = {}
        for job in jobs:
            if job.queue is not None:
                by_queue.setdefault(job.queue.name, []).append((ssn.job_key(job), job))
        for name, entries in by_queue.items():
            entries.sort(key=lambda e: e[0], reverse=True)
            self.leaves[name] = _Leaf([j for _k, j in entries], [k for k, _j in entries])

    def copy(self) -> VictimQueue:
        out = VictimQueue.__new__(VictimQueue)
        out.ssn = self.ssn
        out._seq = self._seq
        out.leaves = {k: v.copy() for k, v in self.leaves.items()}
        out.popped = {k: v.copy() for k, v in self.popped.items()}
        return out

    def push(self, job: Job) -> None:
        if job.queue is None:
            return
        key = self.ssn.job_key(job)
        self._seq += 1
        leaf = self.leaves.setdefault(job.queue.name, _Leaf([], []))
        heapq.heappush(leaf.heap, (tuple(_Rev(k) for k in key), self._seq, key, job))

    def __bool__(self) -> bool:
        return any(self.leaves.values())

    def _best_leaf(self, q: QueueInfo) -> QueueInfo | None:
        if q.is_leaf:
            leaf = self.leaves.get(q.name)
            return q if leaf else None
        best = self._best_child(q.children)
        return self._best_leaf(best) if best is not None else None

    def _victims(self, leaf: QueueInfo) -> np.ndarray:
        total: np.ndarray = self.popped.get(leaf.name, np.zeros(3)) + job_allocated(self.leaves[leaf.name].top())
        return total

    def _best_child(self, queues: list[QueueInfo]) -> QueueInfo | None:
        cmp = self.ssn.hooks.queue_order
        best: QueueInfo | None = None
        best_leaf: QueueInfo | None = None
        for q in queues:
            leaf = self._best_leaf(q)
            if leaf is None:
                continue
            if best is None or best_leaf is None:
                best, best_leaf = q, leaf
                continue
            if cmp is None:
                order = 1 if (q.spec.creation, q.name) < (best.spec.creation, best.name) else -1
            else:
                order = -cmp(q, best, None, None, self._victims(leaf), self._victims(best_leaf))
            if order < 0:
                best, best_leaf = q, leaf
        return best

    def pop(self) -> Job | None:
        """The next victim job (a clone when an elastic job was pushed back), or None."""
        tops = [q for q in self.ssn.queues.values() if q.parent is None]
        q = self._best_child(tops)
        while q is not None and not q.is_leaf:
            q = self._best_child(q.children)
        if q is None:
            return None
        job = self.leaves[q.name].pop()
        self.popped[q.name] = self.popped.get(q.name, np.zeros(3)) + job_allocated(job)
        return job


def feasible_nodes(ssn: Session, tasks: list[Task]) -> np.ndarray:
    """KAI `FeasibleNodesForJob`: every node if some task needs no GPU, else nodes with idle or
    releasing GPUs (whole devices or room on a shared device)."""
    n = len(ssn.nodes)
    if any(not t.pod.gpu.milli and not t.pod.mig and not t.pod.gpu.is_gpu_memory for t in tasks):
        return np.ones(n, dtype=bool)
    nodes = ssn.nodes
    mask = (nodes.idle[:, GPU_COL] > 0) | (nodes.releasing[:, GPU_COL] > 0)
    for i, groups in enumerate(nodes.groups):
        if not mask[i]:
            mask[i] = any(int(nodes.gpu_memory[i]) - g.allocated + g.releasing > 0 for g in groups.values())
    for col, _g in ssn.space.mig_columns():
        mask |= (nodes.idle[:, col] > 0) | (nodes.releasing[:, col] > 0)
    return mask
