"""Placing a job's tasks inside a statement (KAI's AllocateJob, kai-spec §3.7-3.8, §3.11).

Gang semantics: the tasks to place are chosen per pod set (enough to reach each minimum, or one
extra for an elastic job already at its minimum); every one must find a node, or the caller
rolls the statement back. Nodes are ranked by the summed plugin scores, ties by node name.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from shoal.framework.fit import fit_masks
from shoal.framework.jobs import Job, PodSet, Task
from shoal.framework.session import Session
from shoal.framework.statement import Statement
from shoal.model.status import PodStatus


def pod_set_order(ps: PodSet) -> tuple[int, float, str]:
    """Pod sets below their minimum first; then the lowest allocated/min ratio; then name."""
    if ps.active_allocated < ps.min_available:
        return (0, 0.0, "")  # two pod sets below min tie (stable)
    return (1, ps.active_allocated / max(ps.min_available, 1), ps.name)


def should_allocate(task: Task, real: bool) -> bool:
    return task.status == PodStatus.PENDING or (not real and task.status == PodStatus.RELEASING)


def tasks_to_allocate(job: Job, real: bool = True) -> list[Task]:
    """The tasks one attempt places: per pod set up to its minimum, else one extra task."""
    sets = sorted(job.pod_sets.values(), key=pod_set_order)
    below = sum(1 for ps in sets if ps.active_allocated < ps.min_available)
    max_sets = below or 1
    out: list[Task] = []
    used = 0
    for ps in sets:
        if used >= max_sets:
            break
        cands = [t for t in ps.tasks if should_allocate(t, real)]
        if not cands:
            continue
        n = ps.min_available - ps.active_allocated if ps.active_allocated < ps.min_available else 1
        out.extend(cands[:n])
        used += 1
    return out


def allocate_job(ssn: Session, stmt: Statement, job: Job, *, pipeline_only: bool = False,
                 node_mask: np.ndarray | None = None, real: bool = True) -> bool:
    """Try to place the job's next tasks in `stmt`. On False the caller discards the statement."""
    tasks = tasks_to_allocate(job, real)
    if not tasks:
        return False
    for check in ssn.hooks.job_capacity:
        msg = check(ssn, job, tasks)
        if msg:
            if not pipeline_only:
                _add_reason(job, msg.split(":", 1)[0], msg)
            return False
    wanted = {t.uid for t in tasks}
    for ps in _pod_sets_in_tree_order(job):
        for task in ps.tasks:
            if task.uid in wanted and not allocate_task(ssn, stmt, task, pipeline_only, node_mask):
                _gang_error(job, tasks, task)
                return False
    return True


def _pod_sets_in_tree_order(job: Job) -> list[PodSet]:
    """Child sub-group sets (by name, recursively) before the pod sets of a level (pod-set order)."""
    by_parent: dict[str, list[PodSet]] = {}
    for ps in job.pod_sets.values():
        by_parent.setdefault(ps.spec.parent, []).append(ps)
    children: dict[str, list[str]] = {}
    for sg in job.pg.sub_group_sets:
        children.setdefault(sg.parent, []).append(sg.name)
    out: list[PodSet] = []

    def walk(name: str) -> None:
        for child in sorted(children.get(name, [])):
            walk(child)
        out.extend(sorted(by_parent.get(name, []), key=pod_set_order))

    walk("")
    seen = {id(ps) for ps in out}
    out.extend(ps for ps in job.pod_sets.values() if id(ps) not in seen)
    return out


def allocate_task(ssn: Session, stmt: Statement, task: Task, pipeline_only: bool,
                  node_mask: np.ndarray | None = None) -> bool:
    """Place one task on the best node it fits (idle or releasing); False if none."""
    for pre in ssn.hooks.pre_predicates:
        msg = pre(ssn, task)
        if msg:
            _node_errors(task, Counter({msg: len(ssn.nodes)}))
            return False
    fits_idle, fits_free = fit_masks(ssn, task)
    mask = fits_free.copy() if node_mask is None else fits_free & node_mask
    rejected: Counter[str] = Counter()
    if node_mask is not None:
        rejected["outside the allowed node set"] = int((~node_mask).sum())
    rejected["insufficient resources"] = int((~fits_free & (node_mask if node_mask is not None else True)).sum())
    for pred in ssn.hooks.predicates:
        if not mask.any():
            break
        res = pred(ssn, task)
        if res is None:
            continue
        ok, reason = res
        newly = mask & ~ok
        if newly.any():
            rejected[reason] += int(newly.sum())
            mask &= ok
    if not mask.any():
        _node_errors(task, rejected)
        return False
    score = np.zeros(len(ssn.nodes))
    for scorer in ssn.hooks.node_scorers:
        score = score + scorer(ssn, task, mask)
    i = int(np.argmax(np.where(mask, score, -np.inf)))
    if task.pod.gpu.is_shared:
        return _allocate_shared(ssn, stmt, task, i, bool(fits_idle[i]), pipeline_only)
    if fits_idle[i] and not pipeline_only:
        stmt.allocate(task, i)
    else:
        stmt.pipeline(task, i, update_if_exists=not pipeline_only)
    return True


def _allocate_shared(ssn: Session, stmt: Statement, task: Task, i: int, fits_idle: bool,
                     pipeline_only: bool) -> bool:
    """Choose the task's GPU devices on node i: fitting shared groups and whole free devices,
    ordered by the GPU-order plugins (gpupack: fullest shared group first)."""
    nodes = ssn.nodes
    mib = ssn.shared_mib(task, i)
    cands: list[tuple[float, int, str | None]] = []
    seq = 0
    for g in sorted(nodes.groups[i]):
        if nodes.group_fits(i, g, mib):
            cands.append((_gpu_score(ssn, i, g), seq, g))
            seq += 1
    idle_whole, rel_whole = nodes.whole_free(i)
    for _ in range(max(idle_whole, 0) + max(rel_whole, 0)):
        cands.append((_gpu_score(ssn, i, None), seq, None))
        seq += 1
    cands.sort(key=lambda c: (-c[0], c[1]))
    chosen = cands[: task.pod.gpu.devices]
    if len(chosen) < task.pod.gpu.devices:
        return False
    groups: list[str] = []
    releasing = False
    fresh: set[str] = set()
    for _score, _seq, g in chosen:
        if g is None:
            name = nodes.fresh_group_name(i, fresh)
            fresh.add(name)
            groups.append(name)
            releasing |= not fits_idle
        else:
            groups.append(g)
            releasing |= not nodes.group_fits_idle(i, g, mib) or not fits_idle
    if releasing or pipeline_only:
        stmt.pipeline(task, i, groups, update_if_exists=not pipeline_only)
    else:
        stmt.allocate(task, i, groups)
    return True


def _gpu_score(ssn: Session, i: int, group: str | None) -> float:
    return sum(fn(ssn, i, group) for fn in ssn.hooks.gpu_order)


def _add_reason(job: Job, reason: str, message: str) -> None:
    if reason not in job.reasons:
        job.reasons.append(reason)
    if message not in job.fit_errors:
        job.fit_errors.append(message)


def _node_errors(task: Task, rejected: Counter[str]) -> None:
    parts = [f"{n} {reason}" for reason, n in sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0])) if n]
    task.job.fit_errors.append(f"pod {task.pod.name}: no node fits ({'; '.join(parts) or 'no nodes'})")


def _gang_error(job: Job, tasks: list[Task], failed: Task) -> None:
    placed = sum(1 for t in tasks if t.status & (PodStatus.ALLOCATED | PodStatus.PIPELINED))
    msg = (f"Resources were found for {placed} pods while {len(tasks)} are required for gang scheduling")
    _add_reason(job, "Unschedulable", msg)
