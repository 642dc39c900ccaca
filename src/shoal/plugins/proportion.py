"""The proportion plugin: fair shares, queue order and queue capacity checks (kai-spec §4)."""

from __future__ import annotations

import numpy as np

from shoal.framework.jobs import QUEUE_COLUMNS, Job, QueueInfo, Task
from shoal.framework.session import Session
from shoal.model.resources import MILLI
from shoal.policy.fairshare import ShareInput, divide
from shoal.policy.queue_order import QueueView, compare

#: Whole unit each resource's over-quota share is floored to (GPU milli -> devices).
UNITS = (float(MILLI), 1.0, 1.0)
UNIT_NAMES = {"gpu": ("GPU", 1000.0), "cpu": ("CPU", 1000.0), "memory": ("memory", 1e6)}


def open_proportion(ssn: Session, args: dict[str, str]) -> None:
    k_value = max(float(args.get("kValue", "1.0")), 0.0)
    multiplier = max(float(args.get("relcaimerSaturationMultiplier",
                                    args.get("reclaimerSaturationMultiplier", "1.0"))), 1.0)
    total = ssn.cluster_total()
    ssn.hooks.extra["cluster_total"] = total
    ssn.hooks.extra["saturation_multiplier"] = multiplier
    for name, q in ssn.queues.items():
        usage = ssn.snapshot.usage.get(name, {})
        q.usage = np.array([usage.get(r, 0.0) for r in QUEUE_COLUMNS])
    compute_fair_shares(ssn, total, k_value)

    def queue_order(l: QueueInfo, r: QueueInfo, l_req: np.ndarray | None, r_req: np.ndarray | None,
                    l_vic: np.ndarray | None = None, r_vic: np.ndarray | None = None) -> int:
        return compare(view(l), view(r), l_req, r_req, total, l_vic, r_vic)

    ssn.hooks.queue_order = queue_order
    ssn.hooks.job_capacity.append(job_over_capacity)
    ssn.hooks.task_capacity.append(task_over_capacity)


def view(q: QueueInfo) -> QueueView:
    return QueueView(q.name, q.spec.priority, q.spec.creation, q.allocated, q.fair_share, q.deserved,
                     q.allocatable_share())


def compute_fair_shares(ssn: Session, total: np.ndarray, k_value: float) -> None:
    """Divide `total` top-down over the queue tree, per resource. Writes `fair_share`."""
    tops = [q for q in ssn.queues.values() if q.parent is None]
    _divide_level(tops, total, k_value)


def _divide_level(siblings: list[QueueInfo], amount: np.ndarray, k_value: float) -> None:
    if not siblings:
        return
    ordered = sorted(siblings, key=lambda q: (q.spec.creation, q.name))
    for r in range(3):
        inputs = [ShareInput(q.name, float(q.deserved[r]), float(q.limit[r]), float(q.weight[r]),
                             q.spec.priority, float(q.request[r]), q.spec.creation, float(q.usage[r]))
                  for q in ordered]
        shares = divide(float(amount[r]), inputs, UNITS[r], k_value)
        for q in ordered:
            q.fair_share[r] = shares[q.name]
    for q in ordered:
        _divide_level(q.children, q.fair_share.copy(), k_value)


def _fmt(r: int, value: float) -> str:
    name = QUEUE_COLUMNS[r]
    label, div = UNIT_NAMES[name]
    return f"{value / div:g} {label}" if name != "memory" else f"{value / 1e6:g} MB {label}"


def job_over_capacity(ssn: Session, job: Job, tasks: list[Task]) -> str | None:
    """OverLimit / NonPreemptibleOverQuota for the tasks about to be placed, or None."""
    if job.queue is None:
        return None
    req = np.zeros(3)
    for t in tasks:
        req += np.array([t.pod.gpu_quota_milli, t.pod.cpu_milli, t.pod.memory], dtype=np.float64)
    return _check(job, req)


def task_over_capacity(ssn: Session, task: Task, node: int) -> str | None:
    job = task.job
    if job.queue is None:
        return None
    gpu = float(task.pod.gpu_quota_milli)
    if task.pod.gpu.is_shared:
        gpu = float(ssn.node_portion(task, node)) if ssn.nodes.names else gpu
    req = np.array([gpu, task.pod.cpu_milli, task.pod.memory], dtype=np.float64)
    return _check(job, req)


def _check(job: Job, req: np.ndarray) -> str | None:
    assert job.queue is not None
    for q in job.queue.ancestors():
        for r in range(3):
            lim = q.limit[r]
            if lim != -1 and req[r] != 0 and lim < q.allocated[r] + req[r]:
                return (f"OverLimit: queue {q.name} would exceed its {QUEUE_COLUMNS[r]} limit "
                        f"({_fmt(r, q.allocated[r] + req[r])} > {_fmt(r, lim)})")
    if not job.preemptible:
        for q in job.queue.ancestors():
            for r in range(3):
                d = q.deserved[r]
                if d != -1 and req[r] != 0 and d < q.allocated_np[r] + req[r]:
                    return (f"NonPreemptibleOverQuota: non-preemptible job would take queue {q.name} over "
                            f"its {QUEUE_COLUMNS[r]} quota ({_fmt(r, q.allocated_np[r] + req[r])} > "
                            f"{_fmt(r, d)})")
    return None
