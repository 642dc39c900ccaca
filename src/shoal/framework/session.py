"""The session: one cycle's mutable view of the snapshot, plus the hooks plugins register.

Built from a `ClusterSnapshot` (never mutated); holds node matrices, tasks, jobs and queues.
Plugins register ordering keys, node scorers, predicates and capacity checks on open; actions
change state only through `Statement`s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shoal.framework.config import SchedulerConfig
from shoal.framework.cycle_state import CycleState
from shoal.framework.decisions import Decisions
from shoal.framework.jobs import Job, PodSet, Task, build_queue_tree
from shoal.framework.nodestate import NodeState
from shoal.framework.placement import place_running
from shoal.model.pod import Pod, portion_for_memory
from shoal.model.podgroup import DEFAULT_POD_SET
from shoal.model.resources import BASE_RESOURCES, CPU_COL, GPU_COL, MEM_COL, MILLI, PODS_COL, ResourceSpace
from shoal.model.snapshot import ClusterSnapshot
from shoal.model.status import ALLOCATED_SET, PodStatus
from shoal.model.topology import TopologyConstraint

logger = logging.getLogger(__name__)

#: A scorer gets the node rows to score (None = all nodes) and returns one score per row.
NodeScorer = Callable[["Session", Task, np.ndarray | None], np.ndarray | float]
#: A predicate returns a boolean mask over nodes (True = may place), and the reason when False.
#: Predicates are node-local (a node's answer changes only when the node does), so they can be cached.
Predicate = Callable[["Session", Task, np.ndarray | None], tuple[np.ndarray, str] | None]
PrePredicate = Callable[["Session", Task], str | None]
#: A filter that is not node-local (it reads where other pods are: inter-pod affinity, topology
#: spread): (session, task) -> (mask over all nodes, reason), or None when it does not apply to
#: the task. Evaluated at pick time, never cached.
DynamicFilter = Callable[["Session", Task], tuple[np.ndarray, str] | None]
CapacityCheck = Callable[["Session", Job, list[Task]], str | None]
TaskCapacityCheck = Callable[["Session", Task, int], str | None]
JobKey = Callable[[Job], tuple[Any, ...]]  # reads the job's own state only: valid per job version
TaskKey = Callable[[Task], tuple[Any, ...]]
#: KAI's SubsetNodes (kai-spec §3.8, §3.12): (session, job, (sub)group name, its topology constraint,
#: the pod sets under it, the tasks to place there, the incoming node-set mask) -> the node-set masks
#: to try, in order (may be lazy); none = the group cannot be placed (the hook records why on the job).
NodeSetsFn = Callable[["Session", Job, str, TopologyConstraint | None, list[PodSet], list[Task], np.ndarray],
                      Iterable[np.ndarray]]
PreJobAllocation = Callable[["Session", Job], None]
#: Scores that depend on the job being allocated (topology's preferred-level scores), never cached:
#: (session, task) -> per-node scores, or None when the task's group has none.
GroupScorer = Callable[["Session", Task], np.ndarray | None]
#: May `job` (asking the queue-share vector) start a reclaim at all?
ReclaimGate = Callable[["Session", Job, np.ndarray], bool]
#: Victim filter: may `victim` be taken for `preemptor`?
VictimFilter = Callable[["Session", Job, Job], bool]
#: Scenario validator: preemptor, the preemptor's tasks the scenario places (KAI's partial job, the
#: scenario's preemptor: what it asks for is these tasks' request, not the whole job's), victim
#: tasks per victim job uid (after the simulation).
ScenarioValidator = Callable[["Session", Job, list[Task], dict[str, list[Task]]], bool]


@dataclass(slots=True)
class Hooks:
    """Callbacks registered by plugins at session open (order = plugin order)."""

    job_keys: list[JobKey] = field(default_factory=list)
    #: Task order keys. A key that reads pod labels declares them in `task_key_labels`: tasks of
    #: a job without any of them (and without a task priority) skip the keys (all equal).
    task_keys: list[TaskKey] = field(default_factory=list)
    task_key_labels: set[str] = field(default_factory=set)
    node_scorers: list[NodeScorer] = field(default_factory=list)
    #: Pick-time adjusters of the summed node scores, for terms that are not node-local (they
    #: depend on the whole cluster, so node choice cannot cache them): adjust(session, task,
    #: candidate rows (ascending), their cached scores) -> adjusted scores for those rows, or
    #: None: no change for this task, nor for any task of its kind (equal node-choice signature)
    #: in this session, so node choice stops asking. Applied in order by
    #: `actions.node_choice.best_node`; an empty list costs nothing.
    score_adjusters: list[Callable[[Session, Task, np.ndarray, np.ndarray], np.ndarray | None]] = field(
        default_factory=list)
    predicates: list[Predicate] = field(default_factory=list)
    dynamic_filters: list[DynamicFilter] = field(default_factory=list)
    pre_predicates: list[PrePredicate] = field(default_factory=list)
    job_capacity: list[CapacityCheck] = field(default_factory=list)
    task_capacity: list[TaskCapacityCheck] = field(default_factory=list)
    #: Device order for shared GPUs: key(session, node, group, used_mib) -> float, higher first.
    gpu_order: list[Callable[[Session, int, str | None], float]] = field(default_factory=list)
    queue_order: Callable[..., int] | None = None
    #: Node-set splitters, applied in order to every node set of the previous one.
    node_sets: list[NodeSetsFn] = field(default_factory=list)
    #: Called once at the start of every job allocation attempt (topology resets its scores).
    pre_job_allocation: list[PreJobAllocation] = field(default_factory=list)
    group_scorers: list[GroupScorer] = field(default_factory=list)
    can_reclaim: list[ReclaimGate] = field(default_factory=list)
    reclaim_victim_filters: list[VictimFilter] = field(default_factory=list)
    preempt_victim_filters: list[VictimFilter] = field(default_factory=list)
    reclaim_validators: list[ScenarioValidator] = field(default_factory=list)
    preempt_validators: list[ScenarioValidator] = field(default_factory=list)
    #: Predicates answering from the node and the task alone: node choice caches them per node version.
    static_predicates: set[Predicate] = field(default_factory=set)
    #: Added to every node where the task fits on idle resources (nodeavailability); 0 = off.
    availability_score: float = 0.0
    #: Task capacity checks run per task during allocation (the predicates plugin's quota check).
    per_task_capacity: bool = False


class Session:
    """State of one scheduling cycle. `now` is the snapshot's time; no clock is read."""

    def __init__(self, snapshot: ClusterSnapshot, config: SchedulerConfig) -> None:
        self.snapshot = snapshot
        self.config = config
        self.now = snapshot.now
        self.hooks = Hooks()
        #: What actions memoise during this cycle (typed keys; see framework.cycle_state).
        self.state = CycleState()
        self.decisions = Decisions()
        self.space = self._build_space(snapshot)
        self._vec_cache: dict[tuple[object, ...], np.ndarray] = {}
        #: id(request vector) -> (vector, non-zero columns, amounts); see framework.fit.
        self.column_memo: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.nodes = NodeState(snapshot.nodes, self.space)
        self.queues = build_queue_tree(snapshot.queues)
        self.tasks: dict[str, Task] = {}
        self.jobs: dict[str, Job] = {}
        self._build_jobs(snapshot)
        #: Every task in a fixed order, and per task: its node while active-used (else -1) and
        #: whether it is Releasing there; what inter-pod constraints count (see framework.podindex).
        self.task_list = list(self.tasks.values())
        for k, t in enumerate(self.task_list):
            t.ordinal = k
        self.placed = np.full(len(self.task_list), -1, dtype=np.int64)
        self.releasing = np.zeros(len(self.task_list), dtype=bool)
        self._place_running_tasks()
        self._account_queues()

    # -- building ------------------------------------------------------------------------
    @staticmethod
    def _build_space(snapshot: ClusterSnapshot) -> ResourceSpace:
        space = ResourceSpace()
        extra: set[str] = set()
        for node in snapshot.nodes:
            extra.update(k for k in node.allocatable if k not in BASE_RESOURCES)
        for pod in snapshot.pods:
            extra.update(pod.mig)
            extra.update(pod.extended)
        for name in sorted(extra):
            space.add(name)
        return space

    def task_vector(self, pod: Pod) -> np.ndarray:
        """The pod's regular resources as a vector (GPU column: whole GPUs only). Shared between
        pods with equal requests, so it must never be modified in place."""
        key: tuple[object, ...] = (pod.cpu_milli, pod.memory, 0 if pod.gpu.is_shared else pod.gpu.whole,
                                   pod.dra_gpus)
        if pod.mig or pod.extended:
            key += (tuple(pod.mig.items()), tuple(pod.extended.items()))
        cache = self._vec_cache
        v = cache.get(key)
        if v is not None:
            return v
        v = self.space.zeros()
        v[CPU_COL] = pod.cpu_milli
        v[MEM_COL] = pod.memory
        v[PODS_COL] = 1
        if not pod.gpu.is_shared:
            v[GPU_COL] = pod.gpu.whole * MILLI
        v[GPU_COL] += pod.dra_gpus * MILLI  # DRA-claimed GPUs occupy whole devices (kai-spec §3.15)
        for name, amount in (*pod.mig.items(), *pod.extended.items()):
            v[self.space.index[name]] = amount
        v.flags.writeable = False
        cache[key] = v
        return v

    def _build_jobs(self, snapshot: ClusterSnapshot) -> None:
        for pg in snapshot.podgroups:
            queue = self.queues.get(pg.queue)
            job = Job(pg=pg, queue=queue, last_start_time=pg.last_start_time, stale_since=pg.stale_since)
            for spec in pg.pod_sets:
                job.pod_sets[spec.name] = PodSet(spec)
            self.jobs[pg.uid] = job
        for pod in snapshot.pods:
            job_or_none = self.jobs.get(pod.job)
            if job_or_none is None:
                continue
            ps = job_or_none.pod_sets.get(pod.subgroup or DEFAULT_POD_SET)
            if ps is None:
                continue  # a pod naming no pod set is not part of the gang (KAI drops it)
            task = Task(pod, self.task_vector(pod))
            task.job = job_or_none
            task.pod_set = ps
            ps.tasks.append(task)
            ps.count(task.status, 1)
            if task.status == PodStatus.PENDING:
                job_or_none.pending += 1
            job_or_none.tasks.append(task)
            self.tasks[task.uid] = task

    def _place_running_tasks(self) -> None:
        """Put every active-used pod on its node (framework.placement)."""
        place_running(self)

    def _account_queues(self) -> None:
        """Queue allocation (allocated statuses) and request (plus pending pods), summed per leaf
        in plain floats first, then added to every ancestor once."""
        alloc: dict[str, list[float]] = {}
        alloc_np: dict[str, list[float]] = {}
        req: dict[str, list[float]] = {}
        for task in self.tasks.values():
            q = task.job.queue
            if q is None:
                continue
            st = task.status
            if st in ALLOCATED_SET:
                p = task.pod
                gpu = task.accepted_gpu if p.gpu.is_shared else p.gpu_quota_milli
                for acc in (alloc, req) if task.job.preemptible else (alloc, req, alloc_np):
                    v = acc.setdefault(q.name, [0.0, 0.0, 0.0])
                    v[0] += gpu
                    v[1] += p.cpu_milli
                    v[2] += p.memory
            elif st == PodStatus.PENDING:
                r = task.request_quota()
                v = req.setdefault(q.name, [0.0, 0.0, 0.0])
                v[0] += r[0]
                v[1] += r[1]
                v[2] += r[2]
        for acc, attr in ((alloc, "allocated"), (alloc_np, "allocated_np"), (req, "request")):
            for name, vec in acc.items():
                arr = np.array(vec)
                for a in self.queues[name].ancestors():
                    getattr(a, attr)[:] += arr

    # -- placement primitives (statements use these) ---------------------------------------
    def shared_mib(self, task: Task, i: int) -> int:
        """Device memory (MiB) one device of a shared task takes on node i."""
        g = task.pod.gpu
        if g.is_gpu_memory:
            return g.memory_mib
        return g.portion_milli * int(self.nodes.gpu_memory[i]) // MILLI

    def node_portion(self, task: Task, i: int) -> int:
        """Portion (milli) per device a shared task receives on node i."""
        g = task.pod.gpu
        if g.is_gpu_memory:
            return portion_for_memory(g.memory_mib, int(self.nodes.gpu_memory[i]))
        return g.portion_milli

    def place(self, task: Task, i: int, status: PodStatus, groups: list[str]) -> None:
        """Put `task` on node i with `status` (an active-used status) and account it."""
        before = self.nodes.token[i]
        self.set_status(task, status)
        task.node = i
        task.groups = list(groups)
        self.placed[task.ordinal] = i
        self.releasing[task.ordinal] = status == PodStatus.RELEASING
        self.nodes.add(i, task.vec, status)
        if task.pod.gpu.is_shared:
            mib = self.shared_mib(task, i)
            for g in groups:
                self.nodes.add_shared(i, g, mib, status)
            task.portion = self.node_portion(task, i)
            task.accepted_gpu = task.portion * len(groups)
        else:
            task.accepted_gpu = task.pod.gpu_quota_milli
        # What the node now holds follows from what it held and this task, status and devices.
        self.nodes.settle(i, before, task.ordinal, status, tuple(groups))

    def unplace(self, task: Task, status: PodStatus) -> None:
        """Take `task` off its node and give it `status` (not active-used)."""
        i = task.node
        if i >= 0:
            before = self.nodes.token[i]
            self.nodes.remove(i, task.vec, task.status)
            if task.pod.gpu.is_shared:
                mib = self.shared_mib(task, i)
                for g in task.groups:
                    self.nodes.add_shared(i, g, mib, task.status, sign=-1)
            self.nodes.settle(i, before, -1 - task.ordinal, task.status, tuple(task.groups))
        task.node = -1
        task.groups = []
        self.placed[task.ordinal] = -1
        self.releasing[task.ordinal] = False
        self.set_status(task, status)

    def set_status(self, task: Task, status: PodStatus) -> None:
        if task.status != status:
            task.pod_set.count(task.status, -1)
            task.pod_set.count(status, 1)
            if task.status == PodStatus.PENDING:
                task.job.pending -= 1
            elif status == PodStatus.PENDING:
                task.job.pending += 1
            task.status = status
            task.job.version += 1

    def queue_add(self, task: Task, sign: int) -> None:
        """Event handler: the task's share joins (+1) or leaves (-1) its queue and ancestors."""
        q = task.job.queue
        if q is None:
            return
        vec = task.quota_vector()
        np_job = not task.job.preemptible
        # x - v is exactly x + (-v) in floating point: no negated copy is needed.
        for a in q.ancestors():
            a.alloc_version += 1
            if sign == 1:
                a.allocated += vec
                if np_job:
                    a.allocated_np += vec
            else:
                a.allocated -= vec
                if np_job:
                    a.allocated_np -= vec

    # -- helpers for actions ---------------------------------------------------------------
    def job_key(self, job: Job) -> tuple[Any, ...]:
        """The job's place in job order (plugin keys, then creation and uid), kept on the job
        until its version moves: the plugins' job keys read only the job's own state, and every
        change of a task's status moves the version (a victim clone's counters never change)."""
        hit = job.order_key
        if hit is not None and hit[0] == job.version:
            return hit[1]
        key: tuple[Any, ...] = ()
        for fn in self.hooks.job_keys:
            key += fn(job)
        out = (*key, job.pg.creation, job.uid)
        job.order_key = (job.version, out)
        return out

    def task_key(self, task: Task) -> tuple[Any, ...]:
        key: tuple[Any, ...] = ()
        for fn in self.hooks.task_keys:
            key += fn(task)
        return (*key, task.pod.creation, task.uid)

    def _order_matters(self, pod: Pod) -> bool:
        labels = self.hooks.task_key_labels
        return pod.has_task_priority or (bool(labels) and bool(pod.labels) and not labels.isdisjoint(pod.labels))

    def sort_tasks(self) -> None:
        """Compute the task order of every job (after plugins registered their keys)."""
        for job in self.jobs.values():
            if len(job.tasks) < 2:
                continue
            if not any(self._order_matters(t.pod) for t in job.tasks):
                # No label a task key reads and no task priority: the keys are equal for every task.
                job.tasks.sort(key=lambda t: (t.pod.creation, t.uid))
                for ps in job.pod_sets.values():
                    ps.tasks.sort(key=lambda t: (t.pod.creation, t.uid))
                for i, t in enumerate(job.tasks):
                    t.order_key = (i,)
                continue
            for t in job.tasks:
                t.order_key = self.task_key(t)
            job.tasks.sort(key=lambda t: t.order_key)
            for ps in job.pod_sets.values():
                ps.tasks.sort(key=lambda t: t.order_key)

    def release(self) -> None:
        """Break the session's reference cycles (task <-> job <-> pod set, queue parent <-> child,
        plugin hooks) so that dropping it frees everything by reference counting, without waiting
        for a full garbage collection. The session must not be used afterwards; decisions stay valid."""
        for job in self.jobs.values():
            for task in job.tasks:
                task.job = None  # type: ignore[assignment]
                task.pod_set = None  # type: ignore[assignment]
            job.tasks = []
            job.pod_sets = {}
        for queue in self.queues.values():
            queue.parent = None
            queue.children = []
        self.hooks = Hooks()
        self.state.clear()

    def cluster_total(self) -> np.ndarray:
        """Queue-accounting capacity of ready nodes (GPU incl. MIG slices), minus other schedulers."""
        ready = np.array([n.ready for n in self.nodes.nodes], dtype=bool)
        alloc = self.nodes.alloc[ready] if len(ready) else self.nodes.alloc
        total = np.zeros(3)
        total[0] = float(alloc[:, GPU_COL].sum())
        for col, g in self.space.mig_columns():
            total[0] += float(alloc[:, col].sum()) * g * MILLI
        total[1] = float(alloc[:, CPU_COL].sum())
        total[2] = float(alloc[:, MEM_COL].sum())
        for used in self.snapshot.other_used.values():
            total[0] -= used.get("nvidia.com/gpu", 0) * MILLI
            total[1] -= used.get("cpu", 0)
            total[2] -= used.get("memory", 0)
        return total
