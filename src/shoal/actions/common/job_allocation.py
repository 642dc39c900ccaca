"""Placing a job's tasks inside a statement (KAI's AllocateJob, kai-spec §3.7-3.8, §3.11).

Gang semantics: the tasks to place are chosen per pod set (enough to reach each minimum, or one
extra for an elastic job already at its minimum); every one must find a node, or the caller
rolls the statement back. Nodes are ranked by the summed plugin scores, ties by node name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from shoal.actions.common.node_choice import best_node, rejection_counts
from shoal.framework.decisions import NO_NODES
from shoal.framework.jobs import Job, PodSet, Task
from shoal.framework.session import NodeSetsFn, Session
from shoal.framework.statement import Statement
from shoal.model.status import PodStatus
from shoal.model.topology import TopologyConstraint


def eligible(job: Job) -> bool:
    """May `job` be scheduled at all: ready (alive pods reach every minimum), has pending pods,
    sits in a leaf queue, is valid, is not backing off (KAI's schedulingBackoff) and has not
    faulted this cycle (framework.faults)."""
    return (not job.fault and job.queue is not None and job.has_pending() and job.queue.is_leaf
            and not job.pg.invalid_reasons and not job.pg.backoff_blocked and job.is_ready())


def pod_set_order(ps: PodSet) -> tuple[int, float, str]:
    """Pod sets below their minimum first; then the lowest allocated/min ratio; then name."""
    if ps.active_allocated < ps.min_available:
        return (0, 0.0, "")  # two pod sets below min tie (stable)
    return (1, ps.active_allocated / max(ps.min_available, 1), ps.name)


def should_allocate(task: Task, real: bool) -> bool:
    """Pending, or (simulations only) virtually evicted in this session: a pod that was already
    being deleted in the snapshot is never re-placed."""
    return task.status == PodStatus.PENDING or (
        not real and task.status == PodStatus.RELEASING and task.pod.status != PodStatus.RELEASING)


def tasks_to_allocate(job: Job, real: bool = True) -> list[Task]:
    """The tasks one attempt places: per pod set up to its minimum, else one extra task."""
    if len(job.pod_sets) == 1 and real:
        # The common gang: one pod set; skip the pod-set ordering.
        ps = next(iter(job.pod_sets.values()))
        if not ps.pending:
            return []
        n = ps.min_available - ps.active_allocated if ps.active_allocated < ps.min_available else 1
        return [t for t in ps.tasks if t.status == PodStatus.PENDING][:n]
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
    for hook in ssn.hooks.pre_job_allocation:
        hook(ssn, job)
    tasks = tasks_to_allocate(job, real)
    if not tasks:
        return False
    for check in ssn.hooks.job_capacity:
        msg = check(ssn, job, tasks)
        if msg:
            if not pipeline_only:
                _add_reason(job, msg.split(":", 1)[0], msg)
            return False
    mask = np.ones(len(ssn.nodes), dtype=bool) if node_mask is None else node_mask
    return _alloc_set(_Walk(ssn, stmt, job, tasks, pipeline_only, explain=real), subgroup_tree(job), tasks, mask)


@dataclass(slots=True)
class SubGroup:
    """An inner node of a job's pod-set tree (the root is named ""): child groups and pod sets."""

    name: str
    topology: TopologyConstraint | None
    children: list[SubGroup] = field(default_factory=list)
    pod_sets: list[PodSet] = field(default_factory=list)
    #: KAI's minSubGroup: direct children (groups and pod sets) that must be satisfied; None = all.
    min_subgroup: int | None = None

    def all_pod_sets(self) -> list[PodSet]:
        out = list(self.pod_sets)
        for c in self.children:
            out.extend(c.all_pod_sets())
        return out


def subgroup_tree(job: Job) -> SubGroup:
    """The job's tree: root (job topology) -> sub-group sets (by parent) -> pod sets (leaves).
    A pod set or group naming an unknown parent hangs under the root."""
    root = SubGroup("", job.pg.topology, min_subgroup=job.pg.min_subgroup)
    groups = {sg.name: SubGroup(sg.name, sg.topology, min_subgroup=sg.min_subgroup) for sg in job.pg.sub_group_sets}
    for sg in job.pg.sub_group_sets:
        parent = groups.get(sg.parent, root) if sg.parent != sg.name else root
        parent.children.append(groups[sg.name])
    for ps in job.pod_sets.values():
        groups.get(ps.spec.parent, root).pod_sets.append(ps)
    return root


@dataclass(slots=True)
class _Walk:
    """One allocation attempt of a job (the arguments every level of the tree walk shares)."""

    ssn: Session
    stmt: Statement
    job: Job
    tasks: list[Task]
    pipeline_only: bool
    #: Count why each node refused a task that fits nowhere (`rejection_counts`). Off in victim
    #: simulations: the solver gives every job its fit errors back afterwards, so those texts
    #: would be built only to be thrown away.
    explain: bool = True


def _node_sets(w: _Walk, name: str, constraint: TopologyConstraint | None, pod_sets: list[PodSet],
               tasks: list[Task], mask: np.ndarray) -> Iterable[np.ndarray]:
    """KAI's SubsetNodes: every registered splitter refines every node set of the previous one
    (lazily: a later node set is only built when the earlier ones failed)."""
    sets: Iterable[np.ndarray] = [mask]
    for fn in w.ssn.hooks.node_sets:
        sets = _refine(w, fn, name, constraint, pod_sets, tasks, sets)
    return sets


def _refine(w: _Walk, fn: NodeSetsFn, name: str, constraint: TopologyConstraint | None,
            pod_sets: list[PodSet], tasks: list[Task], sets: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
    for m in sets:
        yield from fn(w.ssn, w.job, name, constraint, pod_sets, tasks, m)


def _alloc_set(w: _Walk, group: SubGroup, tasks: list[Task], mask: np.ndarray) -> bool:
    """allocSet (kai-spec §3.8): for each node set of the group, child groups (by name) then pod
    sets (pod-set order) must all be placed inside it; otherwise roll back and try the next."""
    for node_set in _node_sets(w, group.name, group.topology, group.all_pod_sets(), tasks, mask):
        cp = w.stmt.checkpoint()
        if _alloc_set_on(w, group, tasks, node_set):
            return True
        w.stmt.rollback(cp)
    return False


def _alloc_set_on(w: _Walk, group: SubGroup, tasks: list[Task], node_set: np.ndarray) -> bool:
    if group.min_subgroup is not None:
        return _alloc_some_on(w, group, tasks, node_set)
    for child in sorted(group.children, key=lambda c: c.name):
        members = {id(ps) for ps in child.all_pod_sets()}
        if not _alloc_set(w, child, [t for t in tasks if id(t.pod_set) in members], node_set):
            return False
    for ps in sorted(group.pod_sets, key=pod_set_order):
        if not _alloc_pod_set(w, ps, [t for t in tasks if t.pod_set is ps], node_set):
            return False
    return True


def _alloc_some_on(w: _Walk, group: SubGroup, tasks: list[Task], node_set: np.ndarray) -> bool:
    """minSubGroup: every ready child (enough pods exist) is tried and rolled back alone when it
    fails; the group stands when `min_subgroup` of its children are satisfied and something was
    placed. A child short of pods is not placed at all (its pods would hold resources for nothing)."""
    start = len(w.stmt.ops)
    satisfied = 0
    for child in sorted(group.children, key=lambda c: c.name):
        members = {id(ps) for ps in child.all_pod_sets()}
        sub = [t for t in tasks if id(t.pod_set) in members]
        cp = w.stmt.checkpoint()
        if sub and _reaches(child, _ready) and not _alloc_set(w, child, sub, node_set):
            w.stmt.rollback(cp)
        satisfied += _reaches(child, _allocated)
    for ps in sorted(group.pod_sets, key=pod_set_order):
        sub = [t for t in tasks if t.pod_set is ps]
        cp = w.stmt.checkpoint()
        if sub and _ready(ps) and not _alloc_pod_set(w, ps, sub, node_set):
            w.stmt.rollback(cp)
        satisfied += _allocated(ps)
    assert group.min_subgroup is not None
    return satisfied >= group.min_subgroup and len(w.stmt.ops) > start


def _ready(ps: PodSet) -> bool:
    return ps.alive - ps.gated >= ps.min_available


def _allocated(ps: PodSet) -> bool:
    return ps.active_allocated >= ps.min_available


def _reaches(group: SubGroup, ok: Callable[[PodSet], bool]) -> bool:
    """Does the group reach its minimum by `ok` of its pod sets (its minSubGroup, else all)?"""
    got = [_reaches(c, ok) for c in group.children] + [ok(ps) for ps in group.pod_sets]
    return all(got) if group.min_subgroup is None else sum(got) >= group.min_subgroup


def _alloc_pod_set(w: _Walk, ps: PodSet, tasks: list[Task], mask: np.ndarray) -> bool:
    """allocPodSet: the pod set's own node sets; all its tasks (task order) in one of them."""
    for node_set in _node_sets(w, ps.name, ps.spec.topology, [ps], tasks, mask):
        cp = w.stmt.checkpoint()
        inside = None if node_set.all() else node_set
        if all(_alloc_one(w, task, inside) for task in tasks):
            return True
        w.stmt.rollback(cp)
    return False


def _alloc_one(w: _Walk, task: Task, mask: np.ndarray | None) -> bool:
    """Place one task inside `mask` (None: every node)."""
    for tier in _group_tiers(w.ssn, task, mask):
        # Group scores rank first: try the best-scored nodes, then the next tier; the errors of
        # a tier that cannot take the task are dropped (the final attempt explains the failure).
        n_errors = len(w.job.fit_errors)
        if allocate_task(w.ssn, w.stmt, task, w.pipeline_only, tier, explain=w.explain):
            return True
        del w.job.fit_errors[n_errors:]
    if allocate_task(w.ssn, w.stmt, task, w.pipeline_only, mask, explain=w.explain):
        return True
    _gang_error(w.job, w.tasks, task)
    return False


def _group_tiers(ssn: Session, task: Task, mask: np.ndarray | None) -> list[np.ndarray]:
    """Node masks by descending group score (topology: multiples of 10^4, above every node-local
    score but nominated node and pod affinity); [] when no group scorer scores this task."""
    total: np.ndarray | None = None
    for fn in ssn.hooks.group_scorers:
        got = fn(ssn, task)
        if got is not None:
            total = got if total is None else total + got
    if total is None:
        return []
    base = np.ones(len(ssn.nodes), dtype=bool) if mask is None else mask
    values = np.unique(total[base])[::-1]
    if len(values) <= 1:
        return []
    return [base & (total == v) for v in values[:-1]]


def allocate_task(ssn: Session, stmt: Statement, task: Task, pipeline_only: bool,
                  node_mask: np.ndarray | None = None, *, explain: bool = True) -> bool:
    """Place one task on the best node it fits (idle or releasing); False if none, with the
    per-node reasons in the job's fit errors when `explain`."""
    for pre in ssn.hooks.pre_predicates:
        msg = pre(ssn, task)
        if msg:
            _node_errors(task, Counter({msg: len(ssn.nodes)}))
            return False
    capacity_mask, capacity_reason = _capacity_mask(ssn, task)
    choice = best_node(ssn, task, node_mask, capacity_mask)
    if choice is None:
        if explain:
            _node_errors(task, rejection_counts(ssn, task, node_mask, capacity_mask, capacity_reason))
        return False
    i, fits_idle = choice
    if task.pod.gpu.is_shared:
        return _allocate_shared(ssn, stmt, task, i, fits_idle, pipeline_only)
    if fits_idle and not pipeline_only:
        stmt.allocate(task, i)
    else:
        stmt.pipeline(task, i, update_if_exists=not pipeline_only)
    return True


def _capacity_mask(ssn: Session, task: Task) -> tuple[np.ndarray | None, str]:
    """The queue-capacity predicate (KAI's IsTaskAllocationOnNodeOverCapacity), when enabled.

    It depends on queue state, not on nodes, so it is evaluated per task and never cached; a
    GPU-memory task's quota depends on the node's device memory, so it is checked per memory size.
    """
    if not ssn.hooks.per_task_capacity or not ssn.hooks.task_capacity:
        return None, ""
    n = len(ssn.nodes)
    if not task.pod.gpu.is_gpu_memory:
        for check in ssn.hooks.task_capacity:
            msg = check(ssn, task, 0 if n else -1)
            if msg:
                return np.zeros(n, dtype=bool), msg
        return None, ""
    mask = np.ones(n, dtype=bool)
    reason = ""
    for mem in np.unique(ssn.nodes.gpu_memory).tolist():
        rows = np.flatnonzero(ssn.nodes.gpu_memory == mem)
        for check in ssn.hooks.task_capacity:
            msg = check(ssn, task, int(rows[0]))
            if msg:
                mask[rows] = False
                reason = msg
    return mask, reason


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
    for _score, _seq, group in chosen:
        if group is None:
            fresh_name = nodes.fresh_group_name(i, fresh)
            fresh.add(fresh_name)
            groups.append(fresh_name)
            releasing |= not fits_idle
        else:
            groups.append(group)
            releasing |= not nodes.group_fits_idle(i, group, mib) or not fits_idle
    if releasing or pipeline_only:
        stmt.pipeline(task, i, groups, update_if_exists=not pipeline_only)
    else:
        stmt.allocate(task, i, groups)
    return True


def _gpu_score(ssn: Session, i: int, group: str | None) -> float:
    return sum(fn(ssn, i, group) for fn in ssn.hooks.gpu_order)


def record_capacity_failure(job: Job, message: str) -> None:
    """Record a queue-capacity refusal (`Reason: text`) as the job's reason and fit error."""
    _add_reason(job, message.split(":", 1)[0], message)


def _add_reason(job: Job, reason: str, message: str) -> None:
    if reason not in job.reasons:
        job.reasons.append(reason)
    if message not in job.fit_errors:
        job.fit_errors.append(message)


def _node_errors(task: Task, rejected: Counter[str]) -> None:
    parts = [f"{n} {reason}" for reason, n in sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0])) if n]
    # No node rejected at all: there was none to try (rejection_counts starts from every node).
    task.job.fit_errors.append(f"pod {task.pod.name}: no node fits ({'; '.join(parts) or NO_NODES})")


def _gang_error(job: Job, tasks: list[Task], failed: Task) -> None:
    placed = sum(1 for t in tasks if t.status & (PodStatus.ALLOCATED | PodStatus.PIPELINED))
    msg = (f"Resources were found for {placed} pods while {len(tasks)} are required for gang scheduling")
    _add_reason(job, "Unschedulable", msg)
