"""`shoal simulate`: run the scheduling core on a virtual clock over a scenario and write a report."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from shoal.framework.config import ConfigError
from shoal.sim.errors import SimInputError

HELP = """\
Replay a workload on a simulated cluster with shoal's real scheduling core and report wait times,
job completion times, GPU allocation, fair share and fragmentation per queue.

  shoal simulate                              the built-in default scenario (a day of Philly jobs)
  shoal simulate SCENARIO.yaml [--config C.yaml] [--seed N] [--out DIR]
  shoal simulate compare A.yaml B.yaml ... [--scenario S.yaml]
                                              the same workload under several scheduler configs

The report directory (default reports/simulate-<name>) holds metrics.json, timeseries.csv,
jobs.csv, PNG plots and index.html. Scenario and config schemas: docs/simulator.md.
Exit code 2 on bad input (the message names the file and line or field).
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="simulate a workload on a virtual cluster (default scenario built in)",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs",
        nargs="*",
        metavar="SCENARIO.yaml | compare CONFIG.yaml ...",
        help="a scenario file, or `compare` followed by scheduler config files",
    )
    p.add_argument("--config", metavar="SCHEDULER.yaml", help="scheduler config (overrides the scenario's)")
    p.add_argument("--scenario", metavar="SCENARIO.yaml", help="scenario for `compare` (default: built-in)")
    p.add_argument("--seed", type=int, help="random seed (overrides the scenario's)")
    p.add_argument("--out", metavar="DIR", help="report directory (default: reports/simulate-<name>)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="compare: run up to N configurations in parallel processes (default 1)",
    )
    p.set_defaults(func=run)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def _run_one(
    scenario: Path | None, config: Path | None, seed: int | None, progress: bool, console: Console
) -> Any:
    from shoal.sim.scenario import load_scenario
    from shoal.sim.schedconf import load_config
    from shoal.sim.simulation import Simulation

    cfg = load_config(config) if config else None
    sc = load_scenario(scenario, seed=seed, config=cfg)
    sim = Simulation(sc)
    if not progress:
        return sim.run()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[clock]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{sc.name} · {sc.scheduler.name}", total=1.0, clock="")
        last = max((j.arrival for j in sc.jobs), default=0.0)

        def tick(now: float, horizon: float) -> None:
            total = min(horizon, max(last, 1.0) * 2)
            bar.update(task, completed=min(now / total, 1.0), clock=f"t={now / 3600:.1f}h")

        cb: Callable[[float, float], None] = tick
        return sim.run(progress=cb)


def _run_quiet(scenario: Path | None, config: Path, seed: int | None) -> Any:
    """One configuration in a worker process (no progress bar)."""
    return _run_one(scenario, config, seed, False, Console())


def run(args: argparse.Namespace) -> int:
    # A pipe or file gets the full table, not one squeezed into 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 132)
    progress = not args.no_progress and sys.stdout.isatty()
    try:
        if args.inputs and args.inputs[0] == "compare":
            return _compare(args, console, progress)
        if len(args.inputs) > 1:
            print(
                "error: shoal simulate takes one scenario file (or `compare CONFIG.yaml ...`)",
                file=sys.stderr,
            )
            return 2
        from shoal.sim.report import print_summary, write_report

        scenario = Path(args.inputs[0]) if args.inputs else None
        result = _run_one(scenario, Path(args.config) if args.config else None, args.seed, progress, console)
        out = Path(args.out) if args.out else Path("reports") / f"simulate-{_slug(result.scenario)}"
        print_summary(result, console)
        index = write_report(result, out)
        console.print(f"report: {index}")
        return 0
    except (SimInputError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {getattr(err, 'filename', '') or ''}: {err.strerror or err}", file=sys.stderr)
        return 2


def _compare(args: argparse.Namespace, console: Console, progress: bool) -> int:
    from shoal.sim.compare import write_compare

    configs = [Path(c) for c in args.inputs[1:]]
    if not configs:
        print("error: shoal simulate compare needs at least one scheduler config file", file=sys.stderr)
        return 2
    scenario = Path(args.scenario) if args.scenario else None
    if args.jobs > 1 and len(configs) > 1:
        from concurrent.futures import ProcessPoolExecutor

        from shoal.sim.scenario import load_scenario
        from shoal.sim.schedconf import load_config

        for c in configs:  # bad input is reported here, as one line, not from a worker
            load_scenario(scenario, seed=args.seed, config=load_config(c))
        with ProcessPoolExecutor(max_workers=min(args.jobs, len(configs))) as pool:
            futures = [pool.submit(_run_quiet, scenario, c, args.seed) for c in configs]
            results = [f.result() for f in futures]
    else:
        results = [_run_one(scenario, c, args.seed, progress, console) for c in configs]
    names = [r.config for r in results]
    if len(set(names)) != len(names):
        for r, c in zip(results, configs, strict=True):
            r.config = c.stem if names.count(r.config) > 1 else r.config
    out = Path(args.out) if args.out else Path("reports") / f"simulate-compare-{_slug(results[0].scenario)}"
    index = write_compare(results, out, console)
    console.print(f"report: {index}")
    return 0
