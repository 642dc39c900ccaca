"""Benchmark the simulator: events/s, cycles/s and wall/CPU time of a scenario (default: built-in).

    python bench/bench_sim.py [SCENARIO.yaml] [--config C.yaml] [--repeat N] [--profile]

Prints one line per run and the best run. The core's share of the time (`run_cycle`) is shown
separately from the simulator's own work (events, snapshots, metrics), so it is clear which one
to optimise. Figures, not a timed test.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

from shoal.sim.scenario import load_scenario
from shoal.sim.schedconf import load_config
from shoal.sim.simulation import Simulation


def one(scenario: Path | None, config: Path | None) -> dict[str, float]:
    t0 = time.perf_counter()
    sc = load_scenario(scenario, config=load_config(config) if config else None)
    load = time.perf_counter() - t0
    r = Simulation(sc).run()
    c = r.counters
    cycles = c.get("cycles_run", 0)
    return {
        "load_s": load,
        "wall_s": c["wall_seconds"],
        "cpu_s": c["cpu_seconds"],
        "core_s": c["core_seconds"],
        "events": c["events"],
        "cycles": cycles,
        "skipped": c.get("cycles_skipped", 0) + c.get("cycles_idle", 0),
        # per CPU second: on a shared machine wall time also measures the other tenants
        "events_per_s": c["events"] / c["cpu_seconds"],
        "cycles_per_s": cycles / c["cpu_seconds"],
        "jobs": c["jobs"],
        "gpus": r.total_gpus,
        "sim_hours": r.end / 3600,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", nargs="?", type=Path)
    ap.add_argument("--config", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="cProfile one run, print the top 25")
    a = ap.parse_args()
    if a.profile:
        prof = cProfile.Profile()
        prof.enable()
        one(a.scenario, a.config)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        return
    runs = []
    for i in range(a.repeat):
        m = one(a.scenario, a.config)
        runs.append(m)
        print(
            f"run {i + 1}: {m['jobs']} jobs, {m['gpus']:g} GPUs, {m['sim_hours']:.1f} simulated h | "
            f"wall {m['wall_s']:.2f}s (cpu {m['cpu_s']:.2f}s, of it in the core {m['core_s']:.2f}s, "
            f"load {m['load_s']:.2f}s) | "
            f"{m['events']} events = {m['events_per_s']:.0f} events/s | {m['cycles']} cycles run "
            f"({m['skipped']} skipped/idle) = {m['cycles_per_s']:.1f} cycles/s, "
            f"{1000 * m['core_s'] / max(m['cycles'], 1):.1f} ms/cycle in the core"
        )
    best = min(runs, key=lambda m: m["cpu_s"])
    print(
        f"best: wall {best['wall_s']:.2f}s, cpu {best['cpu_s']:.2f}s, "
        f"{best['events_per_s']:.0f} events per CPU second, "
        f"{best['cycles_per_s']:.1f} cycles per CPU second; "
        f"core (run_cycle) share of the CPU time {100 * best['core_s'] / best['cpu_s']:.0f}%"
    )


if __name__ == "__main__":
    main()
