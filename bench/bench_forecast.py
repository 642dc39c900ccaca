"""Cost of one start-time forecast on a large synthetic cluster (docs/visibility.md, "Predicted start times").

    python bench/bench_forecast.py [--nodes 1000] [--running 6500] [--gangs 300] [--budget 10]

The cluster is bench_cycle.py's shape (8-GPU nodes, running 1-GPU pods spread so every node has
some free GPUs, pending gangs of 10 1-GPU pods over 50 queues); running and started jobs run
600 s to 2 h 10 min (a hash of the job's name). Prints the forecast's cycles, how many gangs got
a prediction, and its wall and CPU time, without and with the time budget `shoal run` gives it
(`--eta-budget`).
"""

from __future__ import annotations

import argparse
import time
import zlib

from bench_cycle import build
from shoal.framework.config import SchedulerConfig
from shoal.visibility.forecast import forecast


def runtime(uid: str, elapsed: float) -> float:
    return 600.0 + zlib.crc32(uid.encode()) % 7200


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--running", type=int, default=6500, help="running 1-GPU pods (at most 7 per node)")
    p.add_argument("--gangs", type=int, default=300, help="pending gangs of 10 1-GPU pods")
    p.add_argument("--budget", type=float, default=10.0, help="seconds (shoal run --eta-budget)")
    a = p.parse_args()
    snap = build(a.nodes, a.running, a.gangs, 10, 50)
    for budget in (None, a.budget):
        deadline = time.perf_counter() + (budget if budget is not None else float("inf"))
        t0, c0 = time.perf_counter(), time.process_time()
        fc = forecast(snap, SchedulerConfig(), runtime, stop=lambda d=deadline: time.perf_counter() > d)
        got = sum(v is not None for v in fc.starts.values())
        print(f"budget {'none' if budget is None else f'{budget:g} s'}: {fc.cycles} cycles, {got}/{len(fc.starts)} "
              f"gangs predicted, complete={fc.complete}, {time.perf_counter() - t0:.1f} s wall, "
              f"{time.process_time() - c0:.1f} s CPU")


if __name__ == "__main__":
    main()
