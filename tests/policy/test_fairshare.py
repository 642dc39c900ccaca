"""Properties of the fair-share division (kai-spec §4.2), with Hypothesis, plus worked examples."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.policy.fairshare import ShareInput, divide

UNIT = 1000.0


def q(name: str, deserved: float = 0, weight: float = 1, request: float = 0, limit: float = -1,
      priority: int = 100, creation: float = 0.0) -> ShareInput:
    return ShareInput(name, deserved, limit, weight, priority, request, creation)


queue_st = st.builds(
    lambda i, d, w, r, lim, p: q(f"q{i}", d * UNIT, float(w), r * UNIT, -1 if lim < 0 else lim * UNIT, p, i),
    st.integers(0, 0), st.integers(0, 8), st.integers(0, 4), st.integers(0, 40), st.integers(-1, 40),
    st.sampled_from([50, 100, 150]),
)


@st.composite
def queue_sets(draw: st.DrawFn) -> list[ShareInput]:
    n = draw(st.integers(1, 6))
    out = []
    for i in range(n):
        base = draw(queue_st)
        out.append(ShareInput(f"q{i}", base.deserved, base.limit, base.weight, base.priority, base.request, i))
    return out


@settings(max_examples=300, deadline=None)
@given(queue_sets(), st.integers(0, 64))
def test_no_queue_gets_more_than_it_can_request_beyond_quota(queues: list[ShareInput], total: int) -> None:
    fs = divide(total * UNIT, queues, UNIT)
    for qi in queues:
        cap = qi.requestable
        # Over-quota shares stop at the request (capped by the limit); residue hand-out may add < 1 unit.
        assert fs[qi.name] <= max(cap, min(qi.deserved, cap)) + UNIT + 1e-6


@settings(max_examples=300, deadline=None)
@given(queue_sets(), st.integers(0, 64))
def test_shares_never_exceed_capacity_unless_quotas_do(queues: list[ShareInput], total: int) -> None:
    fs = divide(total * UNIT, queues, UNIT)
    deserved = sum(min(qi.deserved, qi.requestable) for qi in queues)
    assert sum(fs.values()) <= max(total * UNIT, deserved) + 1e-6


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 8), st.integers(0, 8), st.integers(1, 40), st.integers(0, 64))
def test_more_weight_never_gets_less(w1: int, w2: int, request: int, total: int) -> None:
    lo, hi = sorted((w1, w2))
    queues = [q("light", 0, lo, request * UNIT, creation=0), q("heavy", 0, hi, request * UNIT, creation=1)]
    fs = divide(total * UNIT, queues, UNIT)
    # Equal requests: the heavier queue gets at least as much, up to one residue unit of tie-breaking.
    assert fs["heavy"] + UNIT >= fs["light"]


@pytest.mark.parametrize(
    ("queues", "total", "want"),
    [
        pytest.param([q("q0", 1, 3, 2), q("q1", 2, 1, 2.5)], 4, {"q0": 2, "q1": 2},
                     id="kai reclaim example: residue goes to the larger residue"),
        pytest.param([q("a", 0, 1, 10), q("b", 0, 1, 10)], 8, {"a": 4, "b": 4}, id="equal weights split evenly"),
        pytest.param([q("a", 0, 3, 10), q("b", 0, 1, 10)], 8, {"a": 6, "b": 2}, id="weights 3:1"),
        pytest.param([q("a", 0, 1, 10, priority=200), q("b", 0, 1, 10)], 8, {"a": 8, "b": 0},
                     id="higher priority tier is served first"),
        pytest.param([q("a", 2, 1, 10, limit=3), q("b", 0, 1, 10)], 8, {"a": 3, "b": 5},
                     id="limit caps the over-quota share"),
        pytest.param([q("a", 6, 1, 2), q("b", 0, 1, 10)], 8, {"a": 2, "b": 6},
                     id="deserved is capped by the request"),
    ],
)
def test_examples(queues: list[ShareInput], total: float, want: dict[str, float]) -> None:
    scaled = [ShareInput(x.name, x.deserved * UNIT, x.limit * UNIT if x.limit != -1 else -1, x.weight,
                         x.priority, x.request * UNIT, x.creation) for x in queues]
    got = divide(total * UNIT, scaled, UNIT)
    assert {k: v / UNIT for k, v in got.items()} == want
