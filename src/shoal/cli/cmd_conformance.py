"""`shoal conformance PATH...`: run KAI scenario files on the core and report pass/fail."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from shoal.conformance.loader import ScenarioError
from shoal.conformance.runner import Result, collect, load, run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("conformance", help="run KAI scheduling scenarios (YAML) and check the expected outcome",
                       description="Run scenario files or directories of the KAI corpus "
                                   "(schema: data/conformance/README.md). Exit 0 only if every scenario passed.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or directories")
    p.add_argument("--json", metavar="FILE",
                   help="write results as JSON ('-' = stdout); each result's `seconds` is the process "
                        "(CPU) time of its decisions: session open + actions, summed over the rounds of "
                        "a full cycle, loading and checking excluded")
    p.add_argument("--failures", type=int, default=40, metavar="N", help="list at most N failures (default 40)")
    p.set_defaults(func=main)


def run_paths(paths: list[str]) -> list[Result]:
    results = []
    for path in collect(paths):
        try:
            sc = load(path)
        except ScenarioError as err:
            results.append(Result(path.stem, "?", "errored", str(err)))
            continue
        results.append(run(sc))
    return results


def main(args: argparse.Namespace) -> int:
    try:
        results = run_paths(args.paths)
    except ScenarioError as err:
        print(f"shoal conformance: {err}", file=sys.stderr)
        return 2
    counts = Counter(r.outcome for r in results)
    payload = {"total": len(results), "passed": counts["passed"], "failed": counts["failed"],
               "errored": counts["errored"], "skipped": counts["skipped"],
               "results": [{"id": r.id, "kind": r.kind, "outcome": r.outcome, "message": r.message,
                            "seconds": round(r.seconds, 6)} for r in results]}
    if args.json == "-":
        json.dump(payload, sys.stdout, indent=1)
        print()
    else:
        if args.json:
            Path(args.json).write_text(json.dumps(payload, indent=1) + "\n")
        _print_table(results, args.failures)
    return 0 if results and counts["passed"] == len(results) else 1


def _print_table(results: list[Result], max_failures: int) -> None:
    console = Console()
    by_kind: dict[str, Counter[str]] = {}
    for r in results:
        by_kind.setdefault(r.kind, Counter())[r.outcome] += 1
    table = Table(title="KAI conformance scenarios")
    for col in ("kind", "total", "passed", "failed", "errored", "skipped"):
        table.add_column(col, justify="left" if col == "kind" else "right")
    for kind in sorted(by_kind):
        c = by_kind[kind]
        table.add_row(kind, str(sum(c.values())), str(c["passed"]), str(c["failed"]), str(c["errored"]),
                      str(c["skipped"]))
    total = Counter(r.outcome for r in results)
    table.add_row("all", str(len(results)), str(total["passed"]), str(total["failed"]), str(total["errored"]),
                  str(total["skipped"]), style="bold")
    console.print(table)
    bad = [r for r in results if r.outcome in ("failed", "errored")]
    for r in bad[:max_failures]:
        console.print(f"[red]{r.outcome}[/red] {r.id}: {r.message}", highlight=False, soft_wrap=True)
    if len(bad) > max_failures:
        console.print(f"... and {len(bad) - max_failures} more")
