"""The FGD replay's fragment memo: same floats as ``node_fragment``, one measurement per state."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.experiments.fgd.fragment_memo import FragmentMemo, distinct_states
from shoal.policy.fragmentation import TypicalPods, node_fragment
from shoal.sim.loaders.openb import MAX_GPUS_PER_NODE

TYPICAL = TypicalPods(
    cpu_milli=np.array([4000, 8000, 2000, 8000], dtype=np.int64),
    milli=np.array([0, 500, 1000, 250], dtype=np.int64),
    count=np.array([0, 1, 2, 1], dtype=np.int64),
    allowed=np.array([[True, True], [True, True], [True, False], [False, True]]),
    freq=np.array([0.1, 0.3, 0.2, 0.4]),
)


def states(rows: list[tuple[int, int, list[int]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(free [B, 8], cpu [B], model [B]) from (model, cpu, free of the first devices) rows."""
    free = np.zeros((len(rows), MAX_GPUS_PER_NODE), dtype=np.int64)
    for i, (_, _, devices) in enumerate(rows):
        free[i, : len(devices)] = devices
    return free, np.array([r[1] for r in rows], dtype=np.int64), np.array([r[0] for r in rows], dtype=np.int64)


@pytest.mark.parametrize(
    ("rows", "measured"),
    [
        pytest.param([(0, 9000, [1000, 300]), (0, 9000, [300, 1000])], 1, id="device order does not matter"),
        pytest.param([(0, 9000, [1000, 300]), (0, 12000, [1000, 300])], 1, id="CPU in the same typical step"),
        pytest.param([(0, 9000, [1000, 300]), (0, 7000, [1000, 300])], 2, id="CPU below a typical request"),
        pytest.param([(0, 9000, [1000, 300]), (1, 9000, [1000, 300])], 2, id="another GPU model"),
        pytest.param([(0, 9000, [1000, 300]), (0, 9000, [1000, 250])], 2, id="another free amount"),
    ],
)
def test_memo_measures_each_canonical_state_once(rows: list[tuple[int, int, list[int]]], measured: int) -> None:
    free, cpu, model = states(rows)
    memo = FragmentMemo(TYPICAL)
    assert memo.fragment(free, cpu, model).tolist() == node_fragment(free, cpu, model, TYPICAL).tolist()
    assert memo.computed == measured


def test_memo_equals_node_fragment_bit_for_bit_on_random_states() -> None:
    rng = np.random.default_rng(7)
    memo = FragmentMemo(TYPICAL)
    for size in (1, 2, 5, 300):  # batches of several sizes, the cache filling up in between
        free = rng.choice([0, 250, 300, 500, 750, 1000], size=(size, MAX_GPUS_PER_NODE)).astype(np.int64)
        cpu = rng.choice([0, 2000, 3999, 4000, 8000, 64000], size=size).astype(np.int64)
        model = rng.integers(0, 2, size=size).astype(np.int64)
        ours = memo.fragment(free, cpu, model)
        assert ours.tobytes() == node_fragment(free, cpu, model, TYPICAL).tobytes()
    assert 0 < memo.computed < 1 + 2 + 5 + 300


@pytest.mark.parametrize(
    ("rows", "groups"),
    [
        pytest.param([(0, 9000, [1000, 300]), (0, 9000, [1000, 300]), (0, 9000, [300, 1000])],
                     [0, 0, 1], id="device order matters here (the device choice depends on it)"),
        pytest.param([(0, 9000, [1000]), (0, 9001, [1000]), (1, 9000, [1000])], [0, 1, 2], id="CPU and model"),
        pytest.param([(0, 9000, [0] * 7 + [5]), (0, 9000, [0] * 7 + [6]), (0, 9000, [0] * 7 + [5])],
                     [0, 1, 0], id="the last device counts"),
    ],
)
def test_distinct_states_groups_exactly_equal_rows(rows: list[tuple[int, int, list[int]]], groups: list[int]) -> None:
    free, cpu, model = states(rows)
    reps, inverse = distinct_states(free, cpu, model)
    assert len(reps) == len(set(groups))
    for i, group in enumerate(groups):
        rep = reps[inverse[i]]
        assert free[rep].tolist() == free[i].tolist() and cpu[rep] == cpu[i] and model[rep] == model[i]
        assert [inverse[j] == inverse[i] for j in range(len(groups))] == [g == group for g in groups]
