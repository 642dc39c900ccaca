"""Exact replay of the FGD paper's runs: with Go's random stream our per-seed results must equal
the authors' raw result tables to the last published digit (reference/traces.md §3.5)."""

from __future__ import annotations

from functools import cache

import pytest

from shoal.experiments.fgd.metrics import allocation_curve, unallocated_curve
from shoal.experiments.fgd.published import published_allocation
from shoal.experiments.fgd.runner import Workload, load_workload, run_once
from shoal.sim.datafiles import PACKAGE_TRACES

TRACES = PACKAGE_TRACES  # the traces shipped with shoal (not $SHOAL_TRACES): what users get

# traces.md §3.5: default, unallocated GPU % at 100% arrival, seeds 42..51.
PUBLISHED_AT_100 = {
    "fgd": [4.86, 4.94, 4.71, 4.62, 4.65, 4.86, 4.82, 4.70, 4.85, 4.72],
    "bestfit": [7.06, 7.03, 7.11, 7.07, 7.00, 7.16, 7.32, 6.96, 7.36, 7.31],
}


@cache
def _default() -> Workload:
    return load_workload(TRACES, "default")


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fgd", "bestfit"])
@pytest.mark.parametrize("seed", [42, 45, 50])
def test_fgd_and_bestfit_match_published_per_seed(policy: str, seed: int) -> None:
    curve = unallocated_curve(run_once(_default(), policy, seed, "go"))
    assert curve[100] == PUBLISHED_AT_100[policy][seed - 42]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("policy", "seed"),
    [
        pytest.param("dotprod", 43, id="DotProd seed 43"),
        pytest.param("clustering", 46, id="GpuClustering seed 46"),
        pytest.param("packing", 47, id="GpuPacking seed 47"),
    ],
)
def test_whole_allocation_curve_matches_raw_table(policy: str, seed: int) -> None:
    """All 131 points (arrival 0..130%) of the allocation curve equal the authors' table."""
    ours = allocation_curve(run_once(_default(), policy, seed, "go"))
    theirs = published_allocation(TRACES)[("default", policy, seed)]
    assert ours == theirs


@pytest.mark.slow
def test_python_rng_differs_from_go_but_stays_close() -> None:
    """--rng py is a different sample of the same experiment: not equal, yet within 1 pt."""
    ours = unallocated_curve(run_once(_default(), "bestfit", 42, "py"))[100]
    assert ours is not None
    assert ours != PUBLISHED_AT_100["bestfit"][0]
    assert abs(ours - 7.14) < 1.0


@pytest.mark.slow
def test_fgd_on_a_constrained_workload_matches_published() -> None:
    """gpuspec10 seed 44 is sensitive to the last bit of the typical-pod frequencies."""
    curve = unallocated_curve(run_once(load_workload(TRACES, "gpuspec10"), "fgd", 44, "go"))
    theirs = published_allocation(TRACES)[("gpuspec10", "fgd", 44)][100]
    assert theirs is not None
    assert curve[100] == round(100.0 - theirs, 2)
