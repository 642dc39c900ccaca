"""An exported cluster as a `shoal simulate` scenario: nodes, queues and its jobs on a clock.

Every job of the snapshot becomes a simulated job: a running one arrives at its start time (so
replayed from the earliest one, the running jobs are placed first, as they were) and runs for
its elapsed time plus its expected remaining time; a pending one arrives at its creation time and
runs for its expected run time (`shoal.visibility.runtimes`). Times count from the earliest
arrival. The simulator models gangs of identical pods with whole GPUs or one fraction of one GPU:
a gang of mixed pods takes its largest pod's shape, a `gpu-memory` pod the fraction of its node's
GPU memory, a multi-device fraction one device. Pods of other schedulers are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoal.kai.units import PRIORITY_CLASSES
from shoal.kube.cache import OTHER_JOB
from shoal.model.pod import Pod
from shoal.model.snapshot import ClusterSnapshot
from shoal.model.status import ACTIVE_USED, PodStatus

#: (job uid, elapsed seconds) -> expected remaining seconds.
Remaining = Callable[[str, float], float]


def _priority_class(value: int) -> str:
    """The KAI priority class with the largest value not above `value` (train below all)."""
    best = "train"
    for name, v in sorted(PRIORITY_CLASSES.items(), key=lambda kv: kv[1]):
        if value >= v:
            best = name
    return best


def _gpus(pod: Pod, device_mib: int) -> float:
    g = pod.gpu
    if g.whole:
        return float(g.whole)
    if g.portion_milli:
        return round(g.portion_milli / 1000, 2)
    if g.memory_mib:
        return min(round(g.memory_mib / max(device_mib, 1), 2) or 0.01, 0.99)
    return 0.0


def scenario_from_snapshot(snap: ClusterSnapshot, queues: list[dict[str, Any]], config: dict[str, Any],
                           remaining: Remaining, name: str = "snapshot") -> dict[str, Any]:
    """The scenario mapping (`shoal.sim.scenario` schema) of `snap`; `queues` are Queue objects."""
    device_mib = max((n.gpu_memory_mib for n in snap.nodes), default=81920)
    members: dict[str, list[Pod]] = {}
    for p in snap.pods:
        if p.job != OTHER_JOB:
            members.setdefault(p.job, []).append(p)
    groups = {g.uid: g for g in snap.podgroups}
    raw_jobs = []
    for uid, pods in members.items():
        pg = groups.get(uid)
        if pg is None:
            continue
        running = [p for p in pods if p.status & ACTIVE_USED and p.status != PodStatus.RELEASING]
        started = min((p.start_time for p in running if p.start_time is not None), default=None)
        if running and started is not None:
            elapsed = max(snap.now - started, 0.0)
            arrival, duration = started, elapsed + remaining(uid, elapsed)
        else:
            arrival, duration = pg.creation, remaining(uid, 0.0)
        shape = max(pods, key=lambda p: (_gpus(p, device_mib), p.cpu_milli, p.memory))
        job: dict[str, Any] = {"name": f"{pg.namespace}.{pg.name}" if pg.namespace else pg.name,
                               "arrival": arrival, "duration": max(round(duration, 3), 1.0), "queue": pg.queue,
                               "pods": len(pods), "gpus": _gpus(shape, device_mib),
                               "cpu": f"{shape.cpu_milli}m", "memory": shape.memory,
                               "priority_class": _priority_class(pg.priority)}
        if pg.topology is not None:
            job.update(topology=pg.topology.topology, required_level=pg.topology.required_level,
                       preferred_level=pg.topology.preferred_level)
        raw_jobs.append(job)
    t0 = min((j["arrival"] for j in raw_jobs), default=snap.now)
    for j in raw_jobs:
        j["arrival"] = round(j["arrival"] - t0, 3)
    raw_jobs.sort(key=lambda j: (j["arrival"], j["name"]))
    nodes = [{"name": n.name, "cpu": f"{n.allocatable.get('cpu', 0)}m", "memory": n.allocatable.get("memory", 0),
              "gpus": n.gpu_count, "gpu_memory_mib": n.gpu_memory_mib, "labels": dict(n.labels)}
             for n in sorted(snap.nodes, key=lambda n: n.name)]
    return {
        "name": name,
        "description": "exported by `shoal snapshot`: running jobs arrive at their start time, pending ones "
                       "at their creation; times count from the earliest",
        "cluster": {"nodes": nodes, "topologies": [{"name": t.name, "levels": list(t.levels)}
                                                   for t in snap.topologies]},
        "queues": queues,
        "workload": {"source": "jobs", "jobs": raw_jobs},
        "simulation": {"cycle_interval": 10, "duration": 0},
        "scheduler": config,
    }
