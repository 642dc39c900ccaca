"""Lower bounds of the unallocated GPU (shoal.experiments.fgd.bounds) on hand-made arrivals."""

from __future__ import annotations

import pytest

from shoal.experiments.fgd.bounds import bound_at_100, model_bound, sliver_bound
from shoal.sim.loaders.openb import OpenbNode, OpenbPod


def pod(milli: int, num_gpu: int = 1, spec: tuple[str, ...] = ()) -> OpenbPod:
    return OpenbPod("p", 1000, 1, num_gpu, milli, spec)


@pytest.mark.parametrize(
    ("pods", "capacity", "expected"),
    [
        # Ten 0.8 pods on ten GPUs: each leaves 0.2 nothing can fill (no small pods) = 2000;
        # dropping them would cost 800 each, so the bound is the waste.
        pytest.param([pod(800)] * 10, 10_000, 2000.0, id="lone big pods leave their gaps"),
        # Small pods of 0.2 fill every gap exactly: no bound beyond the empty slack.
        pytest.param([pod(800)] * 10 + [pod(200)] * 10, 10_000, 0.0, id="gaps filled by small pods"),
        # 0.3 pods cannot enter a 0.2 gap: they do not reduce the bound.
        pytest.param([pod(800)] * 10 + [pod(300)] * 2, 10_600, 2000.0, id="too-large small pods do not help"),
        # Only half pods: two share a GPU, no sliver argument.
        pytest.param([pod(500)] * 4, 2000, 0.0, id="halves pair up"),
        # Arrived less than capacity: the slack is unallocated whatever the policy does.
        pytest.param([pod(1000)] * 3, 5000, 2000.0, id="slack"),
        # Nine 0.9 pods (gap 0.1 each = 900), arrivals = capacity: a policy can drop pods instead
        # of leaving gaps; LP trade over k dropped pods: 900 - 100k = 900k -> k = 0.9, bound 810.
        pytest.param([pod(900)] * 9, 8100, 810.0, id="dropping trades against waste"),
    ],
)
def test_sliver_bound(pods: list[OpenbPod], capacity: int, expected: float) -> None:
    assert sliver_bound(pods, capacity) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        # 3 whole GPUs that may only use the 1-GPU "A" node: 2 must be dropped; 1 GPU is arrived
        # short of the 4-GPU capacity on top.
        pytest.param([pod(1000, 1, ("A",))] * 3, 1000.0 + 2000.0, id="pods pinned to a small model"),
        pytest.param([pod(1000)] * 4, 0.0, id="unconstrained pods fit"),
    ],
)
def test_model_bound(pods: list[OpenbPod], expected: float) -> None:
    nodes = [OpenbNode("a", 8000, 1 << 20, 1, "A"), OpenbNode("b", 8000, 1 << 20, 3, "B")]
    assert model_bound(pods, nodes) == pytest.approx(expected)


def test_bound_at_100_averages_the_events_at_full_arrival() -> None:
    nodes = [OpenbNode("a", 96000, 1 << 20, 10, "A")]
    pods = [pod(800)] * 10 + [pod(1000)] * 2
    b = bound_at_100(pods, nodes)
    # Only the 12th event arrives at 100% (10 x 800 + 2 x 1000 = 10 GPUs; the 11th is at 90%).
    # Gaps 10 x 200, but two 0.8 pods may be dropped for the whole ones: 2000 - 200k = 800k at
    # k = 2, i.e. 1600 either way.
    assert b.value == pytest.approx(1600.0)
    assert b.models == pytest.approx(0.0)
