"""Node-scoring plugins (summed; kai-spec §3.9): nodeavailability, gpusharingorder, resourcetype,
nodeplacement (binpack/spread), nominatednode, and the GPU device order plugins gpupack/gpuspread."""

from __future__ import annotations

import numpy as np

from shoal.framework.fit import fit_masks, shared_group_fit_counts
from shoal.framework.jobs import Task
from shoal.framework.session import Session
from shoal.model.resources import CPU_COL, GPU_COL, MILLI

AVAILABILITY = 100.0
GPU_SHARING = 1000.0
RESOURCE_TYPE = 10.0
MAX_HIGH_DENSITY = 9.0
NOMINATED = 1_000_000.0


def open_nodeavailability(ssn: Session, args: dict[str, str]) -> None:
    def score(s: Session, task: Task, mask: np.ndarray) -> np.ndarray:
        return fit_masks(s, task)[0] * AVAILABILITY
    ssn.hooks.node_scorers.append(score)


def open_gpusharingorder(ssn: Session, args: dict[str, str]) -> None:
    def score(s: Session, task: Task, mask: np.ndarray) -> np.ndarray | float:
        if not task.pod.gpu.is_shared:
            return 0.0
        fit, _idle = shared_group_fit_counts(s, task)
        return (fit > 0) * GPU_SHARING
    ssn.hooks.node_scorers.append(score)


def open_resourcetype(ssn: Session, args: dict[str, str]) -> None:
    cpu_only_nodes = np.array(
        [n.gpu_count == 0 and not n.is_mig for n in ssn.nodes.nodes], dtype=bool)

    def score(s: Session, task: Task, mask: np.ndarray) -> np.ndarray | float:
        if not task.pod.is_cpu_only:
            return 0.0
        return cpu_only_nodes * RESOURCE_TYPE
    ssn.hooks.node_scorers.append(score)


def open_nominatednode(ssn: Session, args: dict[str, str]) -> None:
    def score(s: Session, task: Task, mask: np.ndarray) -> np.ndarray | float:
        name = task.pod.nominated_node
        if not name or name not in s.nodes.index:
            return 0.0
        out = np.zeros(len(s.nodes))
        out[s.nodes.index[name]] = NOMINATED
        return out
    ssn.hooks.node_scorers.append(score)


def open_nodeplacement(ssn: Session, args: dict[str, str]) -> None:
    """Binpack (fuller nodes first) or spread (emptier first) on GPUs for GPU pods, CPU otherwise."""
    gpu_mode = args.get("gpu", "binpack")
    cpu_mode = args.get("cpu", "binpack")
    for mode in (gpu_mode, cpu_mode):
        if mode not in ("binpack", "spread"):
            raise ValueError(f"nodeplacement: unknown strategy {mode!r} (binpack or spread)")
    ssn.hooks.extra["placement"] = (gpu_mode, cpu_mode)
    gpu_count = ssn.nodes.gpu_count.astype(np.float64)
    cpu_alloc = ssn.nodes.alloc[:, CPU_COL].astype(np.float64)

    def score(s: Session, task: Task, mask: np.ndarray) -> np.ndarray:
        nodes = s.nodes
        if task.pod.is_cpu_only:
            col, mode, count = CPU_COL, cpu_mode, cpu_alloc
            free = (nodes.idle[:, col] + nodes.releasing[:, col]).astype(np.float64)
            has = count > 0
        else:
            col, mode, count = GPU_COL, gpu_mode, gpu_count
            free = np.trunc((nodes.idle[:, col] + nodes.releasing[:, col]) / MILLI)
            has = nodes.alloc[:, GPU_COL] > 0
        if mode == "spread":
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(count > 0, free / np.where(count > 0, count, 1), 0.0)
        if not has.any():
            return np.zeros(len(nodes))
        lo, hi = float(free[has].min()), float(free[has].max())
        if hi == 0:
            return np.zeros(len(nodes))
        if lo == hi:
            return np.where(has, MAX_HIGH_DENSITY, 0.0)
        return np.where(has, MAX_HIGH_DENSITY * (1 - (free - lo) / (hi - lo)), 0.0)
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
