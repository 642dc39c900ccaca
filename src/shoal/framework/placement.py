"""Session open: every active-used pod onto its node, with KAI's per-status and shared-GPU accounting.

The common cases are accounted in bulk: whole-resource pods that simply run (one vectorised step),
and shared-GPU pods that simply run with all their GPU groups known (their group totals summed
in one pass). The rest are placed one by one, in pod-name order. The result is the same as
placing every pod one by one: a node's usage and a group's memory are sums, and what a group
takes from the node's idle and releasing GPUs depends only on its final totals. The one
order-dependent step, naming fresh groups for a running shared pod whose groups are unknown, sees
exactly what it saw before: no pod of its node is accounted in bulk.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from shoal.framework.jobs import Task
from shoal.framework.nodestate import GpuGroup, NodeState
from shoal.model.resources import GPU_COL, MILLI
from shoal.model.status import ACTIVE_USED_SET, PodStatus

_ONE_BY_ONE = (PodStatus.PIPELINED, PodStatus.RELEASING)


class Placer(Protocol):
    """The parts of a session placing running pods touches (framework.session.Session)."""

    tasks: dict[str, Task]
    nodes: NodeState
    placed: np.ndarray

    def place(self, task: Task, i: int, status: PodStatus, groups: list[str]) -> None: ...

    def shared_mib(self, task: Task, i: int) -> int: ...

    def node_portion(self, task: Task, i: int) -> int: ...


def place_running(ssn: Placer) -> None:
    nodes = ssn.nodes
    whole: list[Task] = []
    shared: list[Task] = []
    rest: list[Task] = []
    fresh: set[str | None] = set()  # nodes with a shared pod whose groups are unknown
    for t in ssn.tasks.values():
        if t.status not in ACTIVE_USED_SET or t.pod.node not in nodes.index:
            continue
        gpu = t.pod.gpu
        if gpu.is_shared and len(t.pod.gpu_groups) < gpu.devices:
            fresh.add(t.pod.node)
            rest.append(t)
        elif t.status in _ONE_BY_ONE:
            rest.append(t)
        else:
            (shared if gpu.is_shared else whole).append(t)
    if fresh:
        rest += [t for t in shared if t.pod.node in fresh]
        shared = [t for t in shared if t.pod.node not in fresh]
    if whole:
        idx = _rows(nodes, whole)
        vecs = np.stack([t.vec for t in whole])
        np.add.at(nodes.used, idx, vecs)
        np.subtract.at(nodes.idle, idx, vecs)
        nodes.bump_many(idx)
        for t, i in zip(whole, idx.tolist()):
            t.node = i
            t.accepted_gpu = t.pod.gpu_quota_milli
        ssn.placed[[t.ordinal for t in whole]] = idx
    if shared:
        _place_shared(ssn, shared)
    rest.sort(key=lambda t: t.pod.name)
    for task in rest:
        i = nodes.index[task.pod.node]  # type: ignore[index]
        groups = list(task.pod.gpu_groups)
        if task.pod.gpu.is_shared:
            taken: set[str] = set()
            while len(groups) < task.pod.gpu.devices:
                # A running shared pod without known groups gets fresh, distinct devices.
                name = nodes.fresh_group_name(i, taken | {f"~{task.uid}"})
                name = f"{name}-{task.uid}"
                taken.add(name)
                groups.append(name)
        ssn.place(task, i, task.status, groups)


def _rows(nodes: NodeState, tasks: list[Task]) -> np.ndarray:
    return np.fromiter((nodes.index[t.pod.node] for t in tasks), dtype=np.int64,  # type: ignore[index]
                       count=len(tasks))


def _place_shared(ssn: Placer, tasks: list[Task]) -> None:
    """Shared-GPU pods that simply run, each with all its groups known, accounted in bulk: their
    regular resources as one vectorised step, their device memory summed per group; a group a
    pod made taken takes one device out of its node's idle GPUs (`NodeState.add_shared`'s rule)."""
    nodes = ssn.nodes
    idx = _rows(nodes, tasks)
    vecs = np.stack([t.vec for t in tasks])
    np.add.at(nodes.used, idx, vecs)
    np.subtract.at(nodes.idle, idx, vecs)
    bumps: list[int] = []
    took: list[int] = []
    for t, i in zip(tasks, idx.tolist()):
        groups = list(t.pod.gpu_groups)
        mib = ssn.shared_mib(t, i)
        node_groups = nodes.groups[i]
        for name in groups:
            g = node_groups.get(name)
            if g is None:
                g = node_groups[name] = GpuGroup()
            was = g.taken
            g.used += mib
            g.allocated += mib
            if g.taken and not was:
                took.append(i)
            if g.used == 0 and g.allocated == 0 and g.releasing == 0:
                del node_groups[name]
        bumps.extend([i] * (1 + len(groups)))
        t.node = i
        t.groups = groups
        t.portion = ssn.node_portion(t, i)
        t.accepted_gpu = t.portion * len(groups)
    if took:
        np.subtract.at(nodes.idle[:, GPU_COL], np.array(took, dtype=np.int64), MILLI)
    nodes.bump_many(np.array(bumps, dtype=np.int64))
    ssn.placed[[t.ordinal for t in tasks]] = idx
