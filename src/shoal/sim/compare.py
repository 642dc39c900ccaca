"""Compare scheduler configurations on one workload: one table and one set of plots side by side."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from shoal.sim.report import _html_table, fmt_seconds, headline, plots, plt, result_json, write_index
from shoal.sim.simulation import SimResult


def _rows(results: list[SimResult]) -> tuple[list[str], list[list[str]]]:
    queues = results[0].queues
    head = [
        "config",
        "alloc %",
        "useful %",
        "wait mean",
        "wait p90",
        "wait p99",
        "JCT mean",
        "unstarted",
        "evicted gangs",
        *[f"{q} wait" for q in queues],
    ]
    rows = []
    for r in results:
        h, a = headline(r), r.summary["ALL"]
        evicted = sum((r.counters.get("evicted_gangs") or {}).values())
        rows.append(
            [
                r.config,
                f"{h['allocated_pct']:.1f}",
                f"{h['useful_pct']:.1f}",
                fmt_seconds(a["wait"]["mean"]),
                fmt_seconds(a["wait"]["p90"]),
                fmt_seconds(a["wait"]["p99"]),
                fmt_seconds(a["jct"]["mean"]),
                str(a["unstarted"]),
                str(evicted),
                *[fmt_seconds(r.summary[q]["wait"]["mean"]) for q in queues],
            ]
        )
    return head, rows


def compare_table(results: list[SimResult]) -> Table:
    head, rows = _rows(results)
    t = Table(title=f"{results[0].scenario} · seed {results[0].seed} · {len(results)} configurations")
    for h in head:
        t.add_column(h, justify="left" if h == "config" else "right")
    for row in rows:
        t.add_row(*row)
    return t


def _active_queues(results: list[SimResult]) -> list[str]:
    """Leaf queues that received jobs (a queue without jobs has no wait times to show)."""
    return [q for q in results[0].queues if results[0].summary[q]["jobs"] > 0]


def plot_queue_waits(results: list[SimResult], path: Path) -> None:
    """Grouped bars: mean and p90 wait per queue, one bar per configuration. Log scale in minutes:
    waits range from seconds (borrowing) to days (static partitioning); below 0.1 min is drawn at 0.1."""
    queues = [*_active_queues(results), "ALL"]
    x = np.arange(len(queues))
    width = 0.8 / len(results)
    fig, axes = plt.subplots(
        2, 1, figsize=(max(8.0, 0.9 * len(queues) * len(results) / 2 + 4), 6), sharex=True
    )
    for k, stat in enumerate(("mean", "p90")):
        ax = axes[k]
        for i, r in enumerate(results):
            vals = [max((r.summary[q]["wait_censored"][stat] or 0.0) / 60.0, 0.1) for q in queues]
            ax.bar(x + (i - (len(results) - 1) / 2) * width, vals, width, label=r.config)
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.1)
        ax.grid(axis="y", which="major", alpha=0.3)
        ax.set_ylabel(f"{stat} wait (min)")
        ax.legend(fontsize=8)
    axes[-1].set_xticks(x, queues, rotation=30, ha="right", fontsize=8)
    fig.suptitle("Wait time per queue (jobs never started count as waiting until the end)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def markdown_table(results: list[SimResult]) -> str:
    """Per queue with jobs, wait mean / p50 / p90 for each configuration (jobs never started count as waiting
    until the end of the run, `wait_censored`), then jobs never started, mean GPU allocation and
    gangs evicted by reclaim. Markdown, for docs and READMEs (`queue_waits.md`)."""
    queues = [*_active_queues(results), "ALL"]
    quotas = results[0].quotas
    head = ["queue", "quota", "jobs", *[f"{r.config} mean / p50 / p90" for r in results]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for q in queues:
        quota = quotas.get(q, -1.0)
        cells = [q, f"{quota:g}" if quota >= 0 else "-", str(results[0].summary[q]["jobs"])]
        for r in results:
            w = r.summary[q]["wait_censored"]
            cells.append(" / ".join(fmt_seconds(w[k]) for k in ("mean", "p50", "p90")))
        lines.append("| " + " | ".join(cells) + " |")
    extra: list[tuple[str, list[str]]] = [
        ("jobs never started", [str(r.summary["ALL"]["unstarted"]) for r in results]),
        ("GPU allocation (mean)", [f"{headline(r)['allocated_pct']:.1f}%" for r in results]),
        ("gangs reclaimed", [str((r.counters.get("evicted_gangs") or {}).get("reclaim", 0)) for r in results]),
    ]
    for label, cells in extra:
        lines.append("| " + " | ".join([f"*{label}*", "", "", *cells]) + " |")
    return "\n".join(lines) + "\n"


def write_compare(results: list[SimResult], out: Path, console: Console | None = None) -> Path:
    """Report directory for a comparison; returns the path of `index.html`."""
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "scenario": results[0].scenario,
        "seed": results[0].seed,
        "runs": [result_json(r, include_series=False) for r in results],
    }
    (out / "compare.json").write_text(json.dumps(data, indent=1, allow_nan=False), encoding="utf-8")
    images = plots(results, out)
    plot_queue_waits(results, out / "queue_waits.png")
    images.append("queue_waits.png")
    (out / "queue_waits.md").write_text(markdown_table(results), encoding="utf-8")
    head, rows = _rows(results)
    table = (
        "<table><tr>"
        + "".join(f"<th>{html.escape(h)}</th>" for h in head)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
        + "</table>"
    )
    tables = [("configurations", table)] + [(f"config {r.config}", _html_table(r)) for r in results]
    write_index(
        out, f"shoal simulate compare: {results[0].scenario}", tables, images, ["compare.json", "queue_waits.md"]
    )
    if console is not None:
        console.print(compare_table(results))
    return out / "index.html"
