"""`shoal queues`: the live queue tree with quota, limit, weight, fair share and allocation."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from shoal.cli.live import add_cluster_args, age_text, emit, fetch_report, main_wrapper, run_live
from shoal.visibility.quantities import bytes_text

HELP = """\
Show the queue tree as the scheduler saw it in its last cycle: per queue the GPU quota, limit and
over-quota weight, its fair share, what it holds (whole and fractional GPUs, CPU cores, memory),
what it requests, its running and pending gangs, and the time-decayed usage when time-based fair
share is on. Reads the report the scheduler publishes (needs only `get` on that ConfigMap).
"""


def register(sub: Any) -> None:
    p = sub.add_parser("queues", help="the live queue tree: quota, limit, fair share, allocation",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_args(p)
    p.set_defaults(func=main_wrapper("queues", main))


def main(args: argparse.Namespace) -> int:
    async def body(client: Any) -> dict[str, Any]:
        return await fetch_report(client, args)

    report = run_live("queues", args, body)
    queues = report.get("queues", [])
    emit(args, {"time": report.get("time"), "cycle": report.get("cycle"), "queues": queues},
         lambda c: render(c, report))
    return 0


def _lim(v: float | None) -> str:
    return "∞" if v is None else f"{v:g}"


def render(console: Console, report: dict[str, Any]) -> None:
    usage = bool(report.get("timeBasedFairShare"))
    t = Table(title=f"Queues ({age_text(report)}; GPUs in devices, fractional = held by GPU-sharing pods)",
              title_justify="left")
    for col in ("queue", "GPU quota", "limit", "weight", "fair share", "allocated", "fractional",
                "requested", "CPU alloc/share", "memory", "running", "pending"):
        t.add_column(col, justify="left" if col == "queue" else "right", no_wrap=col == "queue")
    if usage:
        t.add_column("usage", justify="right")
    for q in report.get("queues", []):
        g, c, m = q["gpu"], q["cpu"], q["memory"]
        row = ["  " * q["depth"] + q["name"], _lim(g["quota"]), _lim(g["limit"]), f"{g['weight']:g}",
               f"{g['fairShare']:g}", f"{g['allocated']:g}", f"{g['allocatedFractional']:g}", f"{g['requested']:g}",
               f"{c['allocated']:g}/{c['fairShare']:g}", bytes_text(m["allocated"]),
               str(q["runningGangs"]), str(q["pendingGangs"])]
        if usage:
            row.append(f"{g.get('usage', 0):.3f}")
        t.add_row(*row)
    console.print(t)
