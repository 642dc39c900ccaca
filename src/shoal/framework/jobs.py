"""Session-side views of pods, pod sets, jobs and queues (mutable during one cycle)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shoal.model.pod import Pod
from shoal.model.podgroup import PodGroup, PodSetSpec
from shoal.model.queue import Queue
from shoal.model.resources import Vector
from shoal.model.status import ACTIVE_ALLOCATED_SET, ACTIVE_USED_SET, ALIVE_SET, PodStatus

logger = logging.getLogger(__name__)

#: Queue accounting columns: GPU (milli, quota units), CPU (milli), memory (bytes).
Q_GPU, Q_CPU, Q_MEM = 0, 1, 2
QUEUE_COLUMNS = ("gpu", "cpu", "memory")


class Task:
    """A pod inside a session: its status, node and GPU groups change as statements run."""

    __slots__ = (
        "accepted_gpu", "groups", "job", "left_on", "node", "order_key", "ordinal", "pod", "pod_set",
        "portion", "quota_cache", "signature", "status", "uid", "vec",
    )

    def __init__(self, pod: Pod, vec: Vector) -> None:
        self.pod = pod
        self.uid = pod.uid
        self.status: PodStatus = pod.status
        self.node = -1
        self.groups: list[str] = []
        self.vec = vec
        #: Node choice's cache key (`actions.common.node_choice.task_signature`), set on first use:
        #: it reads only the pod and `vec`, which a session never changes.
        self.signature: tuple[object, ...] | None = None
        #: `quota_vector` of a whole-resource task (read-only; its pod never changes in a session).
        self.quota_cache: np.ndarray | None = None
        self.job: Job = None  # type: ignore[assignment]  # set by the session
        self.pod_set: PodSet = None  # type: ignore[assignment]
        #: Portion (milli) per device received on the current node (shared pods); 0 = whole.
        self.portion = 0
        #: KAI's AcceptedResource GPUs (milli): set on placement, never cleared by rollback.
        self.accepted_gpu = 0
        self.order_key: tuple[object, ...] = ()
        #: Position in `Session.task_list` (rows of the session's per-task arrays).
        self.ordinal = -1
        #: Nodes a victim was moved away from in this session, with its GPU groups there: KAI
        #: keeps the pod on such a node (its `PodInfos`) until it is deleted (`Statement.pipeline`).
        #: None until the first such move: most tasks never move, and a session holds every pod.
        self.left_on: dict[int, list[str]] | None = None

    def __repr__(self) -> str:
        return f"Task({self.uid}, {self.status.title}, node={self.node})"

    def quota_vector(self) -> np.ndarray:
        """This task's share of its queue (GPU quota milli, CPU milli, memory bytes). Read-only:
        a whole-resource task's vector is made once (a shared task's follows `accepted_gpu`)."""
        if self.pod.gpu.is_shared:
            return np.array(self.quota(), dtype=np.float64)
        vec = self.quota_cache
        if vec is None:
            vec = self.quota_cache = np.array(self.quota(), dtype=np.float64)
            vec.flags.writeable = False
        return vec

    def quota(self) -> tuple[float, float, float]:
        """`quota_vector` as plain floats (hot loops avoid tiny numpy arrays)."""
        p = self.pod
        gpu = self.accepted_gpu if p.gpu.is_shared else p.gpu_quota_milli
        return float(gpu), float(p.cpu_milli), float(p.memory)

    def request_quota_vector(self) -> np.ndarray:
        """Requested share (pending pods): GPU memory counts memory/100 GPUs (KAI quirk)."""
        return np.array(self.request_quota(), dtype=np.float64)

    def request_quota(self) -> tuple[float, float, float]:
        """`request_quota_vector` as plain floats (hot loops avoid tiny numpy arrays)."""
        p = self.pod
        gpu = p.gpu.devices * p.gpu.memory_mib / 100 * 1000 if p.gpu.is_gpu_memory else float(p.gpu_quota_milli)
        return gpu, float(p.cpu_milli), float(p.memory)


def request_total(tasks: list[Task]) -> np.ndarray:
    """The tasks' `request_quota` summed (KAI's job init resource in queue units: GPU-memory
    tasks count memory/100 GPUs). Summed in plain floats in the order float64 vectors would
    be: the same values, without an array per task."""
    gpu = cpu = mem = 0.0
    for t in tasks:
        g, c, m = t.request_quota()
        gpu, cpu, mem = gpu + g, cpu + c, mem + m
    return np.array([gpu, cpu, mem])


def capacity_request(tasks: list[Task]) -> np.ndarray:
    """What placing `tasks` asks of their queue for KAI's capacity checks (limits, quota):
    GPU quota (milli; GPU memory counts 0), CPU milli, memory bytes."""
    gpu = cpu = mem = 0.0
    for t in tasks:
        p = t.pod
        gpu += p.gpu_quota_milli
        cpu += p.cpu_milli
        mem += p.memory
    return np.array([gpu, cpu, mem])


#: Per status, the pod-set counters it adds to (one lookup per status change, a hot path).
_COUNTED = {st: (st in ACTIVE_ALLOCATED_SET, st in ACTIVE_USED_SET, st in ALIVE_SET, st == PodStatus.GATED,
                 st == PodStatus.PENDING) for st in PodStatus}


@dataclass(slots=True)
class PodSet:
    spec: PodSetSpec
    tasks: list[Task] = field(default_factory=list)
    active_allocated: int = 0
    active_used: int = 0
    alive: int = 0
    gated: int = 0
    pending: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def min_available(self) -> int:
        return self.spec.min_available

    def count(self, status: PodStatus, delta: int) -> None:
        active_allocated, active_used, alive, gated, pending = _COUNTED[status]
        if active_allocated:
            self.active_allocated += delta
        if active_used:
            self.active_used += delta
        if alive:
            self.alive += delta
        if gated:
            self.gated += delta
        elif pending:
            self.pending += delta


@dataclass(slots=True)
class Job:
    pg: PodGroup
    queue: QueueInfo | None
    tasks: list[Task] = field(default_factory=list)
    pod_sets: dict[str, PodSet] = field(default_factory=dict)
    fit_errors: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    last_start_time: float | None = None
    stale_since: float | None = None
    #: Bumped whenever a task of the job changes status (invalidates cached per-job values).
    version: int = 0
    #: Set by a queue-capacity check that refused the job: (queue, resource column 0..2,
    #: "limit" or "quota", the job's request of that resource). Read by allocate's pruning.
    capacity_block: tuple[str, int, str, float] | None = None
    #: Pending pods of the job (kept by `Session.set_status` and the session build).
    pending: int = 0
    #: Values derived from the tasks, keyed by name, stored with the `version` they were computed at.
    memo: dict[str, tuple[int, np.ndarray]] = field(default_factory=dict)
    #: Set when handling the job raised (framework.faults): no action touches it again this cycle.
    fault: str = ""
    #: (version, key) of the job's last `Session.job_key`.
    order_key: tuple[int, tuple[Any, ...]] | None = None

    #: The PodGroup's uid, copied once (read on every queue build, validation and victim pop).
    uid: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.uid = self.pg.uid

    @property
    def priority(self) -> int:
        return self.pg.priority

    @property
    def preemptible(self) -> bool:
        return self.pg.preemptible

    def cached(self, name: str, version: int, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """`compute()`, memoised under `name` until `version` changes. Callers pass the version that
        invalidates the value: usually this job's; a clone's values depend on its owner's."""
        hit = self.memo.get(name)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = compute()
        self.memo[name] = (version, value)
        return value

    def active_allocated(self) -> int:
        return sum(ps.active_allocated for ps in self.pod_sets.values())

    def active_used(self) -> int:
        return sum(ps.active_used for ps in self.pod_sets.values())

    def has_pending(self) -> bool:
        """Some pod of the job waits to be placed (a counter the session keeps)."""
        return self.pending > 0

    def has_status(self, status: PodStatus) -> bool:
        mask = status.value
        return any(t.status.value & mask for t in self.tasks)

    def is_ready(self) -> bool:
        """Every pod set (with minSubGroup: enough of them) has enough alive, ungated pods to reach
        its minimum."""
        if self.pg.uses_min_subgroup:
            return self.pg.satisfied(lambda n: (ps := self.pod_sets[n]).alive - ps.gated >= ps.min_available)
        return all(ps.alive - ps.gated >= ps.min_available for ps in self.pod_sets.values())

    def is_gang_satisfied(self) -> bool:
        if self.pg.uses_min_subgroup:
            return self.pg.satisfied(lambda n: (ps := self.pod_sets[n]).active_used >= ps.min_available)
        return all(ps.active_used >= ps.min_available for ps in self.pod_sets.values())

    def elastic_state(self) -> int:
        """0 = below min somewhere, 1 = exactly at min everywhere, 2 = above (KAI elastic order)."""
        state = 1
        for ps in self.pod_sets.values():
            if ps.active_allocated < ps.min_available:
                return 0
            if ps.active_allocated > ps.min_available:
                state = 2
        return state


@dataclass(slots=True)
class QueueInfo:
    """A queue in the session: static spec plus fair share and live allocation (3 columns)."""

    spec: Queue
    parent: QueueInfo | None = None
    children: list[QueueInfo] = field(default_factory=list)
    deserved: np.ndarray = field(default_factory=lambda: np.full(3, -1.0))
    limit: np.ndarray = field(default_factory=lambda: np.full(3, -1.0))
    weight: np.ndarray = field(default_factory=lambda: np.ones(3))
    allocated: np.ndarray = field(default_factory=lambda: np.zeros(3))
    allocated_np: np.ndarray = field(default_factory=lambda: np.zeros(3))
    request: np.ndarray = field(default_factory=lambda: np.zeros(3))
    fair_share: np.ndarray = field(default_factory=lambda: np.zeros(3))
    usage: np.ndarray = field(default_factory=lambda: np.zeros(3))
    #: Moves whenever `allocated` changes (`Session.queue_add`), for views cached on it.
    alloc_version: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def ancestors(self) -> list[QueueInfo]:
        """This queue and its ancestors, leaf first."""
        out: list[QueueInfo] = []
        q: QueueInfo | None = self
        while q is not None:
            out.append(q)
            q = q.parent
        return out

    def over_nonpreemptible_quota(self, req: np.ndarray) -> tuple[QueueInfo, int] | None:
        """The first queue (this one, then ancestors) and resource whose quota non-preemptible
        work would pass with `req` added (KAI: A_np + req > deserved), or None."""
        for q in self.ancestors():
            for r in range(3):
                d = q.deserved[r]
                if d != -1 and req[r] != 0 and d < q.allocated_np[r] + req[r]:
                    return q, r
        return None

    def allocatable_share(self) -> np.ndarray:
        out = np.empty(3)
        for r in range(3):
            d, fs, lim = self.deserved[r], self.fair_share[r], self.limit[r]
            if d == -1:
                out[r] = lim
            else:
                share = max(d, fs)
                out[r] = min(share, lim) if lim != -1 else share
        return out


def build_queue_tree(queues: list[Queue]) -> dict[str, QueueInfo]:
    """Session queues by name, linked parent <-> children. A queue whose parent is missing (or whose
    ancestor chain loops) is dropped with its subtree, like KAI, and logged."""
    infos = {q.name: QueueInfo(spec=q) for q in queues}
    for info in infos.values():
        q = info.spec
        for r, res in enumerate((q.gpu, q.cpu, q.memory)):
            info.deserved[r] = res.quota
            info.limit[r] = res.limit
            info.weight[r] = res.over_quota_weight
        if q.parent and q.parent not in infos:
            logger.warning("queue %s: parent queue %s does not exist; the queue is ignored", q.name, q.parent)
    valid = {name: info for name, info in infos.items() if _chain_is_valid(infos, name)}
    for info in valid.values():
        if info.spec.parent:
            info.parent = valid[info.spec.parent]
            info.parent.children.append(info)
    return valid


def _chain_is_valid(infos: dict[str, QueueInfo], name: str) -> bool:
    """Every ancestor of queue `name` exists and the chain has no loop."""
    seen = {name}
    parent = infos[name].spec.parent
    while parent:
        if parent not in infos or parent in seen:
            return False
        seen.add(parent)
        parent = infos[parent].spec.parent
    return True
