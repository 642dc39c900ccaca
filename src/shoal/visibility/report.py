"""The scheduling report: a finished session as plain, JSON-able data for every surface.

`build_report(ssn, decisions, ...)` is called by an adapter after a cycle's actions ran and before
the session is released. It returns a dict (schema `REPORT_KIND`, `REPORT_VERSION`):

* `queues` — the queue tree (parents before children): quota, limit and over-quota weight per
  resource, fair share, allocation (GPUs whole and fractional, CPU cores, memory bytes), request,
  time-decayed usage (when time-based fair share is on), running and pending gangs;
* `pending` — every gang with pending pods in the order the next cycle's allocate action tries them
  (`position`, 1-based; `queuePosition` inside its queue), with the core's reason codes and
  messages, and for the first `detail_limit` gangs the analysis of `shoal.visibility.explain`;
* `cycle`, `time`, `cycleSeconds`, `config` (the scheduler config, KAI format).

Contract: never mutates the session or the decisions; same session, same report.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from shoal.actions.common.job_allocation import eligible
from shoal.framework.config import SchedulerConfig
from shoal.framework.decisions import Decisions, GangExplanation
from shoal.framework.job_queue import JobsByQueue
from shoal.framework.jobs import Job, QueueInfo
from shoal.framework.session import Session
from shoal.model.status import ALLOCATED, PodStatus
from shoal.visibility.explain import analyse, tasks_needed
from shoal.visibility.quantities import MILLI, cores, gpus, limit_value

REPORT_KIND = "SchedulingReport"
REPORT_VERSION = 1
_SCALE = (MILLI, MILLI, 1.0)  # report units: GPU devices, CPU cores, memory bytes


def pending_order(ssn: Session) -> list[Job]:
    """Gangs with pending pods, in the order allocate pops them (the queue tree's order, then each
    queue's job order); gangs allocate skips (no queue, invalid, not ready) come last, oldest first."""
    pending = [j for j in ssn.jobs.values() if j.has_pending()]
    queue = JobsByQueue(ssn, (j for j in pending if eligible(j)))
    ordered: list[Job] = []
    while (job := queue.pop()) is not None:
        ordered.append(job)
    seen = {j.uid for j in ordered}
    ordered += sorted((j for j in pending if j.uid not in seen), key=lambda j: (j.pg.creation, j.uid))
    return ordered


def config_to_dict(config: SchedulerConfig) -> dict[str, Any]:
    """The config in KAI's format (what `shoal.framework.config.config_from_dict` reads back)."""
    out: dict[str, Any] = {
        "actions": ", ".join(config.actions),
        "tiers": [{"plugins": [{"name": p.name, **({"arguments": dict(p.arguments)} if p.arguments else {})}
                               for p in config.plugins]}],
        "stalenessGracePeriodSeconds": config.staleness_grace_seconds,
        "maxConsolidationPreemptees": config.max_consolidation_preemptees,
        "allowConsolidatingReclaim": config.allow_consolidating_reclaim,
    }
    if config.queue_depth_per_action:
        out["queueDepthPerAction"] = dict(config.queue_depth_per_action)
    return out


def build_report(ssn: Session, decisions: Decisions, *, scheduler: str = "", cycle: int = 0,
                 cycle_seconds: float = 0.0, config: SchedulerConfig | None = None,
                 detail_limit: int = 200) -> dict[str, Any]:
    """The report of a finished session (see the module doc). `detail_limit` bounds the gangs that
    get the full analysis (it costs a few vector passes over the nodes per gang)."""
    order = pending_order(ssn)
    entries = []
    in_queue: dict[str, int] = defaultdict(int)
    for pos, job in enumerate(order, 1):
        in_queue[job.pg.queue] += 1
        ex = decisions.explanations.get(job.uid)
        entry = pending_entry(ssn, job, ex)
        entry["position"], entry["queuePosition"] = pos, in_queue[job.pg.queue]
        if pos <= detail_limit:
            entry.update(analyse(ssn, job))
        entry["summary"] = _summary(entry)
        entries.append(entry)
    return {
        "apiVersion": "shoal.dev/v1", "kind": REPORT_KIND, "version": REPORT_VERSION,
        "scheduler": scheduler, "cycle": cycle, "time": ssn.now, "cycleSeconds": round(cycle_seconds, 6),
        "config": config_to_dict(config or ssn.config),
        "queues": queue_entries(ssn, dict(in_queue)),
        "pending": entries,
        "timeBasedFairShare": bool(ssn.snapshot.usage),
    }


def pending_entry(ssn: Session, job: Job, ex: GangExplanation | None) -> dict[str, Any]:
    """Identity, size, request and the core's reasons of one pending gang (no analysis)."""
    waiting = [t for t in job.tasks if t.status == PodStatus.PENDING]
    needed = tasks_needed(job)
    gpu = sum(t.pod.gpu_quota_milli for t in needed)
    implicit = job.uid.startswith("pod:")
    name = waiting[0].pod.name if implicit and waiting else job.pg.name
    return {
        "uid": job.uid, "namespace": job.pg.namespace, "name": name,
        "kind": "Pod" if implicit else "PodGroup", "queue": job.pg.queue,
        "priority": job.pg.priority, "preemptible": job.pg.preemptible,
        "minMember": sum(ps.min_available for ps in job.pod_sets.values()),
        "pods": len(job.tasks), "pendingPods": len(waiting), "runningPods": job.active_allocated(),
        "podNames": sorted(t.pod.name for t in waiting)[:50],
        "request": {"gpu": gpus(gpu), "cpu": cores(sum(t.pod.cpu_milli for t in needed)),
                    "memory": sum(t.pod.memory for t in needed)},
        "gpuPerPod": gpus(needed[0].pod.gpu_quota_milli) if needed else 0.0,
        "created": job.pg.creation, "waitingSeconds": max(ssn.now - job.pg.creation, 0.0),
        "reasons": list(ex.reasons) if ex else [],
        "messages": list(dict.fromkeys(ex.messages)) if ex else [],
    }


def _summary(entry: dict[str, Any]) -> str:
    blockers = entry.get("blockers") or []
    if blockers:
        return str(blockers[0]["text"])
    if entry["messages"]:
        return str(entry["messages"][0])
    return ", ".join(entry["reasons"]) or "waiting for the next cycle"


def queue_entries(ssn: Session, pending: dict[str, int]) -> list[dict[str, Any]]:
    """The queue tree, parents first (depth-first, children by name)."""
    whole, fractional = _gpu_split(ssn)
    running: dict[str, int] = defaultdict(int)
    for job in ssn.jobs.values():
        if job.queue is not None and job.active_allocated() > 0:
            for q in job.queue.ancestors():
                running[q.name] += 1
    pending_total: dict[str, int] = defaultdict(int)
    for name, n in pending.items():
        leaf = ssn.queues.get(name)
        for q in leaf.ancestors() if leaf is not None else []:
            pending_total[q.name] += n
    out: list[dict[str, Any]] = []

    def visit(q: QueueInfo, depth: int) -> None:
        out.append(_queue_entry(q, depth, whole[q.name], fractional[q.name], running[q.name],
                                pending_total[q.name], bool(ssn.snapshot.usage)))
        for child in sorted(q.children, key=lambda c: c.name):
            visit(child, depth + 1)

    for q in sorted((q for q in ssn.queues.values() if q.parent is None), key=lambda q: q.name):
        visit(q, 0)
    return out


def _gpu_split(ssn: Session) -> tuple[dict[str, float], dict[str, float]]:
    """GPUs allocated per queue (and its ancestors): whole devices, and fractions of shared ones."""
    whole: dict[str, float] = defaultdict(float)
    frac: dict[str, float] = defaultdict(float)
    for job in ssn.jobs.values():
        if job.queue is None:
            continue
        w = f = 0.0
        for t in job.tasks:
            if not t.status & ALLOCATED:
                continue
            if t.pod.gpu.is_shared:
                f += (t.accepted_gpu or t.pod.gpu.milli) / MILLI
            else:
                w += t.pod.gpu_quota_milli / MILLI
        for q in job.queue.ancestors():
            whole[q.name] += w
            frac[q.name] += f
    return whole, frac


def _queue_entry(q: QueueInfo, depth: int, whole: float, frac: float, running: int, pending: int,
                 with_usage: bool) -> dict[str, Any]:
    res: dict[str, Any] = {}
    for r, name in enumerate(("gpu", "cpu", "memory")):
        s = _SCALE[r]
        res[name] = {
            "quota": limit_value(q.deserved[r], s), "limit": limit_value(q.limit[r], s),
            "weight": float(q.weight[r]), "fairShare": round(float(q.fair_share[r]) / s, 3),
            "allocated": round(float(q.allocated[r]) / s, 3),
            "allocatedNonPreemptible": round(float(q.allocated_np[r]) / s, 3),
            "requested": round(float(q.request[r]) / s, 3),
        }
        if with_usage:
            res[name]["usage"] = round(float(q.usage[r]), 6)
    res["gpu"]["allocatedWhole"] = round(whole, 2)
    res["gpu"]["allocatedFractional"] = round(frac, 2)
    return {"name": q.name, "parent": q.parent.name if q.parent else "", "depth": depth,
            "leaf": q.is_leaf, "priority": q.spec.priority, "displayName": q.spec.display_name,
            "children": sorted(c.name for c in q.children), "runningGangs": running,
            "pendingGangs": pending, **res}
