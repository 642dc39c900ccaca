"""The reclaim rules as pure math (kai-spec §4.5): strategies, leveled queues, saturation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.policy.reclaim import (
    QueueState,
    _within_boundaries,
    can_reclaim,
    fits_strategy,
    fits_under,
    leveled,
    path,
    reclaimable,
)


def q(name: str, alloc: float, fs: float, deserved: float, parent: str | None = None,
      alloc_np: float = 0.0) -> QueueState:
    """A queue in whole GPUs (CPU and memory unlimited and unused); -1 deserved = unlimited."""
    def v(x: float) -> np.ndarray:
        return np.array([x * 1000, 0.0, 0.0])

    def bound(x: float) -> np.ndarray:
        return np.array([-1.0 if x == -1 else x * 1000, -1.0, -1.0])

    share = -1 if deserved == -1 else max(deserved, fs)
    return QueueState(name, parent, v(alloc), v(alloc_np), bound(deserved), v(fs), bound(share))


def gpus(x: float) -> np.ndarray:
    return np.array([x * 1000, 0.0, 0.0])


def queues(*qs: QueueState) -> dict[str, QueueState]:
    return {x.name: x for x in qs}


@pytest.mark.parametrize(("x", "bound", "want"), [
    pytest.param([1, 2, 3], [1, 2, 3], True, id="equal"),
    pytest.param([1, 2, 4], [1, 2, 3], False, id="one-over"),
    pytest.param([9, 9, 9], [-1, -1, -1], True, id="unlimited"),
])
def test_fits_under(x: list[float], bound: list[float], want: bool) -> None:
    assert fits_under(np.array(x, dtype=float), np.array(bound, dtype=float)) is want


@pytest.mark.parametrize(("queue", "req", "preemptible", "want"), [
    pytest.param(q("r", 1, 2, 2), 1, True, True, id="within-fair-share"),
    pytest.param(q("r", 2, 2, 2), 1, True, False, id="would-exceed-fair-share"),
    pytest.param(q("r", 0, 4, 1, alloc_np=1), 1, False, False, id="non-preemptible-over-quota"),
    pytest.param(q("r", 0, 4, 2, alloc_np=1), 1, False, True, id="non-preemptible-within-quota"),
])
def test_can_reclaim(queue: QueueState, req: float, preemptible: bool, want: bool) -> None:
    assert can_reclaim(queue, gpus(req), preemptible) is want


def test_leveled_queues_are_siblings_under_the_lowest_common_ancestor() -> None:
    qs = queues(q("d1", 0, 0, -1), q("d2", 0, 0, -1), q("a", 0, 0, 1, "d1"), q("b", 0, 0, 1, "d1"),
                q("c", 0, 0, 1, "d2"))
    assert leveled(qs, "a", "b") == ("a", "b")
    assert leveled(qs, "a", "c") == ("d1", "d2")


@pytest.mark.parametrize(("reclaimer", "reclaimee", "req", "chunks", "multiplier", "want"), [
    pytest.param(q("r", 0, 2, 2), q("v", 4, 2, 2), 2, [2], 1.0, True, id="maintain-fair-share"),
    pytest.param(q("r", 0, 2, 2), q("v", 2, 2, 2), 1, [1], 1.0, False, id="victim-at-its-share"),
    pytest.param(q("r", 0, 1, 3), q("v", 3, 3, 2), 1, [1], 1.0, True, id="guarantee-deserved-quota"),
    pytest.param(q("r", 2, 3, 1), q("v", 3, 3, 2), 1, [1], 1.0, False,
                 id="no-guarantee-when-reclaimer-over-quota"),
    pytest.param(q("r", 0, 2, 2), q("v", 4, 2, 2), 2, [1, 1], 1.0, True,
                 id="strategy-checked-before-each-chunk"),
    pytest.param(q("r", 0, 2, 2), q("v", 3, 2, 2), 2, [1, 1], 1.0, False,
                 id="second-chunk-would-take-victim-below-share"),
    pytest.param(q("r", 2, 2, 2), q("v", 4, 3, 2), 1, [1], 1.0, False, id="saturation-reclaimer-more-saturated"),
    pytest.param(q("r", 2, 2, 2), q("v", 9, 3, 2), 1, [1], 1.0, True, id="saturation-victim-more-saturated"),
    pytest.param(q("r", 2, 2, 2), q("v", 9, 3, 2), 1, [1], 2.0, False, id="saturation-multiplier"),
])
def test_reclaimable(reclaimer: QueueState, reclaimee: QueueState, req: float, chunks: list[float],
                     multiplier: float, want: bool) -> None:
    qs = queues(reclaimer, reclaimee)
    got = reclaimable(qs, reclaimer.name, gpus(req), True, {reclaimee.name: [gpus(c) for c in chunks]}, multiplier)
    assert got is want


def test_departments_compare_the_subtrees() -> None:
    """Reclaimer's department is below its share, the victim's department above: reclaim."""
    qs = queues(q("d1", 0, 4, 4), q("d2", 6, 4, 4), q("a", 0, 4, 4, "d1"), q("b", 6, 4, 4, "d2"))
    assert reclaimable(qs, "a", gpus(2), True, {"b": [gpus(2)]})
    # The same victims inside the reclaimer's own department at its fair share: no.
    qs = queues(q("d1", 6, 4, 4), q("a", 0, 2, 2, "d1"), q("b", 6, 2, 2, "d1"), q("d2", 0, 4, 4))
    assert reclaimable(qs, "a", gpus(2), True, {"b": [gpus(2)]})
    qs = queues(q("d1", 4, 4, 4), q("a", 0, 2, 2, "d1"), q("b", 2, 2, 2, "d1"), q("d2", 0, 4, 4))
    assert not reclaimable(qs, "a", gpus(2), True, {"b": [gpus(2)]})


# -- the strategy is checked before the last chunk only (`reclaimable_sums`) ---------------------
def _every_chunk(qs: dict[str, QueueState], reclaimer: str, req: np.ndarray, preemptible: bool,
                 chunks: dict[str, list[np.ndarray]], multiplier: float) -> bool:
    """KAI's walk, chunk by chunk: the strategy before each chunk, then the chunk taken."""
    remaining: dict[str, np.ndarray] = {}
    touched: dict[str, np.ndarray] = {}
    for qname in sorted(chunks):
        if not chunks[qname]:
            continue
        x, y = leveled(qs, reclaimer, qname)
        rem = remaining.get(y, qs[y].allocated.copy())
        for c in chunks[qname]:
            if not fits_strategy(req, qs[x], qs[y], rem):
                return False
            rem = rem - c
        remaining.setdefault(y, qs[y].allocated.copy())
        total = np.sum(chunks[qname], axis=0)
        for a in path(qs, qname):
            remaining[a] = remaining.get(a, qs[a].allocated.copy()) - total
            touched[a] = touched.get(a, np.zeros(3, dtype=bool)) | (total > 0)
    return _within_boundaries(qs, reclaimer, req, preemptible, remaining, touched, multiplier)


@st.composite
def _reclaim_cases(draw: st.DrawFn) -> tuple[dict[str, QueueState], np.ndarray, dict[str, list[np.ndarray]], bool]:
    depts = draw(st.booleans())
    names = ["r", "a", "b", "c"]
    parents = {"r": "d1", "a": "d1", "b": "d2", "c": "d2"} if depts else dict.fromkeys(names)
    small = st.integers(0, 12)
    out = [q(n, draw(small), draw(small), draw(st.sampled_from([-1, 0, 1, 2, 4, 8])), parents[n],
             alloc_np=draw(small)) for n in names]
    if depts:
        out += [q("d1", draw(small), draw(small), -1), q("d2", draw(small), draw(small), -1)]
    chunks = {n: [gpus(draw(st.integers(0, 4))) for _ in range(draw(st.integers(0, 5)))] for n in ("a", "b", "c")}
    return queues(*out), gpus(draw(st.integers(0, 4))), chunks, draw(st.booleans())


@settings(max_examples=400, deadline=None)
@given(_reclaim_cases(), st.sampled_from([1.0, 1.5]))
def test_the_last_chunk_decides_as_every_chunk_does(case: tuple[dict[str, QueueState], np.ndarray,
                                                                 dict[str, list[np.ndarray]], bool],
                                                    multiplier: float) -> None:
    qs, req, chunks, preemptible = case
    assert reclaimable(qs, "r", req, preemptible, chunks, multiplier) == \
        _every_chunk(qs, "r", req, preemptible, chunks, multiplier)
