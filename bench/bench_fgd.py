"""Benchmark of the FGD experiment: seconds per run of each policy on `default` (one core), and
optionally the wall time of the whole 17 x 6 x 10 grid on N processes.

    python bench/bench_fgd.py [--seeds 42-44] [--rng go] [--grid] [--jobs 2] [--traces DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from shoal.cli.cmd_fgd import parse_seeds
from shoal.sim.fgd.experiment import run_grid, run_single
from shoal.sim.fgd.policies import PAPER_POLICIES
from shoal.sim.fgd.workload import WORKLOADS
from shoal.sim.openb import default_traces_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-44"))
    parser.add_argument("--rng", choices=("go", "py"), default="go")
    parser.add_argument("--grid", action="store_true", help="also time the whole grid")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--traces", type=Path, default=None)
    args = parser.parse_args(argv)
    traces = args.traces or default_traces_dir()

    print(f"default workload, {len(args.seeds)} seeds, {args.rng} rng, one core (loading excluded):")
    print(f"{'policy':<12}{'median s/run':>14}{'max s/run':>12}")
    for policy in PAPER_POLICIES:
        times = [run_single(traces, "default", policy, seed, args.rng).seconds for seed in args.seeds]
        print(f"{policy:<12}{statistics.median(times):>14.3f}{max(times):>12.3f}")

    if args.grid:
        seeds = list(range(42, 52))
        start = time.perf_counter()
        cells = run_grid(traces, WORKLOADS, PAPER_POLICIES, seeds, args.rng, args.jobs)
        wall = time.perf_counter() - start
        runs = [r for c in cells for r in c.runs]
        cpu = sum(r.seconds for r in runs)
        slowest = max(runs, key=lambda r: r.seconds)
        print(f"grid: {len(runs)} runs in {wall:.1f} s wall on {args.jobs} processes "
              f"({cpu:.1f} s of simulation; slowest run {slowest.seconds:.2f} s: "
              f"{slowest.workload}/{slowest.policy}/{slowest.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
