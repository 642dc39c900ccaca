"""Why one pending gang does not start, in words a user understands, and what would change that.

`analyse(ssn, job)` reads a session after its actions ran (the state the last cycle left: what is
free now, each queue's allocation) and returns plain data:

* `blockers` — each cause with a `kind` (`queue-limit`, `queue-quota`, `resources`, `fragmentation`,
  `topology`, `gang`, `queue-missing`, `invalid`, `not-ready`) and a sentence, e.g. "queue team-a is
  at its limit of 16 GPUs (16 allocated, the gang needs 4 more)";
* `nodeGroups` — the first failing condition per group of nodes, for the gang's first waiting pod
  ("12 nodes: insufficient nvidia.com/gpu (need 4, at most 2 free)");
* `suggestions` — what would make it schedulable ("free 4 GPUs in queue team-a", "with minMember
  <= 2 it would start now", "free 1 more GPU on node n-3").

It never mutates the session and never re-decides: the scheduler's own messages stay in the
report next to this analysis.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from shoal.actions.common.node_choice import rejection_counts
from shoal.framework.jobs import QUEUE_COLUMNS, Job, QueueInfo, Task, capacity_request
from shoal.framework.session import Session
from shoal.model.resources import GPU_COL
from shoal.model.status import PodStatus
from shoal.model.topology import TopologyConstraint
from shoal.visibility.quantities import MILLI, bytes_text, gpu_text

Blocker = dict[str, Any]


def tasks_needed(job: Job) -> list[Task]:
    """The pending tasks the gang needs to start (per pod set: up to its minimum), or its first
    pending task when every minimum is met (an elastic job growing)."""
    out: list[Task] = []
    for ps in job.pod_sets.values():
        missing = max(ps.min_available - ps.active_allocated, 0)
        out.extend([t for t in ps.tasks if t.status == PodStatus.PENDING][:missing])
    if not out:
        out = [t for t in job.tasks if t.status == PodStatus.PENDING][:1]
    return out


def analyse(ssn: Session, job: Job) -> dict[str, Any]:
    """Blockers, node groups and suggestions for a gang with pending pods (see the module doc)."""
    blockers: list[Blocker] = []
    suggestions: list[str] = []
    needed = tasks_needed(job)
    blockers += _static_blockers(job)
    if job.queue is not None:
        for b in _queue_blockers(job.queue, needed, job.preemptible):
            blockers.append(b)
            suggestions.append(b.pop("suggestion"))
    groups: list[dict[str, Any]] = []
    if needed and job.queue is not None and not job.pg.invalid_reasons:
        rejected = rejection_counts(ssn, needed[0], None, None, "")
        groups = [{"nodes": n, "reason": r} for r, n in sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))]
        room = len(ssn.nodes) - sum(rejected.values())
        if room > 0:
            groups.append({"nodes": room, "reason": "have room for one of its pods"})
        fit = _fit_blockers(ssn, job, needed)
        for b in fit:
            suggestions.extend(b.pop("suggestions", []))
        blockers += fit
    if not blockers and job.reasons:
        blockers.append({"kind": "scheduler", "text": "; ".join(dict.fromkeys(job.fit_errors)) or job.reasons[0]})
    return {"blockers": blockers, "nodeGroups": groups, "suggestions": list(dict.fromkeys(suggestions)),
            "neededPods": len(needed)}


def _static_blockers(job: Job) -> list[Blocker]:
    out: list[Blocker] = []
    if job.queue is None:
        out.append({"kind": "queue-missing", "text": f"queue {job.pg.queue!r} does not exist"})
    elif not job.queue.is_leaf:
        out.append({"kind": "queue-missing", "text": f"queue {job.pg.queue!r} is a parent queue; "
                                                      "jobs must name a leaf queue"})
    for problem in job.pg.invalid_reasons:
        out.append({"kind": "invalid", "text": f"the PodGroup is invalid: {problem}"})
    if not job.is_ready() and not job.pg.invalid_reasons:
        alive = sum(ps.alive - ps.gated for ps in job.pod_sets.values())
        need = sum(ps.min_available for ps in job.pod_sets.values())
        out.append({"kind": "not-ready", "text": f"only {alive} of the gang's minimum {need} pods exist "
                                                  "(or are not gated) yet"})
    return out


def _amount(r: int, v: float) -> str:
    return (gpu_text(v / MILLI), f"{v / MILLI:g} CPU cores", f"{bytes_text(v)} memory")[r]


def _queue_blockers(leaf: QueueInfo, needed: list[Task], preemptible: bool) -> list[Blocker]:
    """Limits of the leaf and its ancestors the gang would pass; quota for non-preemptible gangs."""
    req = capacity_request(needed)
    out: list[Blocker] = []
    for q in leaf.ancestors():
        for r in range(3):
            lim, alloc = float(q.limit[r]), float(q.allocated[r])
            if lim != -1 and req[r] > 0 and alloc + req[r] > lim:
                excess = alloc + req[r] - lim
                scale = (MILLI, MILLI, 1.0)[r]
                out.append({"kind": "queue-limit", "queue": q.name, "resource": QUEUE_COLUMNS[r],
                            "limit": lim / scale, "allocated": alloc / scale, "request": float(req[r]) / scale,
                            "text": f"queue {q.name} is at its limit of {_amount(r, lim)} "
                                    f"({_amount(r, alloc)} allocated, the gang needs {_amount(r, req[r])} more)",
                            "suggestion": f"free {_amount(r, excess)} in queue {q.name}, or raise its "
                                          f"{QUEUE_COLUMNS[r]} limit to {_amount(r, alloc + req[r])}"})
    if not preemptible:
        for q in leaf.ancestors():
            for r in range(3):
                d, anp = float(q.deserved[r]), float(q.allocated_np[r])
                if d != -1 and req[r] > 0 and anp + req[r] > d:
                    out.append({"kind": "queue-quota", "queue": q.name, "resource": QUEUE_COLUMNS[r],
                                "text": f"the gang is non-preemptible and would take queue {q.name} over its "
                                        f"quota of {_amount(r, d)} ({_amount(r, anp)} non-preemptible in use)",
                                "suggestion": f"use a preemptible priority class (e.g. train), or raise queue "
                                              f"{q.name}'s {QUEUE_COLUMNS[r]} quota to {_amount(r, anp + req[r])}"})
    return out


def pods_per_node(ssn: Session, task: Task) -> np.ndarray:
    """How many copies of `task` each node could take on its free (idle + releasing) resources,
    among the nodes every predicate allows."""
    nodes = ssn.nodes
    free = nodes.idle + nodes.releasing
    cols = np.flatnonzero(task.vec)
    if len(cols) == 0:
        counts = np.full(len(nodes), 1_000_000, dtype=np.int64)
    else:
        counts = (free[:, cols] // np.maximum(task.vec[cols], 1)).min(axis=1).astype(np.int64)
    if task.pod.gpu.is_shared:
        per_device = max(1, MILLI // max(task.pod.gpu.portion_milli or MILLI, 1))
        counts = np.minimum(counts, (free[:, GPU_COL] // MILLI) * int(per_device) // max(task.pod.gpu.devices, 1))
    return np.where(_allowed(ssn, task), np.maximum(counts, 0), 0)


def _fit_blockers(ssn: Session, job: Job, needed: list[Task]) -> list[Blocker]:
    """Resources, fragmentation, gang size and topology, judged on the pod shape of `needed[0]`."""
    task = needed[0]
    n_need = len(needed)
    per_node = pods_per_node(ssn, task)
    fits = int(per_node.sum())
    out: list[Blocker] = []
    constraint = _required_constraint(job)
    if fits >= n_need:
        if constraint is not None:
            topo = _topology_blocker(ssn, constraint, per_node, n_need)
            if topo is not None:
                out.append(topo)
        return out
    gpu_each = task.pod.gpu_quota_milli / MILLI
    free_gpu = (ssn.nodes.idle[:, GPU_COL] + ssn.nodes.releasing[:, GPU_COL]) / MILLI
    usable = _allowed(ssn, task)
    total_free = float(free_gpu[usable].sum()) if usable.any() else 0.0
    suggestions: list[str] = []
    if gpu_each > 0 and total_free >= gpu_each * n_need:
        best = int(np.argmax(np.where(usable, free_gpu, -1))) if usable.any() else -1
        most = float(free_gpu[best]) if best >= 0 else 0.0
        text = (f"fragmentation: {gpu_text(total_free)} are free on the nodes it may use, enough for the "
                f"{gpu_text(gpu_each * n_need)} it needs, but they are spread out: each pod needs "
                f"{gpu_text(gpu_each)} on one node and at most {gpu_text(most)} are free on any node")
        if best >= 0 and gpu_each > most:
            suggestions.append(f"free another {gpu_text(gpu_each - most)} on node {ssn.nodes.names[best]} "
                               f"(consolidation), or ask for pods of at most {gpu_text(most)}")
        out.append({"kind": "fragmentation", "text": text, "freeGpus": total_free, "maxFreeOnNode": most})
    else:
        short = gpu_each * n_need - total_free
        if gpu_each > 0:
            text = (f"not enough free GPUs: the gang needs {gpu_text(gpu_each * n_need)} ({n_need} pods x "
                    f"{gpu_text(gpu_each)}), {gpu_text(total_free)} are free on the nodes it may use")
            suggestions.append(f"free {gpu_text(short)} (finished or preempted jobs, or more nodes)")
        else:
            text = f"only {fits} of the {n_need} pods it needs fit on the free resources of the nodes it may use"
        out.append({"kind": "resources", "text": text, "freeGpus": total_free})
    if 0 < fits < n_need:
        mins = sum(ps.min_available for ps in job.pod_sets.values())
        suggestions.append(f"{fits} of its {n_need} waiting pods fit now: with minMember <= "
                           f"{mins - n_need + fits} (now {mins}) it would start")
        out.append({"kind": "gang", "text": f"{fits} of the {n_need} pods it needs could be placed now, and a "
                                            "gang starts only whole", "fit": fits})
    if out:
        out[0]["suggestions"] = suggestions
    return out


def _allowed(ssn: Session, task: Task) -> np.ndarray:
    allowed = np.ones(len(ssn.nodes), dtype=bool)
    for pred in ssn.hooks.predicates:
        res = pred(ssn, task, None)
        if res is not None:
            allowed &= res[0]
    return allowed


def _required_constraint(job: Job) -> TopologyConstraint | None:
    if job.pg.topology is not None and job.pg.topology.required_level:
        return job.pg.topology
    for ps in job.pod_sets.values():
        c = ps.spec.topology
        if c is not None and c.required_level:
            return c
    return None


def _topology_blocker(ssn: Session, c: TopologyConstraint, per_node: np.ndarray, n_need: int) -> Blocker | None:
    """Enough room in the cluster but not inside one domain of the required level."""
    level = c.required_level
    by_domain: Counter[str] = Counter()
    unlabelled = 0
    for i, node in enumerate(ssn.nodes.nodes):
        value = node.labels.get(level)
        if value is None:
            unlabelled += 1
            continue
        by_domain[value] += int(per_node[i])
    best, room = (by_domain.most_common(1) or [("", 0)])[0]
    if room >= n_need:
        return None
    where = f"the best ({best}) has room for {room}" if best else "no node carries the label"
    text = (f"topology {c.topology}: the {n_need} pods must run in one {level} domain, but none has room: "
            f"{len(by_domain)} domain(s), {where}")
    if unlabelled:
        text += f"; {unlabelled} node(s) lack the {level} label"
    out: Blocker = {"kind": "topology", "text": text, "level": level, "domains": len(by_domain),
                    "bestDomain": best, "bestRoom": room}
    sugg = [f"free room for {n_need - room} more pod(s) in {level}={best}" if best else
            f"label nodes with {level}"]
    if c.preferred_level == "" or c.preferred_level != level:
        sugg.append(f"or make {level} a preferred rather than required level")
    out["suggestions"] = sugg
    return out
