"""Victim-side job handling shared by reclaim, preempt and consolidation (kai-spec §3.6, §3.7).

* `clone_job` - a job restricted to some of its tasks (KAI `CloneWithTasks`): pod-set counters
  recomputed from those tasks, minimums kept.
* `tasks_to_evict` - the next victim batch of a job: one pod of an elastic job above its
  minimum, else the whole gang.
* `VictimQueue` (in victim_queue.py) - the victim-mode job order over the queue
  tree: the most over-served queue first, inside a leaf the job that would be scheduled last first.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from shoal.framework.jobs import Job, PodSet, Task
from shoal.framework.session import Session
from shoal.model.pod import portion_for_memory
from shoal.model.resources import GPU_COL
from shoal.model.status import ACTIVE_ALLOCATED_SET


def clone_job(job: Job, tasks: Iterable[Task]) -> Job:
    """`job` restricted to `tasks` (same PodGroup, queue and times; counters of those tasks)."""
    keep = list(tasks)
    out = Job(pg=job.pg, queue=job.queue, last_start_time=job.last_start_time, stale_since=job.stale_since)
    for name, ps in job.pod_sets.items():
        out.pod_sets[name] = PodSet(ps.spec)
    for t in keep:
        ps = out.pod_sets[t.pod_set.name]
        ps.tasks.append(t)
        ps.count(t.status, 1)
    out.tasks = keep
    return out


def tasks_to_evict(job: Job) -> tuple[list[Task], bool]:
    """KAI `GetTasksToEvict`: (batch, job has more active tasks after it).

    A pod set above its minimum gives one pod (the highest allocated/min ratio set, its last
    task in task order); otherwise every active-allocated task of the job goes (whole gang)."""
    above = [ps for ps in job.pod_sets.values() if ps.active_allocated > ps.min_available]
    if above:
        above.sort(key=lambda ps: (-ps.active_allocated / max(ps.min_available, 1), ps.name))
        active = [t for t in above[0].tasks if t.status in ACTIVE_ALLOCATED_SET]
        batch = [max(active, key=lambda t: t.order_key)]
    else:
        batch = [t for t in job.tasks if t.status in ACTIVE_ALLOCATED_SET]
    return batch, len(batch) < job.active_allocated()


def feasible_nodes(ssn: Session, tasks: list[Task]) -> np.ndarray:
    """KAI `FeasibleNodesForJob`: every node if some task needs no GPU, else the nodes whose idle
    GPUs or releasing GPUs sum above zero, each sum as KAI reads it (`kai_gpu_sums`). A shared
    device that holds only pipelined shares adds to neither sum: KAI does not offer a node whose
    only room is there (unless the scenario's victims are on it)."""
    n = len(ssn.nodes)
    if any(not t.pod.gpu.milli and not t.pod.mig and not t.pod.gpu.is_gpu_memory for t in tasks):
        return np.ones(n, dtype=bool)
    idle, releasing = kai_gpu_sums(ssn)
    mask: np.ndarray = (idle > 0) | (releasing > 0)
    return mask


def kai_gpu_sums(ssn: Session) -> tuple[np.ndarray, np.ndarray]:
    """Per node, (idle, releasing) GPUs in hundredths of a GPU as KAI's `GetSumOfIdleGPUs` /
    `GetSumOfReleasingGPUs` read them (KAI's rounding, 0.01):

    * idle: whole idle devices, plus the free room of every shared device with *allocated*
      memory (`1 - ceil(allocated / device memory, 0.01)`; pipelined shares are not subtracted),
      plus idle MIG slices;
    * releasing: whole releasing devices, plus the releasing memory of every shared device that
      is not releasing as a whole (those are among the whole ones), plus releasing MIG slices.

    A shared device that holds only pipelined shares has no allocated memory and a negative
    releasing memory, so its free room counts in neither sum (its device was taken from the
    releasing whole devices)."""
    nodes = ssn.nodes
    # Whole devices are in milli-GPUs: hundredths are a tenth of them.
    idle = nodes.idle[:, GPU_COL] // 10
    releasing = nodes.releasing[:, GPU_COL] // 10
    for col, slices in ssn.space.mig_columns():
        idle = idle + 100 * slices * nodes.idle[:, col]
        releasing = releasing + 100 * slices * nodes.releasing[:, col]
    for i, groups in enumerate(nodes.groups):
        if not groups:
            continue
        mem = int(nodes.gpu_memory[i])
        for g in groups.values():
            if g.allocated > 0:
                idle[i] += 100 - _hundredths(g.allocated, mem)
            if g.releasing > 0 and not (g.used > 0 and g.used == g.releasing):
                releasing[i] += _hundredths(g.releasing, mem)
    return idle, releasing


def _hundredths(mib: int, device: int) -> int:
    """KAI `getGpuMemoryFractionalOnNode`: `mib` of a `device`-MiB GPU, rounded up to 0.01 - the
    memory-to-portion rule of `model.resources.portion_for_memory`, in hundredths."""
    return portion_for_memory(mib, device) // 10
