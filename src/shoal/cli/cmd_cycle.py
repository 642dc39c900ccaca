"""`shoal cycle FILE.yaml`: run one scheduling cycle on a cluster file and show the decisions."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from rich.console import Console
from rich.table import Table

from shoal.cli.clusterfile import ClusterFileError, load_cluster_file
from shoal.cycle import CycleResult, run_cycle
from shoal.framework.config import ConfigError, SchedulerConfig
from shoal.model.resources import MILLI


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "cycle", help="run one scheduling cycle on a cluster file (nodes, queues, jobs)",
        description="Load a cluster file (schema: `shoal cycle --schema`), run one cycle of the "
                    "scheduling core and print binds, pipelines, evictions and why gangs are pending.")
    p.add_argument("file", nargs="?", help="cluster YAML file")
    p.add_argument("--json", action="store_true", help="print the decisions as JSON")
    p.add_argument("--schema", action="store_true", help="print the cluster file schema and exit")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.schema:
        from shoal.cli import clusterfile

        print(clusterfile.__doc__)
        return 0
    if not args.file:
        print("shoal cycle: a cluster file is required (see --schema)", file=sys.stderr)
        return 2
    try:
        snapshot, config = load_cluster_file(args.file)
        result = run_cycle(snapshot, config or SchedulerConfig())
    except (ClusterFileError, ConfigError) as err:
        print(f"shoal cycle: {err}", file=sys.stderr)
        return 2
    if args.json:
        d = result.decisions
        json.dump({"binds": [asdict(b) for b in d.binds], "pipelines": [asdict(p) for p in d.pipelines],
                   "evictions": [asdict(e) for e in d.evictions],
                   "pending": [asdict(e) for e in d.explanations.values()]}, sys.stdout, indent=1)
        print()
    else:
        print_result(result, Console())
    return 0


def print_result(result: CycleResult, console: Console) -> None:
    d = result.decisions
    ssn = result.session
    console.print(f"[bold]actions:[/bold] {', '.join(result.actions_run)}  "
                  f"[bold]nodes:[/bold] {len(ssn.nodes)}  [bold]jobs:[/bold] {len(ssn.jobs)}")
    if d.binds or d.pipelines:
        t = Table(title="Placed pods")
        for col in ("pod", "job", "node", "GPU", "devices", "decision"):
            t.add_column(col)
        for b in d.binds:
            gpu = _gpu_text(ssn.tasks[b.pod].pod.gpu)
            t.add_row(b.pod, b.job, b.node, gpu, ",".join(b.gpu_groups), "bind")
        for p in d.pipelines:
            gpu = _gpu_text(ssn.tasks[p.pod].pod.gpu)
            t.add_row(p.pod, p.job, p.node, gpu, ",".join(p.gpu_groups), "pipeline (waits for releasing)")
        console.print(t)
    if d.evictions:
        t = Table(title="Evicted pods")
        for col in ("pod", "job", "node", "action", "reason"):
            t.add_column(col)
        for e in d.evictions:
            t.add_row(e.pod, e.job, e.node, e.action, e.reason)
        console.print(t)
    if d.explanations:
        t = Table(title="Pending gangs")
        for col in ("job", "queue", "reasons", "why"):
            t.add_column(col, overflow="fold")
        for e in d.explanations.values():
            t.add_row(e.job, e.queue, ", ".join(e.reasons), "\n".join(e.messages[:4]))
        console.print(t)
    q = Table(title="Queues (GPUs)")
    for col in ("queue", "parent", "quota", "fair share", "allocated"):
        q.add_column(col, justify="left" if col in ("queue", "parent") else "right")
    for info in ssn.queues.values():
        quota = info.deserved[0]
        q.add_row(info.name, info.spec.parent or "-", "∞" if quota == -1 else f"{quota / MILLI:g}",
                  f"{info.fair_share[0] / MILLI:g}", f"{info.allocated[0] / MILLI:g}")
    console.print(q)


def _gpu_text(gpu: object) -> str:
    whole = getattr(gpu, "whole", 0)
    if whole:
        return str(whole)
    if getattr(gpu, "memory_mib", 0):
        return f"{gpu.memory_mib} MiB"  # type: ignore[attr-defined]
    portion = getattr(gpu, "portion_milli", 0)
    if portion:
        return f"{portion / MILLI:g} x {gpu.devices}"  # type: ignore[attr-defined]
    return "-"
