"""Cycle benchmark (issue 2): 5,000 nodes x 8 GPUs, 30,000 running 1-GPU pods, 10,000 pending
1-GPU pods in 1,000 gangs of 10 over 50 queues. Prints session-open time, allocate-action time,
pods placed, a greedy numpy baseline in the same process and the profile's top entries.

With `--constrained F` (issue 16) the fraction F of the pending gangs carry kube-scheduler
constraints (alternately: required pod anti-affinity per host against their own gang; a
DoNotSchedule zone spread plus a ScheduleAnyway host spread of their own gang), and the allocate
time is printed for both the unconstrained and the constrained backlog.

    python bench/bench_cycle.py [--nodes 5000] [--constrained 0.2] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numpy as np

from shoal.actions import allocate
from shoal.cycle import open_session, paused_gc
from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource
from shoal.model.constraints import LabelSelector, PodAffinity, PodAffinityTerm, Requirement, SpreadConstraint

NOW = 1_700_000_000.0


def constraints(g: int, fraction: float) -> dict[str, object]:
    """Pod fields of gang g: none, or (for a `fraction` of the gangs) anti-affinity or spread."""
    every = round(1 / fraction) if fraction > 0 else 0
    if not every or g % every:
        return {}
    own = LabelSelector((Requirement("gang", "In", (f"gang-{g}",)),))
    if (g // every) % 2 == 0:
        term = PodAffinityTerm(own, "kubernetes.io/hostname", frozenset(("ns",)))
        return {"pod_affinity": PodAffinity(required_anti=(term,))}
    return {"spread": (SpreadConstraint(2, "zone", True, own),
                       SpreadConstraint(1, "kubernetes.io/hostname", False, own))}


def build(nodes: int, running: int, gangs: int, gang_size: int, queues: int,
          constrained: float = 0.0) -> ClusterSnapshot:
    snap = ClusterSnapshot(now=NOW)
    for i in range(nodes):
        name = f"node-{i:05d}"
        snap.nodes.append(Node(name, {"cpu": 128_000, "memory": 1024 * 1024**3,
                                      "nvidia.com/gpu": 8, "pods": 110},
                               labels={"nvidia.com/gpu.count": "8", "kubernetes.io/hostname": name,
                                       "zone": f"z{i % 20}"}))
    quota = nodes * 8 * 1000 // queues
    for q in range(queues):
        snap.queues.append(Queue(f"q{q:02d}", creation=NOW + q,
                                 gpu=QueueResource(quota, -1, 1.0)))
    # Running pods: spread so that every node has some free GPUs (like a busy real cluster).
    rng = np.random.default_rng(7)
    per_node = np.zeros(nodes, dtype=np.int64)
    for k in range(running):
        i = int(rng.integers(nodes))
        while per_node[i] >= 7:
            i = (i + 1) % nodes
        per_node[i] += 1
        name = f"run-{k}"
        snap.podgroups.append(PodGroup(name, name, "ns", f"q{k % queues:02d}", 50, True, NOW - 3600 - k,
                                       last_start_time=NOW - 600))
        snap.pods.append(Pod(name, name, "ns", name, PodStatus.RUNNING, 1000, 4 * 1024**3,
                             GpuRequest(whole=1), node=f"node-{i:05d}", labels={"app": f"a{k % 7}"}))
    for g in range(gangs):
        name = f"gang-{g}"
        snap.podgroups.append(PodGroup(name, name, "ns", f"q{g % queues:02d}", 50, True, NOW - g,
                                       min_member=gang_size))
        for t in range(gang_size):
            uid = f"{name}-{t}"
            snap.pods.append(Pod(uid, uid, "ns", name, PodStatus.PENDING, 1000, 4 * 1024**3, GpuRequest(whole=1),
                                 labels={"gang": name}, **constraints(g, constrained)))  # type: ignore[arg-type]
    return snap


def greedy_baseline(snap: ClusterSnapshot) -> tuple[float, int]:
    """A bare numpy loop placing the pending pods first-fit by free GPUs (no policy at all)."""
    names = sorted(n.name for n in snap.nodes)
    index = {n: i for i, n in enumerate(names)}
    free = np.full(len(names), 8, dtype=np.int64)
    for p in snap.pods:
        if p.node is not None:
            free[index[p.node]] -= 1
    pending = [p for p in snap.pods if p.status == PodStatus.PENDING]
    t0 = time.perf_counter()
    placed = 0
    for _p in pending:
        cand = np.where(free >= 1, free, 99)
        i = int(np.argmin(cand))
        if cand[i] == 99:
            break
        free[i] -= 1
        placed += 1
    return time.perf_counter() - t0, placed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--running", type=int, default=30000)
    ap.add_argument("--gangs", type=int, default=1000)
    ap.add_argument("--gang-size", type=int, default=10)
    ap.add_argument("--queues", type=int, default=50)
    ap.add_argument("--constrained", type=float, default=0.0,
                    help="fraction of pending gangs with anti-affinity or spread; both runs are printed")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    if a.constrained > 0:
        base = run(a, 0.0)
        con = run(a, a.constrained)
        print(f"allocate CPU: unconstrained {base:.3f} s, {a.constrained:.0%} of gangs constrained {con:.3f} s "
              f"({con / max(base, 1e-9):.2f}x)")
        return
    run(a, 0.0)


def run(a: argparse.Namespace, constrained: float) -> float:
    """Build, open a session and run allocate; print the figures; return the allocate CPU time."""
    snap = build(a.nodes, a.running, a.gangs, a.gang_size, a.queues, constrained)
    config = SchedulerConfig(actions=("allocate",))
    with paused_gc():  # as the simulator and the service run cycles
        t0, c0 = time.perf_counter(), time.process_time()
        ssn = open_session(snap, config)
        t_open, c_open = time.perf_counter() - t0, time.process_time() - c0
        prof = cProfile.Profile() if a.profile else None
        t0, c0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        allocate.run(ssn)
        if prof:
            prof.disable()
        t_alloc, c_alloc = time.perf_counter() - t0, time.process_time() - c0
    placed = len(ssn.decisions.binds) + len(ssn.decisions.pipelines)
    t_base, base_placed = greedy_baseline(snap)
    print(f"nodes={a.nodes} running={a.running} pending={a.gangs * a.gang_size} "
          f"gangs={a.gangs}x{a.gang_size} queues={a.queues} constrained={constrained:.0%}")
    print(f"session open (snapshot -> session): {t_open:.3f} s wall, {c_open:.3f} s CPU")
    print(f"allocate action: {t_alloc:.3f} s wall, {c_alloc:.3f} s CPU (process time, less affected by other "
          f"load), pods placed {placed} ({placed / max(c_alloc, 1e-9):,.0f} pods per CPU second)")
    print(f"greedy numpy baseline (no policy): {t_base:.3f} s, pods placed {base_placed}")
    print(f"ratio allocate / baseline: {t_alloc / max(t_base, 1e-9):.2f}x")
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(18)
        print(s.getvalue())
    return c_alloc


if __name__ == "__main__":
    main()
