"""Reclaim benchmark in the shape of KAI's "reclaim large jobs" (kai-spec §8).

N nodes x 8 GPUs, fully used by 8N one-GPU jobs of `queue-0` (quota 0); one pending gang of
N/10 tasks x 8 GPUs in `queue-1` (quota 8N). One cycle runs only `reclaim`; the gang must end
pipelined on N/10 nodes with 8N/10 victims evicted. Prints seconds per cycle (session open and
the reclaim action separately) and the growth factor between sizes.

    python bench/bench_reclaim.py [N ...]        (default 100 200 500 1000)
"""

from __future__ import annotations

import sys
import time

from shoal.cycle import close_session, open_session, run_actions
from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource

GIB = 1 << 30


def build(n: int) -> ClusterSnapshot:
    snap = ClusterSnapshot(now=1_000_000.0)
    snap.queues = [Queue("queue-0", gpu=QueueResource(0, -1, 1.0), creation=0.0),
                   Queue("queue-1", gpu=QueueResource(8 * n * 1000, -1, 1.0), creation=1.0)]
    for i in range(n):
        snap.nodes.append(Node(f"node-{i:05d}", {"cpu": 128_000, "memory": 1024 * GIB, "nvidia.com/gpu": 8,
                                                 "pods": 110}))
    for j in range(8 * n):
        name = f"train-{j:06d}"
        pg = PodGroup(name, name, "ns", "queue-0", 50, True, creation=float(j), min_member=1)
        pg.last_start_time = 0.0
        snap.podgroups.append(pg)
        snap.pods.append(Pod(f"{name}-0", f"{name}-0", "ns", name, PodStatus.RUNNING, cpu_milli=1000, memory=GIB,
                             gpu=GpuRequest(whole=1), node=f"node-{j // 8:05d}", creation=float(j)))
    tasks = max(n // 10, 1)
    snap.podgroups.append(PodGroup("big", "big", "ns", "queue-1", 50, True, creation=1e9, min_member=tasks))
    for t in range(tasks):
        snap.pods.append(Pod(f"big-{t}", f"big-{t}", "ns", "big", PodStatus.PENDING, cpu_milli=1000, memory=GIB,
                             gpu=GpuRequest(whole=8), creation=1e9))
    return snap


def measure(n: int) -> tuple[float, float, int, int]:
    snap = build(n)
    config = SchedulerConfig(actions=("reclaim",))
    t0 = time.perf_counter()
    ssn = open_session(snap, config)
    t1 = time.perf_counter()
    run_actions(ssn, config.actions)
    close_session(ssn)
    t2 = time.perf_counter()
    d = ssn.decisions
    return t1 - t0, t2 - t1, len(d.evictions), len(d.pipelines)


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [100, 200, 500, 1000]
    print(f"{'nodes':>6} {'victims':>8} {'pipelined':>9} {'open s':>8} {'reclaim s':>10} {'total s':>8} {'growth':>7}")
    prev: tuple[int, float] | None = None
    for n in sizes:
        t_open, t_reclaim, ev, pl = measure(n)
        total = t_open + t_reclaim
        growth = f"x{total / prev[1]:.2f}" if prev else "-"
        print(f"{n:>6} {ev:>8} {pl:>9} {t_open:>8.3f} {t_reclaim:>10.3f} {total:>8.3f} {growth:>7}")
        ok = ev == 8 * max(n // 10, 1) and pl == max(n // 10, 1)
        if not ok:
            print(f"  unexpected outcome at {n} nodes: {ev} evictions, {pl} pipelined", file=sys.stderr)
        prev = (n, total)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
