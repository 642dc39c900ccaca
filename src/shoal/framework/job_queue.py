"""Jobs ordered by queue (kai-spec §3.6): pick the best queue at every level of the queue tree,
then the best job of the chosen leaf. Victim mode reverses both orders (most-over queue first)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

import numpy as np

from shoal.framework.jobs import Job, QueueInfo
from shoal.framework.session import Session


class JobsByQueue:
    """A priority structure of jobs over the queue tree. Pop returns the next job to try."""

    def __init__(self, ssn: Session, jobs: Iterable[Job], *, victim_mode: bool = False,
                 request: Callable[[Job], np.ndarray] | None = None, depth: int | None = None) -> None:
        self.ssn = ssn
        self.victim = victim_mode
        self.request = request or job_request
        self.depth = depth
        self._seq = 0
        self.leaves: dict[str, list[tuple[tuple[object, ...], int, Job]]] = {}
        self.popped: dict[str, np.ndarray] = {}
        for job in jobs:
            self.push(job)

    def _key(self, job: Job) -> tuple[object, ...]:
        key = self.ssn.job_key(job)
        return tuple(_Reverse(k) for k in key) if self.victim else key

    def push(self, job: Job) -> None:
        q = job.queue
        if q is None:
            return
        heap = self.leaves.setdefault(q.name, [])
        self._seq += 1
        heapq.heappush(heap, (self._key(job), self._seq, job))
        if self.depth is not None and len(heap) > self.depth:
            heap.remove(max(heap))
            heapq.heapify(heap)

    def __bool__(self) -> bool:
        return any(self.leaves.values())

    def _best_job(self, q: QueueInfo) -> Job | None:
        if q.is_leaf:
            heap = self.leaves.get(q.name)
            return heap[0][2] if heap else None
        best = self._best_child(q.children)
        return self._best_job(best) if best is not None else None

    def _best_child(self, queues: list[QueueInfo]) -> QueueInfo | None:
        cmp = self.ssn.hooks.queue_order
        best: QueueInfo | None = None
        best_job: Job | None = None
        for q in queues:
            job = self._best_job(q)
            if job is None:
                continue
            if best is None:
                best, best_job = q, job
                continue
            if cmp is None:
                order = -1 if (q.spec.creation, q.name) < (best.spec.creation, best.name) else 1
            else:
                assert best_job is not None
                order = cmp(q, best, self.request(job), self.request(best_job),
                            self._victims(q), self._victims(best))
                if self.victim:
                    order = -order
            if order < 0:
                best, best_job = q, job
        return best

    def _victims(self, q: QueueInfo) -> np.ndarray | None:
        if not self.victim:
            return None
        total = np.zeros(3)
        for name, vec in self.popped.items():
            leaf = self.ssn.queues.get(name)
            if leaf is not None and q in leaf.ancestors():
                total += vec
        return total

    def pop(self) -> Job | None:
        """The next job, or None when empty."""
        tops = [q for q in self.ssn.queues.values() if q.parent is None]
        q = self._best_child(tops)
        while q is not None and not q.is_leaf:
            q = self._best_child(q.children)
        if q is None:
            return None
        _key, _seq, job = heapq.heappop(self.leaves[q.name])
        if self.victim:
            self.popped[q.name] = self.popped.get(q.name, np.zeros(3)) + job_allocated(job)
        return job


class _Reverse:
    __slots__ = ("v",)

    def __init__(self, v: object) -> None:
        self.v = v

    def __lt__(self, other: _Reverse) -> bool:
        return bool(other.v < self.v)  # type: ignore[operator]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and bool(self.v == other.v)

    def __hash__(self) -> int:
        return hash(self.v)


def job_request(job: Job) -> np.ndarray:
    """Resources of the job's pending tasks (what it asks its queue for)."""
    from shoal.model.status import PodStatus

    total = np.zeros(3)
    for t in job.tasks:
        if t.status == PodStatus.PENDING:
            total += t.request_quota_vector()
    return total


def job_allocated(job: Job) -> np.ndarray:
    from shoal.model.status import ALLOCATED

    total = np.zeros(3)
    for t in job.tasks:
        if t.status & ALLOCATED:
            total += t.quota_vector()
    return total
