"""Resource fit of one task against many nodes at once (kai-spec §3.3, §3.4, §3.11).

`fit_masks` answers, vectorised over nodes (all, or the rows given): does the task fit what is
free now (`idle`, can bind) and what will be free (`idle + releasing`, can at least pipeline)?
Shared-GPU pods also need enough fitting shared groups or whole free devices.
"""

from __future__ import annotations

import numpy as np

from shoal.framework.jobs import Task
from shoal.framework.session import Session
from shoal.model.resources import GPU_COL, MILLI

Rows = np.ndarray | None


def _rows(ssn: Session, rows: Rows) -> np.ndarray:
    return np.arange(len(ssn.nodes)) if rows is None else rows


def shared_group_fit_counts(ssn: Session, task: Task, rows: Rows = None) -> tuple[np.ndarray, np.ndarray]:
    """Per node (of `rows`): shared groups the task fits counting releasing memory, and now."""
    nodes = ssn.nodes
    idx = _rows(ssn, rows)
    fit = np.zeros(len(idx), dtype=np.int64)
    idle = np.zeros(len(idx), dtype=np.int64)
    for k, i in enumerate(idx.tolist()):
        groups = nodes.groups[i]
        if not groups:
            continue
        mib = ssn.shared_mib(task, i)
        for g in groups:
            if nodes.group_fits(i, g, mib):
                fit[k] += 1
            if nodes.group_fits_idle(i, g, mib):
                idle[k] += 1
    return fit, idle


def nonzero_columns(ssn: Session, vec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(columns, amounts) of a request vector's non-zero entries. Request vectors are read-only
    and shared between pods with equal requests, so this is memoised per session by identity
    (the memo keeps the vector alive, so its id cannot be reused)."""
    memo = ssn.column_memo
    hit = memo.get(id(vec))
    if hit is not None and hit[0] is vec:
        return hit[1], hit[2]
    cols = np.flatnonzero(vec)
    need = vec[cols]
    memo[id(vec)] = (vec, cols, need)
    return cols, need


def fit_masks(ssn: Session, task: Task, rows: Rows = None) -> tuple[np.ndarray, np.ndarray]:
    """(fits_idle, fits_idle_or_releasing) boolean masks over nodes (or `rows`). Pure."""
    fits_idle, fits_free, _available = fit_and_available(ssn, task, rows)
    return fits_idle, fits_free


def fit_and_available(ssn: Session, task: Task,
                      rows: Rows = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`fit_masks` plus the mask that earns the nodeavailability score (KAI's
    `NodeInfo.IsTaskAllocatable`). Pure.

    For a GPU-share pod KAI counts, beside the whole idle devices, every shared device the share
    fits *counting that device's releasing memory* (`fractionTaskGpusAllocatableDeviceCount`), so
    a device whose room is only releasing still earns the score; its CPU and memory must fit idle.
    For every other pod the mask is `fits_idle`.
    """
    nodes = ssn.nodes
    pod = task.pod
    sel = slice(None) if rows is None else rows
    n = len(nodes) if rows is None else len(rows)
    if pod.best_effort:
        ones = np.ones(n, dtype=bool)
        return ones, ones.copy(), ones.copy()
    cols, need = nonzero_columns(ssn, task.vec)
    if rows is None:
        idle = nodes.idle[:, cols]
        free = idle + nodes.releasing[:, cols]
    else:
        idle = nodes.idle[rows][:, cols]
        free = idle + nodes.releasing[rows][:, cols]
    fits_idle: np.ndarray = np.asarray((idle >= need).all(axis=1))
    fits_free: np.ndarray = np.asarray((free >= need).all(axis=1))
    if not pod.gpu.is_shared:
        return fits_idle, fits_free, fits_idle
    base_idle: np.ndarray = np.asarray((idle >= need)[:, cols != GPU_COL].all(axis=1))
    g = pod.gpu
    fit_groups, idle_groups = shared_group_fit_counts(ssn, task, rows)
    gpu_idle = nodes.idle[sel, GPU_COL]
    whole_idle = np.trunc(gpu_idle / MILLI)
    whole_free = np.trunc((gpu_idle + nodes.releasing[sel, GPU_COL]) / MILLI)
    fits_free &= whole_free + fit_groups >= g.devices
    fits_idle &= whole_idle + idle_groups >= g.devices
    available = base_idle & (whole_idle + fit_groups >= g.devices)
    valid = nodes.gpu_count[sel] > 0
    if g.is_gpu_memory:
        valid = valid & (nodes.gpu_memory[sel] >= g.memory_mib)
    fits_free &= valid
    fits_idle &= valid
    available &= valid
    return fits_idle, fits_free, available
