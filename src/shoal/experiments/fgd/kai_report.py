"""The core's own placement (``kai-binpack``, ``kai-spread``) against the FGD paper's policies.

Reads a ``shoal fgd --grid --policy kai-binpack,kai-spread,kai-spread-sharing --json`` file and
the authors' published per-seed table, and prints the Markdown table of docs/fgd.md: per workload,
the mean over seeds 42-51 of the unallocated GPU % at 100% arrival for published Random, BestFit
and FGD (the authors' per-seed values) and for our KAI placements.

    python -m shoal.experiments.fgd.kai_report docs/data/fgd-kai-grid.json [--traces DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from shoal.experiments.fgd.policies import PAPER_POLICIES
from shoal.experiments.fgd.published import published_allocation, published_unallocated_at
from shoal.experiments.fgd.workload import WORKLOADS
from shoal.sim.loaders.openb import default_traces_dir

SEEDS = range(42, 52)
COLUMNS = (("random", "Random (published)"), ("bestfit", "BestFit (published)"), ("fgd", "FGD (published)"),
           ("kai-binpack", "kai-binpack"), ("kai-spread", "kai-spread"), ("kai-spread-sharing", "kai-spread-sharing"))


def table_rows(cells: list[dict[str, Any]], traces: Path) -> dict[str, list[float]]:
    """Workload -> means in COLUMNS order (published for the paper's policies, ours for KAI's)."""
    ours = {(c["workload"], c["policy"]): c["unallocated_gpu_pct_at_100"]["mean"] for c in cells}
    pub = published_allocation(traces)
    rows: dict[str, list[float]] = {}
    for w in WORKLOADS:
        row = []
        for policy, _ in COLUMNS:
            if policy in PAPER_POLICIES:
                values = [published_unallocated_at(pub, w, policy, s) for s in SEEDS]
                row.append(statistics.fmean(v for v in values if v is not None))
            else:
                row.append(float(ours[(w, policy)]))
        rows[w] = row
    return rows


def markdown(rows: dict[str, list[float]]) -> str:
    """The table, with a mean-of-workloads row."""
    lines = ["| workload | " + " | ".join(label for _, label in COLUMNS) + " |",
             "|---|" + "---:|" * len(COLUMNS)]
    means = [statistics.fmean(r[i] for r in rows.values()) for i in range(len(COLUMNS))]
    for name, row in [*rows.items(), ("**mean of 17**", means)]:
        lines.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("grid", type=Path, help="shoal fgd --grid --json output with kai-binpack and kai-spread")
    ap.add_argument("--traces", type=Path, default=None)
    args = ap.parse_args(argv)
    cells = json.loads(args.grid.read_text())
    print(markdown(table_rows(cells, args.traces or default_traces_dir())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
