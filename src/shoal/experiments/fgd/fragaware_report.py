"""The fragaware report: the 17-workload table against FGD's published results, and the curves.

Reads a ``shoal fgd --grid --json`` file holding our runs (``fragaware``, ``kai-binpack``, ...)
and the authors' published per-seed table (paper policies), and writes

* a Markdown table: unallocated GPU % at 100% arrival, mean over the seeds, per workload, with
  fragaware's change relative to FGD's published mean;
* one PNG per workload: median unallocated GPU % against arrived workload for every policy.

    python -m shoal.experiments.fgd.fragaware_report GRID.json [--out docs/img] [--workloads default,...]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from shoal.experiments.fgd.policies import PAPER_POLICIES
from shoal.experiments.fgd.published import published_allocation
from shoal.experiments.fgd.workload import WORKLOADS
from shoal.sim.loaders.openb import default_traces_dir

SEEDS = range(42, 52)
LABELS = {"random": "Random", "dotprod": "DotProd", "clustering": "GpuClustering", "packing": "GpuPacking",
          "bestfit": "BestFit", "fgd": "FGD", "kai-binpack": "kai-binpack", "fragaware": "fragaware"}
COLORS = {"random": "tab:gray", "dotprod": "tab:orange", "clustering": "tab:green", "packing": "tab:purple",
          "bestfit": "tab:blue", "fgd": "tab:brown", "kai-binpack": "tab:pink", "fragaware": "tab:red"}
Curve = list[tuple[int, float]]


def published_mean(pub: dict[tuple[str, str, int], list[float | None]], workload: str, policy: str) -> float:
    """Mean over seeds 42-51 of the published unallocated GPU % at 100% arrival."""
    values = [100.0 - v for s in SEEDS if (v := pub[(workload, policy, s)][100]) is not None]
    return statistics.fmean(values)


def published_curve(pub: dict[tuple[str, str, int], list[float | None]], workload: str, policy: str) -> Curve:
    """Median over seeds of the published unallocated GPU % at each arrival (where all seeds have one)."""
    out: Curve = []
    for a in range(131):
        values = [pub[(workload, policy, s)][a] for s in SEEDS]
        if all(v is not None for v in values):
            out.append((a, round(100.0 - statistics.median([v for v in values if v is not None]), 3)))
    return out


def markdown_table(cells: dict[tuple[str, str], dict[str, Any]],
                   pub: dict[tuple[str, str, int], list[float | None]]) -> str:
    """The 17-workload table (means over seeds; BestFit and FGD as published)."""
    lines = ["| workload | BestFit (published) | FGD (published) | kai-binpack | fragaware | fragaware vs FGD |",
             "|---|---:|---:|---:|---:|---:|"]
    rel: list[float] = []
    sums = [0.0, 0.0, 0.0, 0.0]
    for w in WORKLOADS:
        best, fgd = published_mean(pub, w, "bestfit"), published_mean(pub, w, "fgd")
        kai = cells[(w, "kai-binpack")]["unallocated_gpu_pct_at_100"]["mean"]
        ours = cells[(w, "fragaware")]["unallocated_gpu_pct_at_100"]["mean"]
        rel.append(ours / fgd - 1.0)
        for i, v in enumerate((best, fgd, kai, ours)):
            sums[i] += v
        lines.append(f"| {w} | {best:.2f} | {fgd:.2f} | {kai:.2f} | **{ours:.2f}** | {100 * rel[-1]:+.1f}% |")
    n = len(WORKLOADS)
    lines.append(f"| **mean of 17** | {sums[0] / n:.2f} | {sums[1] / n:.2f} | {sums[2] / n:.2f} | "
                 f"**{sums[3] / n:.2f}** | **{100 * statistics.fmean(rel):+.1f}%** |")
    return "\n".join(lines)


def plot(workload: str, curves: dict[str, Curve], path: Path) -> None:
    """Unallocated GPU % against arrived workload, one line per policy (arrival 60-130%)."""
    import matplotlib  # plotting only when asked

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for policy, curve in curves.items():
        xs = [a for a, _ in curve if a >= 60]
        ys = [v for a, v in curve if a >= 60]
        bold = policy in ("fgd", "fragaware")
        ax.plot(xs, ys, label=LABELS.get(policy, policy), linewidth=2.2 if bold else 1.2, color=COLORS.get(policy),
                linestyle="-" if policy in ("fragaware", "kai-binpack") else "--")
    ax.plot([60, 100, 130], [40, 0, 0], color="black", linewidth=0.8, linestyle=":", label="ideal")
    ax.set_xlabel("arrived workload (% of GPU capacity)")
    ax.set_ylabel("unallocated GPU % (median of 10 seeds)")
    ax.set_title(f"openb {workload}: unallocated GPUs vs arrived workload")
    ax.set_ylim(0, max(25.0, max(v for c in curves.values() for a, v in c if a >= 95) + 2))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("grid", type=Path, help="shoal fgd --grid --json output with fragaware and kai-binpack")
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    ap.add_argument("--workloads", default="default,gpuspec33,gpushare100")
    a = ap.parse_args()
    pub = published_allocation(default_traces_dir())
    data = json.loads(a.grid.read_text())
    cells = {(c["workload"], c["policy"]): c for c in (data if isinstance(data, list) else [data])}
    print(markdown_table(cells, pub))
    a.out.mkdir(parents=True, exist_ok=True)
    for w in a.workloads.split(","):
        curves: dict[str, Curve] = {p: published_curve(pub, w, p) for p in PAPER_POLICIES}
        for p in ("kai-binpack", "fragaware"):
            curves[p] = [(int(x), float(y)) for x, y in cells[(w, p)]["curve"]]
        path = a.out / f"fragaware-{w}.png"
        plot(w, curves, path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
