"""Simulation reports: the terminal summary (rich), and a report directory with `metrics.json`,
CSV time series, PNG plots and an `index.html` that shows them.

One run: `allocation.png` (GPUs allocated / pending over time), `queue_share.png` (each queue's
allocation against its fair share), `wait_cdf.png` (wait-time CDF per queue). A comparison of
several scheduler configurations on the same workload: the same plots with one line (or column)
per configuration (`shoal.sim.compare`).
"""

from __future__ import annotations

import csv
import html
import json
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never open a window
import matplotlib.pyplot as plt
import numpy as np
from rich.console import Console
from rich.table import Table

from shoal.sim.simulation import SimResult

HOUR = 3600.0


def fmt_seconds(s: float | None) -> str:
    """Short human duration: 45s, 12m, 3.4h, 2.1d."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    if s < 90:
        return f"{s:.0f}s"
    if s < 90 * 60:
        return f"{s / 60:.0f}m"
    if s < 36 * HOUR:
        return f"{s / HOUR:.1f}h"
    return f"{s / 86400:.1f}d"


def headline(r: SimResult) -> dict[str, float]:
    """Mean allocation and useful utilisation (% of GPUs) over the run."""
    alloc = float(np.mean(r.series.allocated_gpus)) if r.series.allocated_gpus else 0.0
    cap = r.total_gpus * r.end if r.end > 0 else 0.0
    return {
        "allocated_pct": 100.0 * alloc / r.total_gpus if r.total_gpus else 0.0,
        "useful_pct": 100.0 * r.counters.get("useful_gpu_seconds", 0.0) / cap if cap else 0.0,
    }


# -- terminal -------------------------------------------------------------------------------
def queue_table(r: SimResult, title: str) -> Table:
    t = Table(title=title)
    for col in (
        "queue",
        "jobs",
        "started",
        "done",
        "wait mean",
        "p50",
        "p90",
        "p99",
        "JCT mean",
        "JCT p90",
        "evicted",
    ):
        t.add_column(col, justify="left" if col == "queue" else "right")
    for q, s in r.summary.items():
        w, j = s["wait"], s["jct"]
        t.add_row(
            q,
            str(s["jobs"]),
            str(s["started"]),
            str(s["finished"]),
            fmt_seconds(w["mean"]),
            fmt_seconds(w["p50"]),
            fmt_seconds(w["p90"]),
            fmt_seconds(w["p99"]),
            fmt_seconds(j["mean"]),
            fmt_seconds(j["p90"]),
            str(s["evictions"]),
            style="bold" if q == "ALL" else None,
        )
    return t


def _evictions(counters: dict[str, Any]) -> str:
    by_action = counters.get("evicted_gangs") or {}
    return ", ".join(f"{a} {n}" for a, n in by_action.items()) or "none"


def print_summary(r: SimResult, console: Console) -> None:
    h = headline(r)
    console.print(queue_table(r, f"{r.scenario} · config {r.config} · seed {r.seed}"))
    c = r.counters
    console.print(
        f"GPUs {r.total_gpus:g} · allocated {h['allocated_pct']:.1f}% · useful {h['useful_pct']:.1f}% · "
        f"simulated {fmt_seconds(r.end)} · evicted gangs {_evictions(c)} · "
        f"cycles {c.get('cycles_run', 0)} run / {c.get('cycles_skipped', 0)} skipped · "
        f"{c.get('events', 0)} events in {c.get('wall_seconds', 0):.1f}s"
    )


# -- files ----------------------------------------------------------------------------------
def _clean(v: Any) -> Any:
    """JSON-safe: NaN -> null, numpy scalars -> Python."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    if isinstance(v, float | np.floating):
        f = float(v)
        return None if math.isnan(f) else f
    if isinstance(v, np.integer):
        return int(v)
    return v


def result_json(r: SimResult, include_series: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "scenario": r.scenario,
        "config": r.config,
        "seed": r.seed,
        "end_seconds": r.end,
        "total_gpus": r.total_gpus,
        "queues": r.queues,
        "quotas": r.quotas,
        **headline(r),
        "summary": r.summary,
        "counters": r.counters,
    }
    if include_series:
        s = r.series
        out["series"] = {
            "t": s.t,
            "allocated_gpus": s.allocated_gpus,
            "pending_gangs": s.pending_gangs,
            "pending_gpus": s.pending_gpus,
            "fragmented_gpus": s.fragmented_gpus,
            "queue_allocated": s.queue_allocated,
            "queue_fair_share": s.queue_fair_share,
        }
    return _clean(out)  # type: ignore[no-any-return]


def write_csvs(r: SimResult, out: Path) -> list[str]:
    s = r.series
    with (out / "timeseries.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        qcols = [f"{q}_{k}" for q in r.queues for k in ("allocated", "fair_share", "pending")]
        w.writerow(
            [
                "t_seconds",
                "allocated_gpus",
                "pending_gangs",
                "pending_gpus",
                "running_gangs",
                "fragmented_gpus",
                *qcols,
            ]
        )
        for i, t in enumerate(s.t):
            row: list[Any] = [
                t,
                s.allocated_gpus[i],
                s.pending_gangs[i],
                s.pending_gpus[i],
                s.running_gangs[i],
                s.fragmented_gpus[i],
            ]
            for q in r.queues:
                row += [s.queue_allocated[q][i], s.queue_fair_share[q][i], s.queue_pending[q][i]]
            w.writerow(row)
    with (out / "jobs.csv").open("w", newline="") as fh:
        keys = [
            "name",
            "queue",
            "arrival",
            "gpus",
            "pods",
            "duration",
            "first_start",
            "finish",
            "wait",
            "jct",
            "evictions",
        ]
        dw = csv.DictWriter(fh, fieldnames=keys)
        dw.writeheader()
        for rec in r.jobs:
            dw.writerow({k: ("" if rec[k] is None else rec[k]) for k in keys})
    return ["timeseries.csv", "jobs.csv"]


def _hours(t: list[float]) -> np.ndarray:
    return np.asarray(t, dtype=np.float64) / HOUR


def plot_allocation(results: list[SimResult], path: Path) -> None:
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for r in results:
        label = r.config if len(results) > 1 else "allocated"
        ax.plot(_hours(r.series.t), r.series.allocated_gpus, label=label, lw=1.2)
        ax2.plot(_hours(r.series.t), r.series.pending_gangs, label=r.config, lw=1.2)
    ax.axhline(results[0].total_gpus, color="grey", ls="--", lw=0.8, label="capacity")
    ax.set_ylabel("GPUs allocated")
    ax.legend(loc="lower right", fontsize=8)
    ax2.set_ylabel("pending gangs")
    ax2.set_xlabel("time (h)")
    fig.suptitle("GPU allocation and pending gangs over time")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_queue_share(results: list[SimResult], path: Path) -> None:
    queues = results[0].queues
    fig, axes = plt.subplots(
        len(queues), len(results), figsize=(4.5 * len(results), 2.2 * len(queues)), sharex=True, squeeze=False
    )
    for c, r in enumerate(results):
        for i, q in enumerate(queues):
            ax = axes[i][c]
            ax.plot(_hours(r.series.t), r.series.queue_allocated[q], label="allocated", lw=1.1)
            ax.plot(_hours(r.series.t), r.series.queue_fair_share[q], label="fair share", lw=1.1, ls="--")
            if r.quotas.get(q, -1) >= 0:
                ax.axhline(r.quotas[q], color="grey", ls=":", lw=1.0, label="quota")
            ax.set_title(f"{q} · {r.config}" if len(results) > 1 else q, fontsize=9)
            ax.set_ylabel("GPUs")
            if i == 0 and c == 0:
                ax.legend(fontsize=8)
        axes[-1][c].set_xlabel("time (h)")
    fig.suptitle("Per-queue GPU allocation vs fair share")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_wait_cdf(results: list[SimResult], path: Path) -> None:
    queues = results[0].queues
    fig, axes = plt.subplots(1, len(queues), figsize=(4.2 * len(queues), 3.4), squeeze=False)
    for i, q in enumerate(queues):
        ax = axes[0][i]
        for r in results:
            waits = np.sort([j["wait"] for j in r.jobs if j["queue"] == q and j["wait"] is not None])
            if len(waits) == 0:
                continue
            y = np.arange(1, len(waits) + 1) / len(waits)
            ax.step(
                np.maximum(waits / 60.0, 1e-2), y, where="post", label=r.config if len(results) > 1 else q
            )
        ax.set_xscale("log")
        ax.set_title(q, fontsize=10)
        ax.set_xlabel("wait (min, log)")
        ax.set_ylabel("fraction of jobs")
        if ax.get_legend_handles_labels()[0]:  # a queue without started jobs has no line
            ax.legend(fontsize=8)
    fig.suptitle("Wait-time CDF per queue")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plots(results: list[SimResult], out: Path) -> list[str]:
    plot_allocation(results, out / "allocation.png")
    plot_queue_share(results, out / "queue_share.png")
    plot_wait_cdf(results, out / "wait_cdf.png")
    return ["allocation.png", "queue_share.png", "wait_cdf.png"]


def _html_table(r: SimResult) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "queue",
            "jobs",
            "started",
            "finished",
            "wait mean",
            "p50",
            "p90",
            "p99",
            "JCT mean",
            "JCT p90",
            "evictions",
        )
    )
    rows = []
    for q, s in r.summary.items():
        w, j = s["wait"], s["jct"]
        cells = [
            q,
            s["jobs"],
            s["started"],
            s["finished"],
            fmt_seconds(w["mean"]),
            fmt_seconds(w["p50"]),
            fmt_seconds(w["p90"]),
            fmt_seconds(w["p99"]),
            fmt_seconds(j["mean"]),
            fmt_seconds(j["p90"]),
            s["evictions"],
        ]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def write_index(
    out: Path, title: str, tables: list[tuple[str, str]], images: list[str], files: list[str]
) -> None:
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}img{max-width:100%}</style>",
        f"</head><body><h1>{html.escape(title)}</h1>",
    ]
    for caption, table in tables:
        parts.append(f"<h2>{html.escape(caption)}</h2>{table}")
    for img in images:
        parts.append(f"<h2>{html.escape(img)}</h2><img src='{html.escape(img)}' alt='{html.escape(img)}'>")
    links = " · ".join(f"<a href='{html.escape(f)}'>{html.escape(f)}</a>" for f in files)
    parts.append(f"<p>Data: {links}</p></body></html>")
    (out / "index.html").write_text("\n".join(parts), encoding="utf-8")


def write_report(r: SimResult, out: Path) -> Path:
    """Write the report directory of one run; returns the path of `index.html`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(result_json(r), indent=1, allow_nan=False), encoding="utf-8")
    files = ["metrics.json", *write_csvs(r, out)]
    images = plots([r], out)
    h = headline(r)
    caption = (
        f"{r.config} · seed {r.seed} · {r.total_gpus:g} GPUs · allocated {h['allocated_pct']:.1f}% · "
        f"useful {h['useful_pct']:.1f}%"
    )
    write_index(out, f"shoal simulate: {r.scenario}", [(caption, _html_table(r))], images, files)
    return out / "index.html"
