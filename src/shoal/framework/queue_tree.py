"""The queue tree of KAI's `JobsOrderByQueues`, shared by the job queue and the victim queue.

Every level is a Go heap of child queues (`GoHeap`); a leaf holds its jobs (the subclass decides
how). A push or pop only *marks* the touched leaf and its ancestors stale; a stale queue is
re-sifted (`Fix(0)`) only when it is at the top of its heap on the way down to the next leaf, and
the others keep their places. Comparisons read a queue's best leaf through the current tops of
its sub-heaps, stale or not. framework/job_queue.py says why this matters for the order.

Nodes name their parent instead of holding it, and heaps get the comparator per call, so the tree
has no reference cycle (sessions are freed without the cyclic garbage collector).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from shoal.framework.go_heap import GoHeap
from shoal.framework.jobs import QueueInfo

L = TypeVar("L")


class TreeNode(Generic[L]):
    """A queue in the tree: a heap of child nodes, or (a leaf) the jobs of a leaf queue."""

    __slots__ = ("kids", "leaf", "parent", "q", "stale")

    def __init__(self, q: QueueInfo, leaf: L | None) -> None:
        self.q = q
        self.leaf = leaf
        self.kids: GoHeap[TreeNode[L]] | None = GoHeap() if leaf is None else None
        self.stale = False
        self.parent: str | None = None  # a name, not the node: no reference cycle

    def empty(self) -> bool:
        return not self.leaf if self.kids is None else not self.kids


class QueueTree(Generic[L]):
    """The tree's mechanics; subclasses give the comparator `_less` and what a leaf holds."""

    def __init__(self) -> None:
        self.nodes: dict[str, TreeNode[L]] = {}
        self.roots: GoHeap[TreeNode[L]] = GoHeap()

    def _less(self, a: TreeNode[L], b: TreeNode[L]) -> bool:
        raise NotImplementedError

    def __bool__(self) -> bool:
        return bool(self.roots)

    # -- building ----------------------------------------------------------------------------
    def _leaf(self, q: QueueInfo, make: Callable[[], L]) -> tuple[TreeNode[L], bool]:
        """The node of leaf queue `q` and whether it is new (then fill it, and `_attach` it)."""
        node = self.nodes.get(q.name)
        if node is not None:
            return node, False
        node = self.nodes[q.name] = TreeNode(q, make())
        return node, True

    def _attach(self, node: TreeNode[L], new: bool) -> None:
        """After a push into `node`: link it if it is new, then mark its path stale (KAI's PushJob)."""
        if new:
            self._link(node)
        self._mark(node)

    def _link(self, child: TreeNode[L]) -> None:
        """Put a new node into its parent's heap, creating and linking missing ancestors."""
        parent_q = child.q.parent
        if parent_q is None:
            self.roots.push(child, self._less)
            return
        parent = self.nodes.get(parent_q.name)
        new = parent is None
        if parent is None:
            parent = self.nodes[parent_q.name] = TreeNode(parent_q, None)
        child.parent = parent.q.name
        assert parent.kids is not None
        parent.kids.push(child, self._less)
        if new:
            self._link(parent)

    def _mark(self, node: TreeNode[L]) -> None:
        while True:
            node.stale = True
            if node.parent is None:
                return
            node = self.nodes[node.parent]

    # -- reading -----------------------------------------------------------------------------
    def _best_leaf(self, node: TreeNode[L]) -> TreeNode[L]:
        """The leaf a node competes with: the tops of its sub-heaps, as they stand."""
        while node.kids is not None:
            node = node.kids.peek()
        return node

    def _next(self, heap: GoHeap[TreeNode[L]]) -> TreeNode[L] | None:
        while heap:
            node = heap.peek()
            if not node.stale:
                return None if node.empty() else node
            heap.fix(0, self._less)
            node.stale = False
        return None

    def _next_leaf(self) -> TreeNode[L] | None:
        """The leaf to pop from: down through the tops, re-sifting stale ones on the way."""
        node = self._next(self.roots)
        while node is not None and node.kids is not None:
            node = self._next(node.kids)
        return node

    def _after_pop(self, node: TreeNode[L]) -> None:
        """Drop emptied nodes (each is the top of its parent's heap: it was reached through the
        tops) and mark the rest of the path stale."""
        while node.empty():
            parent = self.nodes[node.parent] if node.parent is not None else None
            (parent.kids if parent is not None and parent.kids is not None else self.roots).pop(self._less)
            del self.nodes[node.q.name]
            if parent is None:
                return
            node = parent
        self._mark(node)
