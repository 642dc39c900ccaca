"""Node-scoring plugins (summed; kai-spec §3.9): nodeavailability, gpusharingorder, resourcetype,
nodeplacement (binpack/spread), nominatednode, and the GPU device order plugins gpupack/gpuspread."""

from __future__ import annotations

import numpy as np

from shoal.framework.fit import Rows, shared_group_fit_counts
from shoal.framework.jobs import Task
from shoal.framework.session import Session
from shoal.model.resources import CPU_COL, GPU_COL, MILLI

AVAILABILITY = 100.0
GPU_SHARING = 1000.0
RESOURCE_TYPE = 10.0
MAX_HIGH_DENSITY = 9.0
NOMINATED = 1_000_000.0


def open_nodeavailability(ssn: Session, args: dict[str, str]) -> None:
    """+100 for nodes where the pod fits now (can bind, not only pipeline).

    The node choice computes the idle fit anyway; it adds `availability_score` x fits-idle."""
    ssn.hooks.availability_score = AVAILABILITY


def open_gpusharingorder(ssn: Session, args: dict[str, str]) -> None:
    def score(s: Session, task: Task, rows: Rows) -> np.ndarray | float:
        if not task.pod.gpu.is_shared:
            return 0.0
        fit, _idle = shared_group_fit_counts(s, task, rows)
        return (fit > 0) * GPU_SHARING
    ssn.hooks.node_scorers.append(score)


def open_resourcetype(ssn: Session, args: dict[str, str]) -> None:
    cpu_only_nodes = np.array(
        [n.gpu_count == 0 and not n.is_mig for n in ssn.nodes.nodes], dtype=bool)

    def score(s: Session, task: Task, rows: Rows) -> np.ndarray | float:
        if not task.pod.is_cpu_only:
            return 0.0
        return (cpu_only_nodes if rows is None else cpu_only_nodes[rows]) * RESOURCE_TYPE
    ssn.hooks.node_scorers.append(score)


def open_nominatednode(ssn: Session, args: dict[str, str]) -> None:
    def score(s: Session, task: Task, rows: Rows) -> np.ndarray | float:
        name = task.pod.nominated_node
        if not name or name not in s.nodes.index:
            return 0.0
        idx = np.arange(len(s.nodes)) if rows is None else rows
        out: np.ndarray = (idx == s.nodes.index[name]) * NOMINATED
        return out
    ssn.hooks.node_scorers.append(score)


def open_nodeplacement(ssn: Session, args: dict[str, str]) -> None:
    """Binpack (fuller nodes first) or spread (emptier first) on GPUs for GPU pods, CPU otherwise.

    KAI's binpack score is 9 x (1 - (x - min) / (max - min)) over the free amount x of the nodes.
    Every other plugin scores in multiples of 10, so only the order this term induces matters; we
    use 9 x (1 - x / (X + 1)) with X the largest allocatable amount, which orders nodes exactly as
    KAI's does but depends on the node alone, so a node's score changes only when the node does.
    """
    gpu_mode = args.get("gpu", "binpack")
    cpu_mode = args.get("cpu", "binpack")
    for mode in (gpu_mode, cpu_mode):
        if mode not in ("binpack", "spread"):
            raise ValueError(f"nodeplacement: unknown strategy {mode!r} (binpack or spread)")
    nodes = ssn.nodes
    gpu_count = nodes.gpu_count.astype(np.float64)
    cpu_alloc = nodes.alloc[:, CPU_COL].astype(np.float64)
    has_gpu = nodes.alloc[:, GPU_COL] > 0
    gpu_scale = float(np.trunc(nodes.alloc[:, GPU_COL] / MILLI).max(initial=0)) + 1.0
    cpu_scale = float(cpu_alloc.max(initial=0)) + 1.0

    def score(s: Session, task: Task, rows: Rows) -> np.ndarray:
        sel = slice(None) if rows is None else rows
        if task.pod.is_cpu_only:
            free = (s.nodes.idle[sel, CPU_COL] + s.nodes.releasing[sel, CPU_COL]).astype(np.float64)
            mode, count, scale, has = cpu_mode, cpu_alloc[sel], cpu_scale, cpu_alloc[sel] > 0
        else:
            free = np.trunc((s.nodes.idle[sel, GPU_COL] + s.nodes.releasing[sel, GPU_COL]) / MILLI)
            mode, count, scale, has = gpu_mode, gpu_count[sel], gpu_scale, has_gpu[sel]
        if mode == "spread":
            return np.where(count > 0, free / np.where(count > 0, count, 1), 0.0)
        return np.where(has, MAX_HIGH_DENSITY * (1 - np.clip(free, 0, None) / scale), 0.0)
    ssn.hooks.node_scorers.append(score)


def open_gpupack(ssn: Session, args: dict[str, str]) -> None:
    """Shared pods go to the most used shared GPU first; whole free devices last."""
    def order(s: Session, i: int, group: str | None) -> float:
        if group is None:
            return 0.0
        return s.nodes.groups[i][group].used / float(s.nodes.gpu_memory[i])
    ssn.hooks.gpu_order.append(order)


def open_gpuspread(ssn: Session, args: dict[str, str]) -> None:
    """Shared pods go to whole free devices first, then the least used shared GPU."""
    def order(s: Session, i: int, group: str | None) -> float:
        if group is None:
            return 1.0
        return 1.0 - s.nodes.groups[i][group].used / float(s.nodes.gpu_memory[i])
    ssn.hooks.gpu_order.append(order)
