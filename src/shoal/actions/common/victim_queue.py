"""The victim-mode job order over the queue tree (KAI's `JobsOrderByQueues` with VictimQueue).

At every level of the tree the queue the proportion comparator ranks *last* goes first, with
the resources of the victims already taken from it and of its next victim counted as given up;
inside a leaf, the job that would be scheduled last goes first. The tree is KAI's: Go heaps
(`GoHeap`) whose touched entries are only marked stale and re-sifted when they reach the top on
the way down, comparisons reading each queue's best leaf through the current tops of its
sub-heaps (see framework/job_queue for why this matters). Jobs enter leaf by leaf in the order
of each leaf's first job uid, each leaf's first victim first (one of the orders Go's map
iteration can give KAI), so the same input gives the same order.

`copy()` gives an independent queue in the same state cheaply: the tree is small (queues), and
each leaf's initial jobs are a list sorted once and shared, read through a cursor.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from shoal.framework.job_queue import ZERO3, Reverse, job_allocated
from shoal.framework.jobs import Job, QueueInfo
from shoal.framework.queue_tree import QueueTree, TreeNode
from shoal.framework.session import Session


class Leaf:
    """The victims of one leaf queue, most victimisable first: the initial jobs as a list sorted
    once (shared by copies, read through a cursor) merged with a heap of pushed-back clones."""

    __slots__ = ("cursor", "heap", "keys", "ordered")

    def __init__(self, ordered: list[Job], keys: list[tuple[object, ...]]) -> None:
        self.ordered = ordered
        self.keys = keys
        self.cursor = 0
        self.heap: list[tuple[tuple[Reverse, ...], int, tuple[object, ...], Job]] = []

    def copy(self) -> Leaf:
        out = Leaf(self.ordered, self.keys)
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


_Node = TreeNode[Leaf]


class VictimQueue(QueueTree[Leaf]):
    """Victim-mode jobs by queue (see the module docstring). Pop returns the next victim job."""

    def __init__(self, ssn: Session, jobs: Iterable[Job] = ()) -> None:
        super().__init__()
        self.ssn = ssn
        self._seq = 0
        self.popped: dict[str, np.ndarray] = {}
        #: Per leaf: (popped total, next victim's share, their sum) as `_victims` last gave it.
        self._totals: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        by_queue: dict[str, list[tuple[tuple[object, ...], Job]]] = {}
        for job in jobs:
            if job.queue is not None and job.queue.is_leaf:
                by_queue.setdefault(job.queue.name, []).append((ssn.job_key(job), job))
        # KAI pops a fresh victim queue over the session as the solver found it (every scenario
        # before is discarded); shoal's solver pops lazily while a partial job's recorded victims
        # are evicted. So the queues (the victims' leaves and their ancestors) are compared as
        # they stood when this queue was built.
        self._frozen: dict[str, QueueInfo] = {}
        for entries in by_queue.values():
            q: QueueInfo | None = entries[0][1].queue
            while q is not None and q.name not in self._frozen:
                self._frozen[q.name] = replace(q, allocated=q.allocated.copy())
                q = q.parent
        first = {name: min(j.uid for _k, j in entries) for name, entries in by_queue.items()}
        for name in sorted(by_queue, key=lambda n: (first[n], n)):
            entries = sorted(by_queue[name], key=lambda e: e[0], reverse=True)
            leaf = Leaf([j for _k, j in entries], [k for k, _j in entries])
            q = entries[0][1].queue
            assert q is not None
            node, new = self._leaf(q, lambda leaf=leaf: leaf)  # type: ignore[misc]
            self._attach(node, new)

    def copy(self) -> VictimQueue:
        out = VictimQueue.__new__(VictimQueue)
        QueueTree.__init__(out)
        out.ssn = self.ssn
        out._frozen = self._frozen
        out._seq = self._seq
        out.popped = {k: v.copy() for k, v in self.popped.items()}
        out._totals = {}
        out.roots.items = [out._clone(n) for n in self.roots.items]
        return out

    def _clone(self, n: _Node) -> _Node:
        c: _Node = TreeNode(n.q, None if n.leaf is None else n.leaf.copy())
        c.stale, c.parent = n.stale, n.parent
        if n.kids is not None and c.kids is not None:
            c.kids.items = [self._clone(k) for k in n.kids.items]
        self.nodes[n.q.name] = c
        return c

    def push(self, job: Job) -> None:
        q = job.queue
        if q is None or not q.is_leaf:
            return
        node, new = self._leaf(q, lambda: Leaf([], []))
        assert node.leaf is not None
        self.push_back(node.leaf, job)
        self._attach(node, new)

    def push_back(self, leaf: Leaf, job: Job) -> None:
        """Put `job` into `leaf`'s heap; alone (without `push`'s marks), a push into the
        `sole_leaf` (see there)."""
        key = self.ssn.job_key(job)
        self._seq += 1
        heapq.heappush(leaf.heap, (tuple(Reverse(k) for k in key), self._seq, key, job))

    def sole_leaf(self) -> Leaf | None:
        """The jobs of the only leaf left, when the tree is a single path (else None).

        Then every further pop comes from that leaf and every push-back goes into it (a clone
        keeps its job's queue): the queue comparisons, stale marks and victim totals can no
        longer change the order, so a caller that only pops and pushes back may use the leaf's
        `pop` and `push_back` instead and leave this queue behind."""
        heap = self.roots
        while len(heap) == 1:
            node = heap.peek()
            if node.kids is None:
                return node.leaf
            heap = node.kids
        return None

    # -- order -------------------------------------------------------------------------------
    def _victims(self, node: _Node) -> np.ndarray:
        """The node's best leaf's victims, through the current tops: popped ones and the next."""
        leaf = self._best_leaf(node)
        assert leaf.leaf is not None
        name = leaf.q.name
        popped = self.popped.get(name, ZERO3)
        nxt = job_allocated(leaf.leaf.top())
        # The same sum object while neither part changed (a pop replaces the popped total; a
        # job's share is cached per version), so the comparator's conversions of it are reused.
        hit = self._totals.get(name)
        if hit is not None and hit[0] is popped and hit[1] is nxt:
            return hit[2]
        total: np.ndarray = popped + nxt
        self._totals[name] = (popped, nxt, total)
        return total

    def _less(self, a: _Node, b: _Node) -> bool:
        if a.empty():
            return False
        if b.empty():
            return True
        cmp = self.ssn.hooks.queue_order
        if cmp is None:
            order = 0
        else:
            frozen = self._frozen
            order = cmp(frozen.get(a.q.name, a.q), frozen.get(b.q.name, b.q), None, None,
                        self._victims(a), self._victims(b))
        if order != 0:
            return not order < 0
        return not (a.q.spec.creation, a.q.name) < (b.q.spec.creation, b.q.name)

    def pop(self) -> Job | None:
        """The next victim job (a clone when an elastic job was pushed back), or None."""
        node = self._next_leaf()
        if node is None or not node.leaf:
            return None
        job = node.leaf.pop()
        self.popped[node.q.name] = self.popped.get(node.q.name, ZERO3) + job_allocated(job)
        self._after_pop(node)
        return job
