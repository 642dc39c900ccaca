"""Benchmark of the FGD experiment: CPU seconds of one seed of each policy (one core, loading
excluded) on `default` and on the slowest workload, and optionally the wall time of the grid.

    python bench/bench_fgd.py [--seeds 42-44] [--rng go] [--workloads default,gpuspec33,gpushare80]
                              [--policies fgd,bestfit] [--scan] [--grid] [--jobs 2] [--traces DIR]

`--scan` first times one seed of `fgd` (the slowest policy) on every workload and adds the
slowest workload to the list. The issue's bar is "one seed of any policy in under 1 s on one core";
each row says whether its slowest seed met it. Time is `time.process_time()` of the run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from shoal.cli.cmd_fgd import parse_seeds
from shoal.experiments.fgd.experiment import run_grid, run_single
from shoal.experiments.fgd.policies import PAPER_POLICIES, policy_registry
from shoal.experiments.fgd.workload import WORKLOADS
from shoal.sim.loaders.openb import default_traces_dir

BAR_SECONDS = 1.0
BENCH_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd", "kai-binpack", "kai-spread",
                  "kai-spread-sharing", "fragaware")


def slowest_workload(traces: Path, policy: str, seed: int, rng: str) -> str:
    """The workload on which one seed of ``policy`` takes the most CPU time (printed as it goes)."""
    times = {w: run_single(traces, w, policy, seed, rng).seconds for w in WORKLOADS}
    for w, s in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"  scan {policy}/{w}/{seed}: {s:.3f} s")
    return max(times, key=lambda w: times[w])


def time_policies(traces: Path, workload: str, policies: list[str], seeds: list[int], rng: str) -> None:
    print(f"{workload}: {len(seeds)} seed(s), {rng} rng, CPU s of one seed (loading excluded)")
    print(f"{'policy':<12}{'median s':>10}{'max s':>8}  < {BAR_SECONDS:.0f} s")
    run_single(traces, workload, "bestfit", seeds[0], rng)  # load the workload outside the timings
    for policy in policies:
        times = [run_single(traces, workload, policy, seed, rng).seconds for seed in seeds]
        ok = "yes" if max(times) < BAR_SECONDS else "NO"
        print(f"{policy:<12}{statistics.median(times):>10.3f}{max(times):>8.3f}  {ok}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-44"))
    parser.add_argument("--rng", choices=("go", "py"), default="go")
    parser.add_argument("--workloads", default="default,gpuspec33,gpushare80",
                        help="comma-separated (default: default and the slowest for fgd before / after the memo)")
    parser.add_argument("--policies", default=",".join(BENCH_POLICIES))
    parser.add_argument("--scan", action="store_true", help="find the slowest workload for fgd and add it")
    parser.add_argument("--grid", action="store_true", help="also time the whole grid (paper policies)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--traces", type=Path, default=None)
    args = parser.parse_args(argv)
    traces = args.traces or default_traces_dir()
    known = policy_registry()
    policies = [p for p in args.policies.split(",") if p]
    unknown = [p for p in policies if p not in known]
    if unknown:
        parser.error(f"unknown policies: {', '.join(unknown)}")
    workloads = [w for w in args.workloads.split(",") if w]
    if args.scan:
        slow = slowest_workload(traces, "fgd", args.seeds[0], args.rng)
        print(f"slowest workload for fgd: {slow}")
        workloads += [] if slow in workloads else [slow]
    for workload in workloads:
        time_policies(traces, workload, policies, args.seeds, args.rng)

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
