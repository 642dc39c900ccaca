"""`shoal pending`: pending gangs in the order the scheduler tries them, with reason and ETA."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from shoal.cli.live import add_cluster_args, age_text, emit, eta_text, fetch_report, main_wrapper, run_live
from shoal.visibility.quantities import duration_text

HELP = """\
List the gangs that wait, in the order the scheduler's next allocate pass tries them (position in
the whole cluster and inside their queue), with why each waits and when it is predicted to start
(the scheduler's forecast: its own core run forward over the running jobs' expected ends).
"""


def register(sub: Any) -> None:
    p = sub.add_parser("pending", help="pending gangs in scheduling order, with reason and predicted start",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queue", "-q", metavar="Q", help="only gangs of this queue")
    p.add_argument("--namespace", "-n", metavar="NS", help="only gangs in this namespace")
    add_cluster_args(p)
    p.set_defaults(func=main_wrapper("pending", main))


def select(report: dict[str, Any], queue: str | None, namespace: str | None) -> list[dict[str, Any]]:
    return [e for e in report.get("pending", [])
            if (not queue or e["queue"] == queue) and (not namespace or e["namespace"] == namespace)]


def main(args: argparse.Namespace) -> int:
    async def body(client: Any) -> dict[str, Any]:
        return await fetch_report(client, args)

    report = run_live("pending", args, body)
    gangs = select(report, args.queue, args.namespace)
    data = {"time": report.get("time"), "cycle": report.get("cycle"), "etaTime": report.get("etaTime"),
            "pending": [{k: v for k, v in e.items() if k not in ("nodeGroups",)} for e in gangs]}
    emit(args, data, lambda c: render(c, report, gangs))
    return 0


def render(console: Console, report: dict[str, Any], gangs: list[dict[str, Any]]) -> None:
    at = float(report.get("time") or 0)
    t = Table(title=f"Pending gangs ({age_text(report)})", title_justify="left")
    for col in ("#", "in queue", "gang", "queue", "pods", "GPUs", "waiting", "predicted start", "why"):
        t.add_column(col, justify="right" if col in ("#", "in queue", "GPUs") else "left",
                     overflow="fold", ratio=4 if col == "why" else None)
    for e in gangs:
        t.add_row(str(e["position"]), str(e["queuePosition"]), f"{e['namespace']}/{e['name']}", e["queue"],
                  f"{e['pendingPods']}/{e['minMember']}", f"{e['request']['gpu']:g}",
                  duration_text(e.get("waitingSeconds")), eta_text(e.get("eta"), at), e.get("summary", ""))
    console.print(t)
    if not gangs:
        console.print("no pending gangs")
