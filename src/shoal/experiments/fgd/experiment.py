"""Run the FGD experiment over seeds, and over the whole workload x policy grid in parallel.

A *cell* is one workload x one policy over a list of seeds; its result is what ``shoal fgd``
prints and writes as JSON. The grid fans single runs out to worker processes.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoal.experiments.fgd.metrics import REPORT_ARRIVAL, SeedSummary, median_curve, unallocated_curve
from shoal.experiments.fgd.runner import Workload, load_workload, run_once

Curve = list[float | None]


@dataclass(frozen=True, slots=True)
class RunResult:
    """One seed: the unallocated-GPU % curve over arrival 0..130 and the CPU seconds of the run
    (process time, so that a busy machine does not inflate it)."""

    workload: str
    policy: str
    seed: int
    curve: Curve
    seconds: float

    @property
    def unallocated_at_100(self) -> float:
        value = self.curve[REPORT_ARRIVAL]
        if value is None:
            raise ValueError(f"run {self.workload}/{self.policy}/{self.seed} never reached 100% arrival")
        return value


@dataclass(frozen=True, slots=True)
class CellResult:
    """One workload x policy over seeds (runs in seed order)."""

    workload: str
    policy: str
    runs: list[RunResult]

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]

    @property
    def summary(self) -> SeedSummary:
        return SeedSummary.of([r.unallocated_at_100 for r in self.runs])

    def to_json(self) -> dict[str, Any]:
        """The documented JSON object of one cell (docs/fgd.md)."""
        s = self.summary
        return {
            "workload": self.workload,
            "policy": self.policy,
            "seeds": self.seeds,
            "unallocated_gpu_pct_at_100": {"per_seed": s.per_seed, "median": s.median, "mean": s.mean, "sd": s.sd},
            "curve": median_curve([r.curve for r in self.runs]),
        }


@functools.lru_cache(maxsize=4)
def _workload(traces: str, name: str) -> Workload:
    # Per-process cache: a worker runs many seeds/policies of one workload in a row.
    return load_workload(Path(traces), name)


def run_single(traces: Path, workload: str, policy: str, seed: int, rng: str) -> RunResult:
    """One seed of one policy on one workload, timed in CPU seconds (loading excluded)."""
    loaded = _workload(str(traces), workload)
    start = time.process_time()
    trace = run_once(loaded, policy, seed, rng)
    curve = unallocated_curve(trace)
    return RunResult(workload, policy, seed, curve, time.process_time() - start)


def _run_task(task: tuple[str, str, str, int, str]) -> RunResult:
    traces, workload, policy, seed, rng = task
    return run_single(Path(traces), workload, policy, seed, rng)


def run_grid(
    traces: Path,
    workloads: Iterable[str],
    policies: Iterable[str],
    seeds: Iterable[int],
    rng: str = "go",
    jobs: int = 1,
    on_done: Callable[[RunResult], None] | None = None,
) -> list[CellResult]:
    """Every workload x policy x seed, over ``jobs`` processes; cells in input order.

    ``on_done`` is called in the parent after each finished run (progress reporting).
    """
    workloads, policies, seeds = list(workloads), list(policies), list(seeds)
    tasks = [(str(traces), w, p, s, rng) for w in workloads for p in policies for s in seeds]
    results: dict[tuple[str, str, int], RunResult] = {}

    def collect(result: RunResult) -> None:
        results[(result.workload, result.policy, result.seed)] = result
        if on_done is not None:
            on_done(result)

    if jobs <= 1:
        for task in tasks:
            collect(_run_task(task))
    else:
        # fork keeps start-up cheap; workers share nothing mutable with the parent.
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for result in pool.imap_unordered(_run_task, tasks, chunksize=2):
                collect(result)
    return [
        CellResult(w, p, [results[(w, p, s)] for s in seeds]) for w in workloads for p in policies
    ]


def run_cell(
    traces: Path, workload: str, policy: str, seeds: Iterable[int], rng: str = "go", jobs: int = 1
) -> CellResult:
    """One workload x policy over ``seeds``."""
    return run_grid(traces, [workload], [policy], seeds, rng, jobs)[0]
