"""Statements: tentative allocate / pipeline / evict with checkpoint, rollback and commit (kai-spec §3.5).

Every operation changes the session at once (nodes, task status, pod-set counters and queue
allocation); `rollback(cp)` undoes the operations after checkpoint `cp` in reverse order, restoring
the session exactly; `commit()` turns the surviving operations into decisions.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.framework.decisions import Bind, Evict, Pipeline
from shoal.framework.faults import track
from shoal.framework.jobs import Task
from shoal.framework.session import Session
from shoal.framework.volumes import volume_plan
from shoal.model.status import PodStatus


@dataclass(slots=True)
class _Op:
    kind: str  # allocate | pipeline | evict | unevict
    task: Task
    prev_status: PodStatus
    prev_node: int
    prev_groups: list[str]
    prev_portion: int
    reason: str = ""
    action: str = ""
    preemptor: str = ""
    #: A victim moved to another node, or to other devices of its own node: where it was keeps
    #: its releasing resources (see `pipeline`).
    kept_old: bool = False
    #: This pipeline recorded the task's copy on its old node (`Task.left_on`) ...
    left_old: bool = False
    #: ... and this was the record it replaced (None: there was none).
    left_prev: list[str] | None = None


class Statement:
    """An ordered log of tentative operations on one session."""

    def __init__(self, session: Session) -> None:
        self.ssn = session
        self.ops: list[_Op] = []
        track(session, self)  # rolled back if the job whose turn it is raises (framework.faults)

    # -- operations ------------------------------------------------------------------------
    def _move(self, task: Task, status: PodStatus, node: int, groups: list[str]) -> None:
        ssn = self.ssn
        if task.node >= 0:
            ssn.unplace(task, task.status)
        ssn.place(task, node, status, groups)

    def _record(self, kind: str, task: Task, reason: str = "", action: str = "", preemptor: str = "") -> _Op:
        op = _Op(kind, task, task.status, task.node, list(task.groups), task.portion, reason, action, preemptor)
        self.ops.append(op)
        return op

    def allocate(self, task: Task, node: int, groups: list[str] | None = None) -> None:
        """Place a pending task on `node` now (it will be bound on commit)."""
        self._record("allocate", task)
        self._move(task, PodStatus.ALLOCATED, node, groups or [])
        self.ssn.queue_add(task, +1)

    def pipeline(self, task: Task, node: int, groups: list[str] | None = None,
                 update_if_exists: bool = False) -> None:
        """Place a task on `node` to start once releasing resources are free.

        As KAI's `Statement.Pipeline`: when the pod is already on `node` (a victim evicted in this
        statement and re-placed on its own node, or one moved away from `node` earlier in the
        session, whose old copy KAI keeps on that node), it is un-evicted instead, unless
        `update_if_exists` or a shared pod moves to other GPU groups: the eviction of this
        statement is undone and the task stays where that eviction found it, not on `node`.
        """
        groups = groups or []
        on_node = task.node == node and task.status == PodStatus.RELEASING
        old_groups = task.groups if on_node else (task.left_on or {}).get(node)
        if (on_node or old_groups is not None) and not update_if_exists \
                and (not task.pod.gpu.is_shared or groups == old_groups):
            prev = self._evicted_from(task)
            if prev is not None:
                self._record("unevict", task)
                self._move(task, prev, task.node, task.groups)
                self.ssn.queue_add(task, +1)
                return
        op = self._record("pipeline", task)
        moved_on_node = task.node == node and task.pod.gpu.is_shared and groups != task.groups
        if task.status == PodStatus.RELEASING and task.node >= 0 and (task.node != node or moved_on_node):
            # A victim moved elsewhere still runs where it was until it is deleted: like KAI's
            # Statement.Pipeline, its old node keeps the pod's resources as releasing (they can
            # take pipelined pods, not allocated ones) and only the new place is charged. The
            # same holds for a GPU share moved to other devices of its own node: KAI's
            # `ConsolidateSharedPodInfoToDifferentGPU` adds the pipelined copy without taking the
            # pod off its old devices, which stay releasing (the node is charged twice).
            op.kept_old = True
            old = task.node
            if not moved_on_node:
                # KAI's copy of the pod on its old node is the latest one it had there.
                if task.left_on is None:
                    task.left_on = {}
                op.left_old, op.left_prev = True, task.left_on.get(task.node)
                task.left_on[task.node] = list(task.groups)
            self.ssn.place(task, node, PodStatus.PIPELINED, groups)
            if not moved_on_node:
                # The old node keeps the pod's resources, but the pod is no longer placed there:
                # a new state of that node for what reads the pods on it (`NodeState.token`).
                self._left(old, task.ordinal, op.prev_groups)
        else:
            self._move(task, PodStatus.PIPELINED, node, groups)
        self.ssn.queue_add(task, +1)

    def _left(self, node: int, change: int, groups: list[str]) -> None:
        """A moved task's old node loses (`change` = its ordinal) or, undone, gets back (`-1 -
        ordinal`) the pod, not its resources (`NodeState.settle`'s status -1)."""
        nodes = self.ssn.nodes
        before = nodes.token[node]
        nodes.bump(node)
        nodes.settle(node, before, change, -1, tuple(groups))

    def evict(self, task: Task, action: str, reason: str, preemptor: str = "") -> None:
        """Mark a running task Releasing on its node (deleted on commit)."""
        self._record("evict", task, action=action, reason=reason, preemptor=preemptor)
        self.ssn.queue_add(task, -1)
        self._move(task, PodStatus.RELEASING, task.node, task.groups)

    def _evicted_from(self, task: Task) -> PodStatus | None:
        for op in reversed(self.ops):
            if op.task is task and op.kind == "evict":
                return op.prev_status
        return None

    # -- control ---------------------------------------------------------------------------
    def checkpoint(self) -> int:
        return len(self.ops)

    def rollback(self, checkpoint: int) -> None:
        """Undo every operation after `checkpoint`, newest first; the session is as it was."""
        ssn = self.ssn
        while len(self.ops) > checkpoint:
            op = self.ops.pop()
            task = op.task
            if op.kind != "evict":
                ssn.queue_add(task, -1)
            if task.node >= 0:
                ssn.unplace(task, op.prev_status)
            else:
                ssn.set_status(task, op.prev_status)
            if op.kept_old:
                task.node, task.groups = op.prev_node, list(op.prev_groups)  # still accounted there
                ssn.placed[task.ordinal] = op.prev_node
                ssn.releasing[task.ordinal] = op.prev_status == PodStatus.RELEASING
                if op.left_old and task.left_on is not None:
                    if op.left_prev is None:
                        del task.left_on[op.prev_node]
                    else:
                        task.left_on[op.prev_node] = op.left_prev
                    task.left_on = task.left_on or None  # exactly as before the pipeline
                if op.left_old:
                    self._left(op.prev_node, -1 - task.ordinal, op.prev_groups)
            elif op.prev_node >= 0:
                ssn.place(task, op.prev_node, op.prev_status, op.prev_groups)
            # A task rolled back to pending keeps its stale AcceptedResource, like KAI.
            if op.kind == "evict":
                ssn.queue_add(task, +1)
            task.portion = op.prev_portion

    def discard(self) -> None:
        self.rollback(0)

    def commit(self) -> None:
        """Turn surviving operations into decisions; allocated tasks become Binding."""
        ssn = self.ssn
        d = ssn.decisions
        names = ssn.nodes.names
        # An eviction stands unless a later un-evict put the task back (a victim moved to another
        # node by a pipeline is still evicted: its pod is recreated there).
        undone: set[int] = set()
        unevicted: set[str] = set()
        for k in range(len(self.ops) - 1, -1, -1):
            op = self.ops[k]
            if op.kind == "unevict":
                unevicted.add(op.task.uid)
            elif op.kind == "evict" and op.task.uid in unevicted:
                undone.add(k)
                unevicted.discard(op.task.uid)
        for k, op in enumerate(self.ops):
            t = op.task
            pod = t.pod
            if op.kind == "allocate" and t.status == PodStatus.ALLOCATED:
                ssn.set_status(t, PodStatus.BINDING)
                shared = pod.gpu.is_shared
                rtype = "Fraction" if shared else ("MigInstance" if pod.mig else "Regular")
                volumes = volume_plan(ssn).volumes_of(t) if pod.volume_claims else ()
                d.binds.append(Bind(pod.uid, pod.name, pod.namespace, t.job.uid, names[t.node], tuple(t.groups),
                                    rtype, t.portion if shared else 0, volumes))
            elif op.kind == "pipeline" and t.status == PodStatus.PIPELINED:
                d.pipelines.append(Pipeline(pod.uid, pod.name, pod.namespace, t.job.uid, names[t.node],
                                            tuple(t.groups)))
            elif op.kind == "evict" and k not in undone:
                d.evictions.append(Evict(pod.uid, pod.name, pod.namespace, t.job.uid, names[op.prev_node],
                                         op.action, op.reason, op.preemptor))
        self.ops = []
