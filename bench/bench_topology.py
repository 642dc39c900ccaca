"""Topology benchmark in the shape of Kueue's TAS performance test (reference/peers.md §2.2).

640 nodes (1 block x 10 racks x 64 nodes, 96 CPU and 256 GiB each); 5 departments x 6 queues
(each queue: 20 CPU quota, 120 CPU limit; each department: 120 CPU); per queue 350 small gangs
(2 pods x 500m, one every 100 ms, 200 ms runtime), 100 medium (4 x 1250m, every 500 ms, 500 ms)
and 50 large (8 x 2500m, every 1200 ms, 1000 ms): 15,000 gangs, 45,000 pods. Gangs alternate
between a required and a preferred rack constraint.

A virtual clock runs one scheduling cycle every `--period` seconds: it builds a ClusterSnapshot
from the bench's own state, calls `shoal.cycle.run_cycle`, binds what the cycle bound, and
finishes pods once their runtime has passed. Only `run_cycle` is timed.

    python bench/bench_topology.py [--period 1.0] [--actions allocate] [--scale 1.0] [--queue-depth 0]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from shoal.cycle import paused_gc, run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.model import (
    ClusterSnapshot,
    Node,
    Pod,
    PodGroup,
    PodStatus,
    Queue,
    QueueResource,
    Topology,
    TopologyConstraint,
)

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
TOPOLOGY = Topology("tas", (BLOCK, RACK))
RACKS, NODES_PER_RACK = 10, 64
GIB = 1024**3
#: class -> (gangs per queue, pods per gang, CPU milli per pod, created every (s), runtime (s), priority)
CLASSES = {
    "small": (350, 2, 500, 0.1, 0.2, 50),
    "medium": (100, 4, 1250, 0.5, 0.5, 60),
    "large": (50, 8, 2500, 1.2, 1.0, 70),
}
DEPARTMENTS, QUEUES_PER_DEPARTMENT = 5, 6


@dataclass(slots=True)
class Gang:
    pg: PodGroup
    pods: list[Pod]
    cls: str
    kind: str  # required | preferred
    created: float
    runtime: float
    placed_at: float | None = None
    finish_at: float | None = None
    racks: set[str] = field(default_factory=set)


def build_nodes() -> tuple[list[Node], dict[str, str]]:
    nodes, rack_of = [], {}
    for r in range(RACKS):
        for k in range(NODES_PER_RACK):
            name = f"n-r{r:02d}-{k:02d}"
            nodes.append(Node(name, {"cpu": 96_000, "memory": 256 * GIB, "pods": 110},
                              labels={BLOCK: "b1", RACK: f"r{r:02d}", "kubernetes.io/hostname": name}))
            rack_of[name] = f"r{r:02d}"
    return nodes, rack_of


def build_queues() -> list[Queue]:
    queues = []
    for d in range(DEPARTMENTS):
        dept = f"dept{d}"
        queues.append(Queue(dept, creation=float(d), cpu=QueueResource(120_000, 120_000, 1.0),
                            gpu=QueueResource(0, -1, 0.0), memory=QueueResource(-1, -1, 1.0)))
        for q in range(QUEUES_PER_DEPARTMENT):
            queues.append(Queue(f"{dept}-q{q}", parent=dept, creation=float(10 + d * 10 + q),
                                cpu=QueueResource(20_000, 120_000, 1.0), gpu=QueueResource(0, -1, 0.0),
                                memory=QueueResource(-1, -1, 1.0)))
    return queues


def build_gangs(scale: float) -> list[Gang]:
    gangs: list[Gang] = []
    leaves = [f"dept{d}-q{q}" for d in range(DEPARTMENTS) for q in range(QUEUES_PER_DEPARTMENT)]
    for qi, queue in enumerate(leaves):
        for cls, (count, size, cpu, every, runtime, prio) in CLASSES.items():
            for k in range(int(count * scale)):
                created = k * every + qi * 0.001
                name = f"{queue}-{cls}-{k}"
                kind = "required" if k % 2 == 0 else "preferred"
                constraint = (TopologyConstraint("tas", required_level=RACK) if kind == "required"
                              else TopologyConstraint("tas", preferred_level=RACK))
                pg = PodGroup(name, name, "bench", queue, prio, True, created, min_member=size,
                              topology=constraint)
                pods = [Pod(f"{name}-{i}", f"{name}-{i}", "bench", name, PodStatus.PENDING, cpu, GIB,
                            creation=created) for i in range(size)]
                gangs.append(Gang(pg, pods, cls, kind, created, runtime))
    gangs.sort(key=lambda g: g.created)
    return gangs


def run(period: float, actions: tuple[str, ...], scale: float, max_cycles: int, depth: int = 0) -> None:
    nodes, rack_of = build_nodes()
    queues = build_queues()
    gangs = build_gangs(scale)
    config = SchedulerConfig(actions=actions,
                             queue_depth_per_action={a: depth for a in actions} if depth else {})
    by_uid = {g.pg.uid: g for g in gangs}
    arrived = 0
    active: dict[str, Gang] = {}
    now = 0.0
    sched_time, cycle_times, cpu_time = 0.0, [], 0.0
    done = 0
    while done < len(gangs) and len(cycle_times) < max_cycles:
        while arrived < len(gangs) and gangs[arrived].created <= now:
            active[gangs[arrived].pg.uid] = gangs[arrived]
            arrived += 1
        for uid in [u for u, g in active.items() if g.finish_at is not None and g.finish_at <= now]:
            del active[uid]
            done += 1
        snap = ClusterSnapshot(now=now, nodes=nodes, queues=queues, topologies=[TOPOLOGY])
        for g in active.values():
            snap.podgroups.append(g.pg)
            snap.pods.extend(g.pods)
        t0, c0 = time.perf_counter(), time.process_time()
        with paused_gc():  # as the simulator and the service run cycles
            result = run_cycle(snap, config)
            decisions = result.decisions
            result.release()  # freeing the session is part of the cycle's cost
            del result
        dt = time.perf_counter() - t0
        cpu_time += time.process_time() - c0
        sched_time += dt
        cycle_times.append(dt)
        for b in decisions.binds:
            g = by_uid[b.job]
            pod = next(p for p in g.pods if p.uid == b.pod)
            pod.status, pod.node = PodStatus.RUNNING, b.node
            g.racks.add(rack_of[b.node])
        for e in decisions.evictions:
            g = by_uid[e.job]
            for pod in g.pods:
                if pod.uid == e.pod:
                    pod.status, pod.node = PodStatus.PENDING, None
            g.placed_at, g.finish_at = None, None
        for uid in {b.job for b in decisions.binds}:
            g = by_uid[uid]
            if g.placed_at is None and all(p.status == PodStatus.RUNNING for p in g.pods):
                g.placed_at, g.finish_at = now, now + g.runtime
                g.pg.last_start_time = now
        now += period
    report(gangs, sched_time, cycle_times, now, done)
    print(f"scheduler CPU time (process time, unaffected by other load) {cpu_time:.2f} s")


def report(gangs: list[Gang], sched_time: float, cycle_times: list[float], now: float, done: int) -> None:
    n = len(cycle_times)
    print(f"gangs {len(gangs)} ({sum(len(g.pods) for g in gangs)} pods), finished {done}, "
          f"virtual time {now:.0f} s, cycles {n}")
    print(f"total scheduler time {sched_time:.2f} s; per cycle mean {1000 * sched_time / max(n, 1):.1f} ms, "
          f"max {1000 * max(cycle_times, default=0):.1f} ms")
    print(f"{'class':<8} {'kind':<10} {'gangs':>6} {'placed':>7} {'mean wait (s)':>14} {'one rack':>9}")
    for cls in CLASSES:
        for kind in ("required", "preferred"):
            sel = [g for g in gangs if g.cls == cls and g.kind == kind]
            placed = [g for g in sel if g.placed_at is not None]
            wait = sum(g.placed_at - g.created for g in placed if g.placed_at is not None) / max(len(placed), 1)
            one = sum(1 for g in placed if len(g.racks) == 1) / max(len(placed), 1)
            print(f"{cls:<8} {kind:<10} {len(sel):>6} {len(placed):>7} {wait:>14.1f} {100 * one:>8.1f}%")
    placed_all = [g for g in gangs if g.placed_at is not None]
    one_all = sum(1 for g in placed_all if len(g.racks) == 1) / max(len(placed_all), 1)
    print(f"share of placed gangs in one rack: {100 * one_all:.1f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--period", type=float, default=1.0, help="virtual seconds between cycles")
    ap.add_argument("--actions", default="allocate", help="comma-separated actions per cycle")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the gangs per class")
    ap.add_argument("--max-cycles", type=int, default=100_000)
    ap.add_argument("--queue-depth", type=int, default=0,
                    help="KAI's queueDepthPerAction for every action (jobs tried per queue); 0 = all")
    args = ap.parse_args()
    run(args.period, tuple(a.strip() for a in args.actions.split(",") if a.strip()), args.scale,
        args.max_cycles, args.queue_depth)


if __name__ == "__main__":
    main()
