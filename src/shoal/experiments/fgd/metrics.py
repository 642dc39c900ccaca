"""Aggregate FGD runs the way the authors' analysis scripts do (reference/traces.md §3.4).

Per event: arrival % = round(arrived / G / 10) (half to even), allocation % = round(allocated /
G / 10, 2), G = total GPUs. For each integer arrival 0..130 a run's value is the mean allocation %
of its events with that arrival (rounded to 2 decimals), or of the events within +-1 if none.
Unallocated % = 100 - allocation %.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from shoal.experiments.fgd.runner import RunTrace

ARRIVAL_POINTS = range(131)  # 0..130 %, the columns of the published tables
REPORT_ARRIVAL = 100


def allocation_curve(trace: RunTrace) -> list[float | None]:
    """Allocation % at every arrival 0..130 (None where the run has no event within +-1)."""
    gpus = trace.total_gpu_milli // 1000
    buckets: dict[int, list[float]] = {}
    for arrived, allocated in zip(trace.arrived_milli.tolist(), trace.allocated_milli.tolist()):
        arrival = round(arrived / gpus / 10)
        buckets.setdefault(arrival, []).append(round(allocated / gpus / 10, 2))
    curve: list[float | None] = []
    for point in ARRIVAL_POINTS:
        # Arrivals only grow, so concatenating buckets keeps event order (pandas' row order).
        values = buckets.get(point) or [v for p in (point - 1, point, point + 1) for v in buckets.get(p, [])]
        # numpy's (pairwise) sum, as pandas' mean uses: an exactly rounded sum differs in the
        # last bit often enough to move ~0.5% of the 2-decimal means by 0.01.
        curve.append(round(float(np.sum(np.array(values))) / len(values), 2) if values else None)
    return curve


def unallocated_curve(trace: RunTrace) -> list[float | None]:
    """Unallocated GPU % (100 - allocation %) at every arrival 0..130."""
    return [None if v is None else round(100.0 - v, 2) for v in allocation_curve(trace)]


@dataclass(frozen=True, slots=True)
class SeedSummary:
    """The paper's bar-chart statistic over seeds: unallocated % at 100% arrival."""

    per_seed: list[float]
    median: float
    mean: float
    sd: float  # sample standard deviation (n - 1), as pandas' std

    @staticmethod
    def of(values: list[float]) -> SeedSummary:
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return SeedSummary(
            per_seed=values,
            median=round(statistics.median(values), 3),
            mean=round(statistics.fmean(values), 3),
            sd=round(sd, 3),
        )


def median_curve(curves: list[list[float | None]]) -> list[tuple[int, float]]:
    """[(arrival %, median over runs), ...] skipping arrivals where any run has no value."""
    out: list[tuple[int, float]] = []
    for point in ARRIVAL_POINTS:
        values = [c[point] for c in curves]
        if all(v is not None for v in values):
            out.append((point, round(statistics.median([v for v in values if v is not None]), 3)))
    return out
