"""Jobs ordered by queue (kai-spec §3.6): pick the best queue at every level of the queue tree,
then the best job of the chosen leaf. Victim mode reverses both orders (most-over queue first).

The structure is KAI's `JobsOrderByQueues`, rule for rule, because its order is not simply "the
best queue by the current state": every level is a Go heap of child queues (`GoHeap`), and a
pop or push only *marks* the touched leaf and its ancestors stale. A stale queue is re-sifted
(`Fix(0)`) only when it is at the top of its heap on the way down to the next leaf; the others
keep their places. Comparing two queues reads each one's best job through the *current* tops of
its sub-heaps, stale or not. So after a queue's best job failed, its parent still competes with
the job that was next in the stale sub-heap (KAI: a department whose old best child holds an
unplaceable 128-GPU job loses to a higher-priority department, though its other child has a
15-GPU job that would fit). Jobs enter in uid order (KAI: Go map order), so the same input gives
the same order. Ties the comparator leaves open go to the older queue, then the name.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Iterable
from operator import itemgetter

import numpy as np

from shoal.framework.faults import isolated
from shoal.framework.jobs import Job, QueueInfo
from shoal.framework.queue_tree import QueueTree, TreeNode
from shoal.framework.session import Session
from shoal.model.status import ALLOCATED_SET, PodStatus

_Entry = tuple[tuple[object, ...], int, Job]
_Node = TreeNode[list[_Entry]]

#: Job uid -> (job version, order key): see `JobsByQueue.__init__`'s `keys`.
KeyMemo = dict[str, tuple[int, tuple[object, ...]]]


class JobsByQueue(QueueTree[list[_Entry]]):
    """A priority structure of jobs over the queue tree. Pop returns the next job to try.
    A leaf holds its jobs in a heap of (key, sequence, job): job keys are a static total order."""

    def __init__(self, ssn: Session, jobs: Iterable[Job], *, victim_mode: bool = False,
                 request: Callable[[Job], np.ndarray] | None = None, depth: int | None = None,
                 keys: KeyMemo | None = None) -> None:
        """`keys`: a memo of the jobs' order keys (job uid -> (job version, key)) shared by queues
        of one mode built over and over in one session; valid because the plugins' job keys read
        only the job's own state, which moves its version."""
        super().__init__()
        self.ssn = ssn
        self.victim = victim_mode
        self.request = request or job_request
        self.depth = depth
        self._seq = 0
        self.popped: dict[str, np.ndarray] = {}
        keyed: list[tuple[str, Job, tuple[object, ...]]] = []
        add = keyed.append
        memo = keys if keys is not None else {}
        for job in jobs:  # thousands of victim jobs per simulation: the memo is read inline
            if job.queue is None or job.fault:
                continue
            hit = memo.get(job.uid)
            key = hit[1] if hit is not None and hit[0] == job.version else self._memo_key(job, keys)
            if key is not None:
                add((job.uid, job, key))
        keyed.sort(key=itemgetter(0))  # uids are unique: the job and key are never compared
        if depth is None:
            self._push_all(keyed)
        else:
            for _uid, job, key in keyed:
                self._push(job, key)

    # -- jobs --------------------------------------------------------------------------------
    def _memo_key(self, job: Job, keys: KeyMemo | None) -> tuple[object, ...] | None:
        """The job's order key (from `keys` while the job's version stands); None if it raised."""
        return order_key(self.ssn, job, keys, self.victim)

    def _key(self, job: Job) -> tuple[object, ...]:
        return _plain_key(self.ssn, job, self.victim)

    def push(self, job: Job) -> None:
        if job.queue is not None and job.queue.is_leaf:
            self._push(job, self._key(job))

    def _push(self, job: Job, key: tuple[object, ...]) -> None:
        assert job.queue is not None
        node, new = self._leaf(job.queue, list)
        jobs = node.leaf
        assert jobs is not None
        self._seq += 1
        heapq.heappush(jobs, (key, self._seq, job))
        if self.depth is not None and len(jobs) > self.depth:
            # Only the best `depth` jobs of a queue are tried in this action (KAI's queueDepthPerAction).
            jobs.remove(max(jobs))
            heapq.heapify(jobs)
        self._attach(node, new)

    def _push_all(self, keyed: list[tuple[str, Job, tuple[object, ...]]]) -> None:
        """`_push` of each job in turn (uid order, into an empty tree), in fewer steps. A leaf's
        heap is only read through its top (the least of a total order: key, then sequence
        number), and only when a new leaf is linked (the heap pushes compare tops) and after the
        build. So each leaf's entries are gathered first, and before each link every linked leaf
        is given exactly the entries pushed before the new leaf's first one. Every leaf and its
        ancestors end up stale, as after each push."""
        groups: dict[str, list[_Entry]] = {}
        order: list[QueueInfo] = []  # leaves by their first job
        seq = self._seq
        for _uid, job, key in keyed:
            q = job.queue
            assert q is not None
            seq += 1
            entries = groups.get(q.name)
            if entries is None:
                entries = groups[q.name] = []
                order.append(q)
            entries.append((key, seq, job))
        self._seq = seq
        linked: list[tuple[_Node, list[_Entry]]] = []
        for q in order:
            entries = groups[q.name]
            first = entries[0][1]
            for node, got in linked:
                upto = bisect_left(got, first, key=_seq_of)
                if len(node.leaf) != upto:  # type: ignore[arg-type]
                    node.leaf = got[:upto]
                    heapq.heapify(node.leaf)
            node, new = self._leaf(q, list)
            assert new and node.leaf is not None, "built into an empty tree only"
            node.leaf.append(entries[0])
            self._link(node)
            linked.append((node, entries))
        for node, got in linked:
            if len(node.leaf) != len(got):  # type: ignore[arg-type]
                node.leaf = list(got)
                heapq.heapify(node.leaf)
            self._mark(node)

    # -- order -------------------------------------------------------------------------------
    def _less(self, a: _Node, b: _Node) -> bool:
        if a.empty():
            return not self.victim
        if b.empty():
            return self.victim
        la, lb = self._best_leaf(a), self._best_leaf(b)
        assert la.leaf and lb.leaf
        ja, jb = la.leaf[0][2], lb.leaf[0][2]
        cmp = self.ssn.hooks.queue_order
        order = 0
        if cmp is not None:
            if self.victim:
                order = cmp(a.q, b.q, None, None, self._victims(la, ja), self._victims(lb, jb))
            else:
                order = cmp(a.q, b.q, self.request(ja), self.request(jb), None, None)
        if order != 0:
            first = order < 0
        else:
            first = (a.q.spec.creation, a.q.name) < (b.q.spec.creation, b.q.name)
        return not first if self.victim else first

    def _victims(self, leaf: _Node, nxt: Job) -> np.ndarray:
        """KAI's victims of a leaf: the jobs already popped from it and its next one."""
        total: np.ndarray = self.popped.get(leaf.q.name, ZERO3) + job_allocated(nxt)
        return total

    def pop(self) -> Job | None:
        """The next job, or None when empty."""
        node = self._next_leaf()
        if node is None or not node.leaf:
            return None
        _key, _seq, job = heapq.heappop(node.leaf)
        if self.victim:
            self.popped[node.q.name] = self.popped.get(node.q.name, ZERO3) + job_allocated(job)
        self._after_pop(node)
        return job


ZERO3 = np.zeros(3)


def _plain_key(ssn: Session, job: Job, victim: bool) -> tuple[object, ...]:
    key = ssn.job_key(job)
    return tuple(Reverse(k) for k in key) if victim else key


def order_key(ssn: Session, job: Job, keys: KeyMemo | None, victim: bool = False) -> tuple[object, ...] | None:
    """The job's order key in a `JobsByQueue` of mode `victim`, read from the memo `keys` while the
    job's version stands; None when the plugins raised (the job is then faulted and left out of
    the queue, as `JobsByQueue` leaves it)."""
    hit = keys.get(job.uid) if keys is not None else None
    if hit is not None and hit[0] == job.version:
        return hit[1]
    key = None
    with isolated(ssn, job, "job order"):  # a job whose order key raises is skipped
        key = _plain_key(ssn, job, victim)
    if key is not None and keys is not None:
        keys[job.uid] = (job.version, key)
    return key


def _seq_of(e: _Entry) -> int:
    return e[1]


class Reverse:
    """Reverses the order of one key element (strings included)."""

    __slots__ = ("v",)

    def __init__(self, v: object) -> None:
        self.v = v

    def __lt__(self, other: Reverse) -> bool:
        return bool(other.v < self.v)  # type: ignore[operator]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reverse) and bool(self.v == other.v)

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


def _bias(job: Job) -> tuple[float, float, float]:
    # Only the session's own job carries it (KAI's clones recount their tasks).
    return job.pg.allocated_bias if job.tasks[0].job is job else (0.0, 0.0, 0.0)


def _allocated_share(job: Job) -> np.ndarray:
    # Summed in plain floats in the order float64 vectors would be: the same values.
    gpu, cpu, mem = _bias(job)
    for t in job.tasks:
        if t.status in ALLOCATED_SET:
            g, c, m = t.quota()
            gpu, cpu, mem = gpu + g, cpu + c, mem + m
    return np.array([gpu, cpu, mem])
