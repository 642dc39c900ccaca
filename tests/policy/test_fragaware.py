"""fragaware's pure math: pod-mix text format, mix -> typical pods, the measures and the score."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.policy.fragaware import (
    FragAwareWeights,
    MixEntry,
    MixFormatError,
    NodeStates,
    capacity_waste,
    cpu_shortage,
    encode_mix,
    fragment,
    gap_levels,
    growth,
    lookahead_fragment,
    parse_mix,
    place_each,
    placement_score,
    ss_growth,
    state_measure,
    typical_from_mix,
)
from shoal.policy.fragmentation import node_fragment

I = np.int64


def states(free: list[list[int]], cpu: list[int], model: list[int] | None = None) -> NodeStates:
    f = np.array(free, dtype=I)
    return NodeStates(f, np.array(cpu, dtype=I), np.array(model or [0] * len(cpu), dtype=I),
                      (f > 0).sum(axis=1).astype(I) if f.size else np.zeros(0, dtype=I))


HALVES = typical_from_mix([MixEntry(1000, 500, 1, (), 1.0)], ["G"])


@pytest.mark.parametrize(
    "entries",
    [
        pytest.param([MixEntry(4000, 500, 1, (), 0.3)], id="one fractional kind"),
        pytest.param([MixEntry(12000, 1000, 2, ("A100", "H100"), 0.1), MixEntry(8000, 0, 0, (), 0.05)],
                     id="whole GPUs with a model list, and a CPU-only kind"),
        pytest.param([], id="empty mix"),
    ],
)
def test_mix_text_round_trips(entries: list[MixEntry]) -> None:
    assert parse_mix(encode_mix(entries)) == entries


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("4000/500=0.3", id="devices missing"),
        pytest.param("4000/1500x1=1", id="more than a GPU per device"),
        pytest.param("4000/500x1=-1", id="negative weight"),
        pytest.param("cpu/500x1=1", id="not a number"),
    ],
)
def test_bad_mix_entries_are_named(text: str) -> None:
    with pytest.raises(MixFormatError, match="bad pod-mix entry"):
        parse_mix(text)


def test_typical_from_mix_normalises_and_restricts_models() -> None:
    t = typical_from_mix([MixEntry(1000, 500, 1, ("T4",), 3.0), MixEntry(1000, 0, 0, ("T4",), 1.0),
                          MixEntry(1, 1, 1, (), 0.0)], ["A100", "T4"])
    assert t.freq.tolist() == [0.75, 0.25]  # the zero-weight kind is dropped
    assert t.allowed.tolist() == [[False, True], [True, True]]  # CPU-only pods ignore models
    assert t.count.tolist() == [1, 0] and t.milli.tolist() == [500, 0]


@pytest.mark.parametrize(
    ("free", "cpu", "expected"),
    [
        pytest.param([[1000, 1000]], [10_000], 0.0, id="two whole GPUs hold four halves: no waste"),
        pytest.param([[700, 1000]], [10_000], 200.0, id="a 700 GPU holds one half and strands 200"),
        pytest.param([[1000, 1000]], [2_000], 1000.0, id="CPU for two halves only: one GPU stranded"),
    ],
)
def test_capacity_waste(free: list[list[int]], cpu: list[int], expected: float) -> None:
    s = states(free, cpu)
    assert capacity_waste(s.free, s.cpu_left, s.model, HALVES).tolist() == [expected]


@pytest.mark.parametrize(
    ("cpu", "expected"),
    [
        pytest.param(4_000, 0.0, id="CPU feeds all four halves"),
        pytest.param(2_000, 1000.0, id="CPU feeds two halves: one GPU stranded"),
        pytest.param(0, 2000.0, id="no CPU: everything stranded"),
    ],
)
def test_cpu_shortage(cpu: int, expected: float) -> None:
    s = states([[1000, 1000]], [cpu])
    assert cpu_shortage(s.free, s.cpu_left, s.model, HALVES).tolist() == [expected]


def test_filling_a_half_used_gpu_beats_opening_a_fresh_one() -> None:
    # A 0.5-GPU pod against halves and whole GPUs: onto the GPU with 500 free (a whole GPU stays
    # free) or a fresh GPU (its 500 left cannot take a whole-GPU pod: fragment), even though the
    # fresh one is a little earlier in node order.
    mix = typical_from_mix([MixEntry(1000, 500, 1, (), 1.0), MixEntry(1000, 1000, 1, (), 1.0)], ["G"])
    before = states([[500, 1000], [1000, 1000]], [10_000, 10_000])
    after = states([[0, 1000], [500, 1000]], [9_000, 9_000])
    assert growth(before, after, mix).tolist() == [-0.25, 0.25]  # GPUs of fragment removed / added
    score = placement_score(before, after, np.array([0.1, 0.0]), mix)
    assert score[0] > score[1]


@pytest.mark.parametrize(
    ("weights", "winner"),
    [
        pytest.param(FragAwareWeights(order=1.0, fit=0.0), 0, id="equal fragment: the first node in order"),
        pytest.param(FragAwareWeights(order=0.0, fit=1.0), 1, id="best fit: the fuller node"),
    ],
)
def test_packing_terms_break_equal_fragment(weights: FragAwareWeights, winner: int) -> None:
    before = states([[1000, 1000, 1000, 1000], [1000, 1000, 0, 0]], [10_000, 10_000])
    after = states([[0, 1000, 1000, 1000], [0, 1000, 0, 0]], [9_000, 9_000])
    assert np.allclose(growth(before, after, HALVES), 0.0)
    score = placement_score(before, after, np.array([0.0, 0.5]), HALVES, weights)
    assert int(np.argmax(score)) == winner


def test_growth_deduplicates_large_batches_exactly() -> None:
    rng = np.random.default_rng(3)
    free = rng.choice([0, 250, 500, 1000], size=(300, 4)).astype(I)
    before = states(free.tolist(), [8000] * 300)
    after = NodeStates(np.where(free >= 500, free - 500, free), before.cpu_left - 1000, before.model,
                       before.gpu_count)
    w = FragAwareWeights(capacity=1.0, shortage=1.0)
    big = growth(before, after, HALVES, w)
    small = np.concatenate([growth(NodeStates(before.free[i:i + 50], before.cpu_left[i:i + 50],
                                              before.model[i:i + 50], before.gpu_count[i:i + 50]),
                                   NodeStates(after.free[i:i + 50], after.cpu_left[i:i + 50],
                                              after.model[i:i + 50], after.gpu_count[i:i + 50]), HALVES, w)
                            for i in range(0, 300, 50)])
    assert np.array_equal(big, small)


def test_fused_measure_equals_its_parts() -> None:
    rng = np.random.default_rng(5)
    mix = typical_from_mix([MixEntry(4000, 500, 1, (), 2.0), MixEntry(8000, 1000, 2, ("T4",), 1.0),
                            MixEntry(2000, 0, 0, (), 1.0)], ["A100", "T4"])
    s = NodeStates(rng.choice([0, 300, 500, 1000], size=(50, 4)).astype(I), rng.integers(0, 20_000, 50),
                   rng.integers(0, 2, 50), np.full(50, 4, dtype=I))
    w = FragAwareWeights(fragment=1.0, shortage=0.5, capacity=0.25)
    want = (fragment(s.free, s.cpu_left, s.model, mix) + 0.5 * cpu_shortage(s.free, s.cpu_left, s.model, mix)
            + 0.25 * capacity_waste(s.free, s.cpu_left, s.model, mix))
    assert np.allclose(state_measure(s, mix, w), want)
    assert np.allclose(fragment(s.free, s.cpu_left, s.model, mix), node_fragment(s.free, s.cpu_left, s.model, mix))


@pytest.mark.parametrize(
    ("weights", "winner"),
    [
        pytest.param(FragAwareWeights(order=0.0, fit=0.0, cpu=-0.3), 1, id="cpu < 0: the node with more CPU left"),
        pytest.param(FragAwareWeights(order=0.0, fit=0.0, cpu=0.3), 0, id="cpu > 0: CPU best fit"),
        pytest.param(FragAwareWeights(order=0.0, fit=0.0, cpu=0.0, used=1.0), 0, id="used-first: the used node"),
        pytest.param(FragAwareWeights(order=1.0, fit=0.0, cpu=0.0, used=0.0), 1, id="node order alone"),
    ],
)
def test_cpu_and_used_first_terms(weights: FragAwareWeights, winner: int) -> None:
    # Node 0: half its GPUs used, 20 cores left; node 1: idle, 90 cores, earlier in the order.
    before = states([[1000, 1000, 0, 0], [1000, 1000, 1000, 1000]], [20_000, 90_000])
    before = NodeStates(before.free, before.cpu_left, before.model, np.array([4, 4], dtype=I))
    after = NodeStates(np.array([[0, 1000, 0, 0], [0, 1000, 1000, 1000]], dtype=I), before.cpu_left - 1000,
                       before.model, before.gpu_count)
    whole = typical_from_mix([MixEntry(1000, 1000, 1, (), 1.0)], ["G"])
    assert np.allclose(growth(before, after, whole, weights), 0.0)  # equal fragment: only the terms decide
    score = placement_score(before, after, np.array([0.5, 0.0]), whole, weights)
    assert int(np.argmax(score)) == winner


def test_place_each_and_lookahead() -> None:
    mix = typical_from_mix([MixEntry(1000, 500, 1, (), 1.0), MixEntry(1000, 1000, 1, (), 1.0)], ["G"])
    s = states([[500, 1000], [700, 1000]], [10_000, 500])
    after, cpu, ok = place_each(s, mix)
    # node 0: the half takes the fullest fitting GPU (500), the whole pod the free one;
    # node 1 lacks CPU for both: unchanged.
    assert after.tolist() == [[[0, 1000], [700, 1000]], [[500, 0], [700, 1000]]]
    assert ok.tolist() == [[True, False], [True, False]] and cpu.tolist() == [[9000, 500], [9000, 500]]
    # After the next pod node 0 holds one whole GPU (no fragment) or one half GPU (fragment for the
    # whole pod); node 1 stays as it is: all of it is fragment (no CPU).
    assert lookahead_fragment(s, mix).tolist() == [125.0, 1700.0]  # 0.5 * 0 + 0.5 * (0.5 * 500)


SS_MIX = typical_from_mix([MixEntry(1000, 200, 1, (), 1.0), MixEntry(1000, 500, 1, (), 1.0),
                           MixEntry(1000, 1000, 2, (), 1.0)], ["G"])


def test_gap_levels_count_the_fractional_sizes_that_fit() -> None:
    levels = gap_levels(SS_MIX)  # fractional sizes 200 and 500; the 2-GPU pod is not fractional
    assert [int(levels[h]) for h in (0, 199, 200, 499, 500, 1000)] == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # Cluster: partly used GPUs with 300, 300 (level 1) and 600 (level 2) free; G = 3 + 1.
        pytest.param(1000, 700, (2 * 1 + 1) / 4, id="a fresh GPU joins level 2 (1 GPU there)"),
        pytest.param(300, 100, ((1 - 2 * 2) + (2 * 0 + 1)) / 4, id="level 1 -> level 0 evens the counts"),
        pytest.param(600, 0, (1 - 2 * 1) / 4, id="a filled GPU leaves the counts"),
        pytest.param(300, 250, 0.0, id="same level: no change"),
        pytest.param(1000, 0, 0.0, id="a whole GPU used whole: no partly used GPU involved"),
    ],
)
def test_ss_growth(before: int, after: int, expected: float) -> None:
    free = np.array([[300, 300, 0, 0], [600, 1000, 1000, 0]], dtype=I)
    out = ss_growth(free, np.array([before], dtype=I), np.array([after], dtype=I), gap_levels(SS_MIX))
    assert out.tolist() == pytest.approx([expected])


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param((1, 3), id="one row"),
        pytest.param((300, 4), id="few distinct rows"),
        pytest.param((2000, 10), id="negative and large values"),
    ],
)
def test_unique_rows_is_numpy_unique_axis0(shape: tuple[int, int]) -> None:
    # The measure's dedup must hand _measure the very batch np.unique(axis=0) would (bit-identical replays).
    from shoal.policy.fragaware import _unique_rows

    rng = np.random.default_rng(shape[0])
    key = rng.choice(np.array([-1000, -1, 0, 1, 255, 256, 500, 1000, 1 << 40]), size=shape).astype(np.int64)
    uniq, inverse = np.unique(key, axis=0, return_inverse=True)
    got_uniq, got_inverse = _unique_rows(key)
    assert np.array_equal(got_uniq, uniq) and np.array_equal(got_inverse, inverse.reshape(-1))


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed {s}") for s in range(3)])
def test_ss_growth_is_the_change_of_the_sum_of_squares(seed: int) -> None:
    # Brute force: count the levels, move one partly used / whole GPU, count again.
    from shoal.policy.fragaware import ss_growth, ss_level_counts
    from shoal.policy.fragmentation import TypicalPods

    rng = np.random.default_rng(seed)
    mix = TypicalPods(cpu_milli=np.array([1000, 1000, 1000]), milli=np.array([300, 600, 800]),
                      count=np.array([1, 1, 1]), allowed=np.ones((3, 1), dtype=bool), freq=np.full(3, 1 / 3))
    levels = gap_levels(mix)
    free = rng.choice(np.array([0, 100, 200, 350, 400, 700, 750, 1000]), size=(6, 4)).astype(np.int64)
    before = free.reshape(-1)
    size = int(rng.choice(np.array([300, 600, 800])))
    movable = np.flatnonzero(before >= size)
    after = before[movable] - size
    got = ss_growth(free, before[movable], after, levels)
    counts = ss_level_counts(free, levels)
    for k, d in enumerate(movable.tolist()):
        moved = before.copy()
        moved[d] -= size
        new = ss_level_counts(moved, levels)
        expected = (float((new**2).sum()) - float((counts**2).sum())) / (counts.sum() + 1.0)
        assert got[k] == pytest.approx(expected)
