"""`shoal explain POD|PODGROUP`: why a gang waits, what would let it start, when it will start."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from shoal.cli.live import LiveError, add_cluster_args, age_text, emit, eta_text, fetch_report, main_wrapper, run_live
from shoal.visibility.quantities import duration_text

HELP = """\
Explain why a pod or PodGroup is pending, from the scheduler's last cycle (nothing is decided
again): each cause in words (a queue at its limit, not enough free GPUs, free GPUs spread over
nodes, a topology constraint no domain can meet, a gang larger than what fits), the failing
condition per group of nodes, what would make it schedulable, its place in line and its predicted
start. With --what-if-priority (on by default) it also runs one cycle of the same scheduling core
locally on the live cluster with the gang's priority raised above its queue's, and lists what it
would preempt.
"""


def register(sub: Any) -> None:
    p = sub.add_parser("explain", help="why a pod or PodGroup is pending and what would make it start",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", metavar="POD|PODGROUP", help="a pod or PodGroup name (or NAMESPACE/NAME)")
    p.add_argument("--namespace", "-n", metavar="NS", help="its namespace (default: search all)")
    p.add_argument("--what-if-priority", action=argparse.BooleanOptionalAction, default=True,
                   help="also show what it would preempt with a higher priority (reads the cluster; "
                        "default: on)")
    add_cluster_args(p)
    p.set_defaults(func=main_wrapper("explain", main))


def find(report: dict[str, Any], name: str, namespace: str | None) -> list[dict[str, Any]]:
    """Pending gangs named `name` (PodGroup name, or a pending pod's name), optionally in `namespace`."""
    if "/" in name and namespace is None:
        namespace, name = name.split("/", 1)
    return [e for e in report.get("pending", [])
            if (namespace is None or e["namespace"] == namespace)
            and (e["name"] == name or name in e.get("podNames", []) or e["uid"] == name)]


def main(args: argparse.Namespace) -> int:
    async def body(client: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
        report = await fetch_report(client, args)
        hits = find(report, args.name, args.namespace)
        if not hits:
            raise LiveError(await _not_pending(client, args.name, args.namespace))
        if len(hits) > 1:
            where = ", ".join(f"{h['namespace']}/{h['name']}" for h in hits)
            raise LiveError(f"{args.name!r} matches several pending gangs ({where}); give -n NAMESPACE")
        whatif = None
        if args.what_if_priority:
            from shoal.cli.whatif import preempt_if_higher

            whatif = await preempt_if_higher(client, args.scheduler_name, report, hits[0])
        return report, hits[0], whatif

    report, gang, whatif = run_live("explain", args, body)
    data = {**gang, "reportTime": report.get("time"), "cycle": report.get("cycle")}
    if whatif is not None:
        data["ifHigherPriority"] = whatif
    emit(args, data, lambda c: render(c, report, gang, whatif))
    return 0


async def _not_pending(client: Any, name: str, namespace: str | None) -> str:
    """What the API says about an object the report does not list as pending."""
    from shoal.kube.client import PODGROUPS, PODS, ApiError

    if "/" in name and namespace is None:
        namespace, name = name.split("/", 1)
    for res, kind in ((PODS, "pod"), (PODGROUPS, "PodGroup")):
        try:
            path = res.path(namespace)
            got = await client.request("GET", path, params={"fieldSelector": f"metadata.name={name}"})
        except ApiError as e:
            if e.code == 403:
                continue
            raise LiveError(f"listing {kind}s: {e}") from None
        items = got.get("items") or []
        if not items:
            continue
        obj = items[0]
        ns = obj["metadata"].get("namespace")
        if kind == "pod":
            node = (obj.get("spec") or {}).get("nodeName")
            phase = (obj.get("status") or {}).get("phase")
            if node:
                return f"pod {ns}/{name} is not pending: it is {phase or 'bound'} on node {node}"
            return (f"pod {ns}/{name} is not in the scheduler's last report (not its scheduler "
                    f"{(obj.get('spec') or {}).get('schedulerName')!r}, or waiting for its PodGroup)")
        return f"PodGroup {ns}/{name} has no pending pods in the scheduler's last cycle"
    where = f" in namespace {namespace}" if namespace else ""
    return f"no pending pod or PodGroup named {name!r}{where}"


def _basis(report: dict[str, Any]) -> str:
    basis = report.get("etaRuntimes") or {}
    if not basis:
        return ""
    return " (job run times from: " + ", ".join(f"{n} {src}" for src, n in sorted(basis.items())) + ")"


def render(console: Console, report: dict[str, Any], g: dict[str, Any], whatif: dict[str, Any] | None) -> None:
    at = float(report.get("time") or 0)
    console.print(f"[bold]{g['kind']} {g['namespace']}/{g['name']}[/bold] in queue [bold]{g['queue']}[/bold] "
                  f"({age_text(report)})")
    console.print(f"  {g['pendingPods']} of {g['pods']} pods pending, minMember {g['minMember']}, "
                  f"{g['request']['gpu']:g} GPUs needed to start, priority {g['priority']}"
                  f"{'' if g['preemptible'] else ' (non-preemptible)'}, waiting {duration_text(g['waitingSeconds'])}")
    console.print(f"  position {g['position']} in the cluster, {g['queuePosition']} in its queue; "
                  f"predicted start: {eta_text(g.get('eta'), at)}" + _basis(report))
    console.print("\n[bold]Why it is pending[/bold]")
    for b in g.get("blockers") or [{"text": g.get("summary", "")}]:
        console.print(f"  - {b['text']}")
    if g.get("nodeGroups"):
        console.print("\n[bold]Nodes[/bold] (first failing condition for one of its pods)")
        for ng in g["nodeGroups"]:
            console.print(f"  - {ng['nodes']} node(s): {ng['reason']}")
    if g.get("suggestions"):
        console.print("\n[bold]What would make it schedulable[/bold]")
        for s in g["suggestions"]:
            console.print(f"  - {s}")
    if whatif is not None:
        console.print(f"\n[bold]With a higher priority[/bold] ({whatif['priority']})")
        console.print(f"  {whatif['summary']}")
        for v in whatif.get("victims", [])[:20]:
            console.print(f"  - {v['action']}: {v['namespace']}/{v['pod']} on {v['node']}")
    console.print("\n[bold]Scheduler messages[/bold] " + ", ".join(g.get("reasons", [])))
    for m in g.get("messages", [])[:10]:
        console.print(f"  {m}", markup=False)
