"""The FGD authors' raw result tables (``results/fgd-atc23/``, plain or ``.gz``), for comparison with our runs."""

from __future__ import annotations

import csv
from pathlib import Path

from shoal.experiments.fgd.policies import PUBLISHED_NAMES
from shoal.sim.datafiles import open_text

RESULTS_DIR = Path("results") / "fgd-atc23"
ALLOC_TABLE = "analysis_allo_discrete.csv"


def published_allocation(traces: Path) -> dict[tuple[str, str, int], list[float | None]]:
    """(workload, policy, seed) -> allocation % at arrival 0..130, from the authors' table.

    Workload and policy use our names (``default``, ``fgd``); empty cells are None. A missing table
    raises :class:`shoal.sim.datafiles.DataFileMissing` (a ``FileNotFoundError``).
    """
    to_ours = {v: k for k, v in PUBLISHED_NAMES.items()}
    out: dict[tuple[str, str, int], list[float | None]] = {}
    with open_text(traces / RESULTS_DIR / ALLOC_TABLE, "result table") as fh:
        for row in csv.DictReader(fh):
            workload = row["workload"].removeprefix("openb_pod_list_")
            policy = to_ours[row["sc_policy"]]
            curve = [float(row[str(a)]) if row[str(a)] else None for a in range(131)]
            out[(workload, policy, int(row["seed"]))] = curve
    return out


def published_unallocated_at(
    table: dict[tuple[str, str, int], list[float | None]], workload: str, policy: str, seed: int, arrival: int = 100
) -> float | None:
    """The published unallocated GPU % of one run at ``arrival`` %."""
    value = table.get((workload, policy, seed), [None] * 131)[arrival]
    return None if value is None else round(100.0 - value, 2)
