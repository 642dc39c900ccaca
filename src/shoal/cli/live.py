"""What the live commands (`shoal queues`, `pending`, `explain`, `snapshot`) share: cluster options,
reading the scheduler's published report, and `--json` / `-o yaml` output.

They need only read access: `get` on the report ConfigMap (`<scheduler-name>-visibility` in the
scheduler's namespace) and, for `explain` and `snapshot`, `list` on the scheduling objects
(deploy/rbac-viewer.yaml). Credentials: `--kubeconfig`, else `$KUBECONFIG`, else the in-cluster
service account, else `~/.kube/config` (as `shoal run`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import yaml
from rich.console import Console

T = TypeVar("T")


class LiveError(Exception):
    """A problem the user can fix (no report, unknown object, no access); printed as one line."""


def add_cluster_args(p: argparse.ArgumentParser, *, output: bool = True) -> None:
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, in-cluster, "
                                                        "~/.kube/config)")
    p.add_argument("--scheduler-name", default="kai-scheduler", metavar="NAME",
                   help="the scheduler whose report to read (default: %(default)s)")
    p.add_argument("--scheduler-namespace", default="shoal-system", metavar="NS",
                   help="namespace the scheduler runs in (its --lease-namespace; default: %(default)s)")
    if output:
        p.add_argument("--json", action="store_true", help="print JSON (same as -o json)")
        p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table",
                       help="output format (default: table)")


def output_format(args: argparse.Namespace) -> str:
    return "json" if getattr(args, "json", False) else str(getattr(args, "output", "table"))


def emit(args: argparse.Namespace, data: Any, render: Callable[[Console], None]) -> None:
    """Print `data` as JSON or YAML, or call `render` with a rich console."""
    fmt = output_format(args)
    if fmt == "json":
        json.dump(data, sys.stdout, indent=2, default=str)
        print()
    elif fmt == "yaml":
        yaml.safe_dump(data, sys.stdout, sort_keys=False, default_flow_style=False)
    else:
        probe = Console()
        # Piped output (no terminal) gets a wide page instead of rich's 80 columns.
        render(probe if probe.is_terminal else Console(width=160))


def run_live(command: str, args: argparse.Namespace, body: Callable[[Any], Awaitable[T]]) -> T:
    """Open a client from the cluster options, run `body(client)`, close the client. Raises LiveError."""
    from shoal.kube.client import KubeClient

    try:
        client = KubeClient(args.kubeconfig)
    except Exception as e:
        raise LiveError(f"cannot use kubeconfig {args.kubeconfig or '(default)'}: {e}") from None

    async def main() -> T:
        try:
            return await body(client)
        finally:
            await client.close()

    return asyncio.run(main())


async def fetch_report(client: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The scheduler's last published report; LiveError saying what is missing."""
    from shoal.kube.client import CONFIGMAPS, ApiError
    from shoal.kube.visibility import decode_report, report_configmap_name

    ns, name = args.scheduler_namespace, report_configmap_name(args.scheduler_name)
    try:
        cm = await client.get(CONFIGMAPS, name, ns)
    except ApiError as e:
        if e.code == 404:
            raise LiveError(f"no scheduling report: ConfigMap {ns}/{name} does not exist (is `shoal run "
                            f"--scheduler-name {args.scheduler_name}` running and leading, with "
                            f"--lease-namespace {ns}?)") from None
        if e.code == 403:
            raise LiveError(f"not allowed to read ConfigMap {ns}/{name}: {e.message} "
                            "(deploy/rbac-viewer.yaml grants it)") from None
        raise LiveError(f"reading ConfigMap {ns}/{name}: {e}") from None
    try:
        return decode_report(cm)
    except (ValueError, OSError) as e:
        raise LiveError(f"the scheduling report in {ns}/{name} cannot be read: {e}") from None


def main_wrapper(command: str, fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a live command; a LiveError is one line on stderr and exit code 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except LiveError as e:
            print(f"shoal {command}: {e}", file=sys.stderr)
            return 1

    return run


def eta_text(eta: float | None, at: float, source: str = "") -> str:
    """`in 12m` (relative to the report time `at`), `now`, `-` (no prediction)."""
    from shoal.visibility.quantities import duration_text

    if eta is None:
        return "-"
    delta = eta - at
    text = "next cycle" if delta < 1 else f"in {duration_text(delta)}"
    return text


def age_text(report: dict[str, Any]) -> str:
    """How old the report is, for the table captions."""
    from shoal.visibility.quantities import duration_text

    t = float(report.get("time") or 0)
    return f"cycle {report.get('cycle')}, {duration_text(time.time() - t)} ago" if t else ""
