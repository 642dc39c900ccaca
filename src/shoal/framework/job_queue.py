"""Jobs ordered by queue (kai-spec §3.6): pick the best queue at every level of the queue tree,
then the best job of the chosen leaf. Victim mode reverses both orders (most-over queue first).

Like KAI, each level is a heap of child queues ordered by the queue-order comparator over the
queues' current state and best jobs. Popping a job takes its leaf and ancestors out of their
parents' heaps; they go back (re-ordered by their new state) before the next push or pop, so a
pop costs O(depth x log(queues)) comparisons. Ties the comparator leaves open go to the older
queue, then the name, so the order is total.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

import numpy as np

from shoal.framework.faults import isolated
from shoal.framework.jobs import Job, QueueInfo
from shoal.framework.session import Session
from shoal.model.status import ALLOCATED, PodStatus

ROOT = ""


class JobsByQueue:
    """A priority structure of jobs over the queue tree. Pop returns the next job to try."""

    def __init__(self, ssn: Session, jobs: Iterable[Job], *, victim_mode: bool = False,
                 request: Callable[[Job], np.ndarray] | None = None, depth: int | None = None,
                 keys: dict[str, tuple[int, tuple[object, ...]]] | None = None) -> None:
        """`keys`: a memo of the jobs' order keys (job uid -> (job version, key)) shared by queues
        of one mode built over and over in one session; valid because the plugins' job keys read
        only the job's own state, which moves its version."""
        self.ssn = ssn
        self.victim = victim_mode
        self.request = request or job_request
        self.depth = depth
        self._seq = 0
        self.leaves: dict[str, list[tuple[tuple[object, ...], int, Job]]] = {}
        self.heaps: dict[str, list[_QEntry]] = {}
        self.in_heap: set[str] = set()
        self.popped: dict[str, np.ndarray] = {}
        self._out: list[QueueInfo] = []
        by_leaf: dict[str, list[tuple[tuple[object, ...], int, Job]]] = {}
        for job in jobs:
            if job.queue is None or job.fault:
                continue
            key = self._memo_key(job, keys)
            if key is None:
                continue
            self._seq += 1
            by_leaf.setdefault(job.queue.name, []).append((key, self._seq, job))
        for name, entries in by_leaf.items():
            if self.depth is not None and len(entries) > self.depth:
                # Only the best `depth` jobs of a queue are tried in this action (KAI's queueDepthPerAction).
                entries = heapq.nsmallest(self.depth, entries)
            heapq.heapify(entries)
            self.leaves[name] = entries
        for name in list(self.leaves):
            self._attach(self.ssn.queues[name])

    # -- jobs --------------------------------------------------------------------------------
    def _memo_key(self, job: Job, keys: dict[str, tuple[int, tuple[object, ...]]] | None) -> tuple[object, ...] | None:
        """The job's order key (from `keys` while the job's version stands); None if it raised."""
        hit = keys.get(job.uid) if keys is not None else None
        if hit is not None and hit[0] == job.version:
            return hit[1]
        key = None
        with isolated(self.ssn, job, "job order"):  # a job whose order key raises is skipped
            key = self._key(job)
        if key is not None and keys is not None:
            keys[job.uid] = (job.version, key)
        return key

    def _key(self, job: Job) -> tuple[object, ...]:
        key = self.ssn.job_key(job)
        return tuple(_Reverse(k) for k in key) if self.victim else key

    def _push_job(self, job: Job) -> bool:
        q = job.queue
        if q is None:
            return False
        heap = self.leaves.setdefault(q.name, [])
        self._seq += 1
        heapq.heappush(heap, (self._key(job), self._seq, job))
        if self.depth is not None and len(heap) > self.depth:
            heap.remove(max(heap))
            heapq.heapify(heap)
        return True

    def push(self, job: Job) -> None:
        self._restore()
        if job.queue is None:
            return
        self._detach(job.queue)
        self._push_job(job)
        self._restore()

    def __bool__(self) -> bool:
        return any(self.leaves.values())

    # -- queue heaps -------------------------------------------------------------------------
    def best_job(self, q: QueueInfo) -> Job | None:
        if q.is_leaf:
            jobs = self.leaves.get(q.name)
            return jobs[0][2] if jobs else None
        queues = self.heaps.get(q.name)
        return self.best_job(queues[0].q) if queues else None

    def _attach(self, q: QueueInfo) -> None:
        """Insert q (if it has jobs) and its ancestors into their parents' heaps."""
        node: QueueInfo | None = q
        while node is not None:
            if node.name in self.in_heap:
                return
            if self.best_job(node) is not None:  # an emptied queue stays out; its parent may not
                parent = node.parent.name if node.parent is not None else ROOT
                heapq.heappush(self.heaps.setdefault(parent, []), _QEntry(self, node))
                self.in_heap.add(node.name)
            node = node.parent

    def _detach(self, q: QueueInfo) -> None:
        """Take q and its ancestors out of their parents' heaps (their order may change)."""
        for node in q.ancestors():
            if node.name not in self.in_heap:
                continue
            parent = node.parent.name if node.parent is not None else ROOT
            heap = self.heaps[parent]
            if heap[0].q is node:
                heapq.heappop(heap)
            else:
                k = next(k for k, e in enumerate(heap) if e.q is node)
                last = heap.pop()
                if k < len(heap):
                    heap[k] = last
                    heapq._siftup(heap, k)  # type: ignore[attr-defined]  # O(log n) removal
                    heapq._siftdown(heap, 0, k)  # type: ignore[attr-defined]
            self.in_heap.discard(node.name)
        self._out.append(q)

    def _restore(self) -> None:
        while self._out:
            self._attach(self._out.pop())

    def pop(self) -> Job | None:
        """The next job, or None when empty."""
        self._restore()
        heap = self.heaps.get(ROOT)
        if not heap:
            return None
        q = heap[0].q
        while not q.is_leaf:
            q = self.heaps[q.name][0].q
        self._detach(q)
        _key, _seq, job = heapq.heappop(self.leaves[q.name])
        if self.victim:
            self.popped[q.name] = self.popped.get(q.name, np.zeros(3)) + job_allocated(job)
        return job

    def jobs_in(self, leaf: str) -> list[Job]:
        return [e[2] for e in self.leaves.get(leaf, [])]

    def drop_leaf(self, leaf: str) -> list[Job]:
        """Remove a leaf queue and all its jobs (none of them will be popped); returns the jobs."""
        self._restore()
        q = self.ssn.queues[leaf]
        jobs = [e[2] for e in self.leaves.pop(leaf, [])]
        self.leaves[leaf] = []
        self._detach(q)
        self._restore()
        return jobs

    def victims_of(self, q: QueueInfo) -> np.ndarray | None:
        if not self.victim:
            return None
        total = np.zeros(3)
        for name, vec in self.popped.items():
            leaf = self.ssn.queues.get(name)
            if leaf is not None and q in leaf.ancestors():
                total += vec
        return total


class _QEntry:
    """A queue in its parent's heap; `<` is the session's queue order (reversed in victim mode)."""

    __slots__ = ("jq", "q")

    def __init__(self, jq: JobsByQueue, q: QueueInfo) -> None:
        self.jq = jq
        self.q = q

    def __lt__(self, other: _QEntry) -> bool:
        jq, a, b = self.jq, self.q, other.q
        cmp = jq.ssn.hooks.queue_order
        order = 0
        if cmp is not None:
            ja, jb = jq.best_job(a), jq.best_job(b)
            order = cmp(a, b, jq.request(ja) if ja else None, jq.request(jb) if jb else None,
                        jq.victims_of(a), jq.victims_of(b))
            if jq.victim:
                order = -order
        if order == 0:
            return (a.spec.creation, a.name) < (b.spec.creation, b.name)
        return order < 0


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
    """Resources of the job's pending tasks (what it asks its queue for). Cached per job version."""
    return job.cached("request", job.version, lambda: _pending_request(job))


def _pending_request(job: Job) -> np.ndarray:
    out = np.zeros(3)
    for t in job.tasks:
        if t.status == PodStatus.PENDING:
            out += t.request_quota()
    return out


def job_allocated(job: Job) -> np.ndarray:
    """Queue share of the job's allocated tasks; do not modify the result. Cached on the job with
    the version of the job that owns the tasks: a victim batch is a clone whose tasks bump the
    original's version, not the clone's (a Job's task list itself never changes)."""
    if not job.tasks:
        return np.zeros(3)
    return job.cached("allocated", job.tasks[0].job.version, lambda: _allocated_share(job))


def _allocated_share(job: Job) -> np.ndarray:
    total = np.zeros(3)
    for t in job.tasks:
        if t.status & ALLOCATED:
            total += t.quota_vector()
    return total
