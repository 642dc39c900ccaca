"""`shoal fgd`: the FGD paper's (ATC'23) placement experiment on the Alibaba openb trace.

One cell:  shoal fgd --workload default --policy fgd --seeds 42-51 [--rng go|py] [--json FILE]
The grid:  shoal fgd --grid [--rng go|py] [--json FILE] [--jobs 2]
See docs/fgd.md for the protocol, the output format and the measured results.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from shoal.experiments.fgd.experiment import CellResult, RunResult, run_grid
from shoal.experiments.fgd.policies import PAPER_POLICIES, policy_registry
from shoal.experiments.fgd.published import published_allocation
from shoal.experiments.fgd.streams import RNG_KINDS
from shoal.experiments.fgd.workload import WORKLOADS
from shoal.sim.datafiles import locate, missing_message
from shoal.sim.loaders.openb import NODE_FILE, OPENB_DIR, OpenbFormatError, default_traces_dir, pod_file

Published = dict[tuple[str, str, int], list[float | None]]


def parse_seeds(text: str) -> list[int]:
    """``42-51`` -> 42..51; ``42,45,50-51`` -> [42, 45, 50, 51]."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            seeds.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad seed list {text!r} (expected e.g. 42-51 or 42,45)") from None
    if not seeds:
        raise argparse.ArgumentTypeError("empty seed list")
    return seeds


def _names(text: str | None, known: tuple[str, ...] | list[str], what: str) -> list[str]:
    if text is None:
        return list(known)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("fgd", help="replay the FGD paper's placement experiment (openb trace)")
    p.add_argument("--workload", help="workload(s), comma-separated (default: default; --grid: all 17)")
    p.add_argument("--policy", help="policy(ies), comma-separated (default: fgd; --grid: the paper's six)")
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"), help="e.g. 42-51 (default)")
    p.add_argument("--rng", choices=RNG_KINDS, default="go",
                   help="go: replay Go's math/rand stream (exact); py: Python's random (in distribution)")
    p.add_argument("--grid", action="store_true", help="every workload x policy x seed")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--json", type=Path, help="write the results as JSON to this file")
    p.add_argument("--traces", type=Path, default=None,
                   help="traces directory (default: $SHOAL_TRACES, else the traces shipped with shoal)")
    p.set_defaults(func=run)


def missing_trace(traces: Path, workloads: list[str], given: bool) -> str | None:
    """A one-line message for the first trace file the runs need that is absent (plain or ``.gz``),
    or None if every one is there."""
    for path in [traces / OPENB_DIR / NODE_FILE, *(pod_file(traces, w) for w in workloads)]:
        if locate(path) is None:
            where = " (from --traces; leave it out to use the traces shipped with shoal)" if given else ""
            return f"shoal fgd: {missing_message(path, 'trace')}{where}"
    return None


def _load_published(traces: Path) -> Published:
    try:
        return published_allocation(traces)
    except FileNotFoundError:
        return {}


def _published_stats(pub: Published, cell: CellResult) -> tuple[str, int]:
    """('mean ± sd' of the authors' runs for these seeds, number of seeds equal to ours)."""
    values, exact = [], 0
    for run in cell.runs:
        curve = pub.get((cell.workload, cell.policy, run.seed))
        if curve is None or curve[100] is None:
            continue
        value = round(100.0 - curve[100], 2)
        values.append(value)
        exact += value == run.unallocated_at_100
    if not values:
        return "-", 0
    from shoal.experiments.fgd.metrics import SeedSummary

    s = SeedSummary.of(values)
    return f"{s.mean:.2f} ± {s.sd:.2f}", exact


def render_table(cells: list[CellResult], pub: Published, rng: str) -> Table:
    table = Table(title=f"Unallocated GPU % at 100% arrival ({rng} rng)")
    for col in ("workload", "policy", "median", "mean ± sd", "published mean ± sd", "exact seeds", "s/run"):
        table.add_column(col, justify="left" if col in ("workload", "policy") else "right")
    for cell in cells:
        s = cell.summary
        published, exact = _published_stats(pub, cell)
        exact_text = f"{exact}/{len(cell.runs)}" if published != "-" and rng == "go" else "-"
        seconds = sum(r.seconds for r in cell.runs) / len(cell.runs)
        table.add_row(cell.workload, cell.policy, f"{s.median:.2f}", f"{s.mean:.2f} ± {s.sd:.2f}",
                      published, exact_text, f"{seconds:.2f}")
    return table


def run(args: argparse.Namespace) -> int:
    # Piped output keeps the table on one line per row instead of wrapping at 80 columns.
    console = Console() if sys.stdout.isatty() else Console(width=120)
    traces = args.traces or default_traces_dir()
    policies = policy_registry()
    workloads = _names(args.workload, WORKLOADS, "workload") if (args.grid or args.workload) else ["default"]
    known_policies = list(policies)
    chosen = _names(args.policy, known_policies, "policy") if args.policy else (
        list(PAPER_POLICIES) if args.grid else ["fgd"])
    problem = missing_trace(traces, workloads, args.traces is not None)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    total = len(workloads) * len(chosen) * len(args.seeds)
    start = time.perf_counter()
    with Progress(TextColumn("[bold]fgd"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console, transient=True) as progress:
        task = progress.add_task("", total=total)

        def on_done(r: RunResult) -> None:
            progress.update(task, advance=1, description=f"{r.workload}/{r.policy}/{r.seed}")

        try:
            cells = run_grid(traces, workloads, chosen, args.seeds, args.rng, max(1, args.jobs), on_done)
        except OpenbFormatError as err:  # a malformed trace file: file:line and the problem
            progress.stop()
            print(f"shoal fgd: {err}", file=sys.stderr)
            return 2
    wall = time.perf_counter() - start
    console.print(render_table(cells, _load_published(traces), args.rng))
    cpu = sum(r.seconds for c in cells for r in c.runs)
    console.print(f"{total} runs in {wall:.1f} s wall on {args.jobs} process(es); {cpu:.1f} CPU s of simulation")
    if args.json:
        payload = [c.to_json() for c in cells] if args.grid else (
            cells[0].to_json() if len(cells) == 1 else [c.to_json() for c in cells])
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
        console.print(f"wrote {args.json}")
    return 0
