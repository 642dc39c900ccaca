"""A full cycle (all five actions) on a full cluster with a backlog, the shape a live scheduler
sees most: 500 nodes x 8 GPUs, 4,000 running 1-GPU pods, 1,000 pending 1-GPU pods that cannot
fit (two queues at their fair share). Prints the time of every action.

    python bench/bench_full_cycle.py [--nodes 500] [--pending 1000]
"""

from __future__ import annotations

import argparse
import time

from shoal.cycle import close_session, open_session
from shoal.defaults import action_registry
from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource

NOW = 1_700_000_000.0


def build(nodes: int, pending: int) -> ClusterSnapshot:
    snap = ClusterSnapshot(now=NOW)
    for i in range(nodes):
        snap.nodes.append(Node(f"n{i:04d}", {"cpu": 128_000, "memory": 1024**4, "nvidia.com/gpu": 8, "pods": 110},
                               labels={"nvidia.com/gpu.count": "8"}))
    half = nodes * 8 * 1000 // 2
    snap.queues = [Queue("a", creation=NOW, gpu=QueueResource(half, -1, 1.0)),
                   Queue("b", creation=NOW + 1, gpu=QueueResource(half, -1, 1.0))]
    k = 0
    for i in range(nodes):
        for _ in range(8):
            q = "a" if k % 2 == 0 else "b"
            name = f"run-{k}"
            snap.podgroups.append(PodGroup(name, name, "ns", q, 50, True, NOW - 7200 + k, last_start_time=NOW - 600))
            snap.pods.append(Pod(name, name, "ns", name, PodStatus.RUNNING, 1000, 2**30, GpuRequest(whole=1),
                                 node=f"n{i:04d}"))
            k += 1
    for j in range(pending):
        q = "a" if j % 2 == 0 else "b"
        name = f"pend-{j}"
        snap.podgroups.append(PodGroup(name, name, "ns", q, 50, True, NOW - j))
        snap.pods.append(Pod(name, name, "ns", name, PodStatus.PENDING, 1000, 2**30, GpuRequest(whole=1)))
    return snap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pending", type=int, default=1000)
    a = ap.parse_args()
    snap = build(a.nodes, a.pending)
    config = SchedulerConfig()
    c0 = time.process_time()
    ssn = open_session(snap, config)
    print(f"nodes={a.nodes} running={a.nodes * 8} pending={a.pending}")
    print(f"  open session      {time.process_time() - c0:7.3f} s CPU")
    registry = action_registry()
    total = time.process_time() - c0
    for name in config.actions:
        c1 = time.process_time()
        registry[name](ssn)
        dt = time.process_time() - c1
        total += dt
        print(f"  {name:<17} {dt:7.3f} s CPU")
    c1 = time.process_time()
    close_session(ssn)
    total += time.process_time() - c1
    d = ssn.decisions
    print(f"  total             {total:7.3f} s CPU; binds {len(d.binds)}, pipelines {len(d.pipelines)}, "
          f"evictions {len(d.evictions)}")


if __name__ == "__main__":
    main()
