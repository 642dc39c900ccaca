"""The fragmentation measure and FGD score on hand-computed node states (reference/traces.md §3.3)."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.policy.fragmentation import TypicalPods, fgd_score, node_fragment

# Model indices: 0 = "A", 1 = "B".
TYPICAL = TypicalPods(
    cpu_milli=np.array([4000, 8000, 2000], dtype=np.int64),
    milli=np.array([0, 500, 1000], dtype=np.int64),
    count=np.array([0, 1, 2], dtype=np.int64),
    allowed=np.array([[True, True], [True, True], [True, False]]),
    freq=np.array([0.25, 0.5, 0.25]),
)


def frag(free: list[int], cpu: int, model: int = 0) -> float:
    out = node_fragment(np.array([free], dtype=np.int64), np.array([cpu], dtype=np.int64),
                        np.array([model], dtype=np.int64), TYPICAL)
    return float(out[0])


@pytest.mark.parametrize(
    ("free", "cpu", "model", "expected"),
    [
        # CPU pod: all 2300 free; 500-milli pod fits, the 300 GPU is unusable; 2-GPU pod lacks GPUs.
        pytest.param([1000, 1000, 300, 0], 10000, 0, 0.25 * 2300 + 0.5 * 300 + 0.25 * 300,
                     id="two whole GPUs fit the 2-GPU pod: only the 300 remnant is fragment"),
        pytest.param([1000, 300, 0, 0], 10000, 0, 0.25 * 1300 + 0.5 * 300 + 0.25 * 1300,
                     id="one whole GPU: the 2-GPU typical pod sees everything as fragment"),
        pytest.param([1000, 1000, 300, 0], 5000, 0, 0.25 * 2300 + 0.5 * 2300 + 0.25 * 300,
                     id="CPU too short for the 500-milli pod: its whole free GPU is fragment"),
        pytest.param([1000, 1000, 300, 0], 10000, 1, 0.25 * 2300 + 0.5 * 300 + 0.25 * 2300,
                     id="model B is not allowed for the 2-GPU pod: NoAccess, all fragment"),
        pytest.param([0, 0, 0, 0], 10000, 0, 0.0, id="no free GPU, no fragment"),
        pytest.param([1000, 1000, 1000, 1000], 0, 0, 4000.0, id="no CPU left: every GPU is fragment"),
    ],
)
def test_node_fragment(free: list[int], cpu: int, model: int, expected: float) -> None:
    assert frag(free, cpu, model) == pytest.approx(expected)


def test_single_state_equals_batched_bit_for_bit() -> None:
    """One state alone and in a batch must give the same float64 (the FGD scores are integers
    of tiny differences, so a last-bit change would flip ties)."""
    rng = np.random.default_rng(7)
    free = rng.integers(0, 1001, size=(50, 8))
    cpu = rng.integers(0, 20000, size=50)
    model = rng.integers(0, 2, size=50)
    typical = TypicalPods(
        cpu_milli=rng.integers(100, 16000, size=40), milli=rng.integers(0, 1001, size=40),
        count=rng.integers(0, 3, size=40), allowed=rng.random((40, 2)) < 0.8,
        freq=rng.random(40) / 20,
    )
    batched = node_fragment(free, cpu, model, typical)
    singles = [node_fragment(free[i : i + 1], cpu[i : i + 1], model[i : i + 1], typical)[0] for i in range(50)]
    assert batched.tolist() == singles


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        pytest.param(1000.0, 1000.0, 50, id="no change scores 50"),
        pytest.param(1000.0, 0.0, 73, id="1000 milli less fragment: floor(100 * sigmoid(1))"),
        pytest.param(0.0, 1000.0, 26, id="1000 milli more fragment: floor(100 * sigmoid(-1))"),
        pytest.param(0.0, 1e-9, 49, id="a hair more fragment already drops below 50"),
    ],
)
def test_fgd_score(before: float, after: float, expected: int) -> None:
    assert fgd_score(np.array([before]), np.array([after])).tolist() == [expected]
