"""Resource fit of one task against every node at once (kai-spec §3.3, §3.4, §3.11).

`fit_masks` answers, vectorised over nodes: does the task fit what is free now (`idle`, can
bind) and what will be free (`idle + releasing`, can at least pipeline)? Shared-GPU pods also
need enough fitting shared groups or whole free devices.
"""

from __future__ import annotations

import numpy as np

from shoal.framework.jobs import Task
from shoal.framework.session import Session
from shoal.model.resources import GPU_COL, MILLI


def shared_group_fit_counts(ssn: Session, task: Task) -> tuple[np.ndarray, np.ndarray]:
    """Per node: number of shared groups the task fits counting releasing memory, and now."""
    nodes = ssn.nodes
    n = len(nodes)
    fit = np.zeros(n, dtype=np.int64)
    idle = np.zeros(n, dtype=np.int64)
    for i, groups in enumerate(nodes.groups):
        if not groups:
            continue
        mib = ssn.shared_mib(task, i)
        for g in groups:
            if nodes.group_fits(i, g, mib):
                fit[i] += 1
            if nodes.group_fits_idle(i, g, mib):
                idle[i] += 1
    return fit, idle


def fit_masks(ssn: Session, task: Task) -> tuple[np.ndarray, np.ndarray]:
    """(fits_idle, fits_idle_or_releasing) boolean masks over nodes. Never mutates state."""
    nodes = ssn.nodes
    pod = task.pod
    n = len(nodes)
    if pod.best_effort:
        ones = np.ones(n, dtype=bool)
        return ones, ones
    vec = task.vec
    cols = np.flatnonzero(vec)
    idle = nodes.idle[:, cols]
    free = idle + nodes.releasing[:, cols]
    need = vec[cols]
    fits_idle = (idle >= need).all(axis=1)
    fits_free = (free >= need).all(axis=1)
    if pod.gpu.is_shared:
        g = pod.gpu
        fit_groups, idle_groups = shared_group_fit_counts(ssn, task)
        whole_idle = np.trunc(nodes.idle[:, GPU_COL] / MILLI)
        whole_free = np.trunc((nodes.idle[:, GPU_COL] + nodes.releasing[:, GPU_COL]) / MILLI)
        fits_free &= whole_free + fit_groups >= g.devices
        fits_idle &= whole_idle + idle_groups >= g.devices
        if g.is_gpu_memory:
            valid = nodes.gpu_memory >= g.memory_mib
            fits_free &= valid
            fits_idle &= valid
        has_gpus = nodes.gpu_count > 0
        fits_free &= has_gpus
        fits_idle &= has_gpus
    return fits_idle, fits_free
