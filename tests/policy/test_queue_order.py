"""The queue comparator (KAI proportion's, kai-spec §4.4): the per-queue rank key of rules 1-6 plus
the pairwise rules 7-8 must order exactly as KAI's rules taken one at a time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.policy.queue_order import QueueView, compare, rank_key

# Few distinct values, so that the rules tie often and the later rules get to decide.
_AMOUNT = st.sampled_from([0.0, 1.0, 2.0, 4.0, 8.0])
_SHARE = st.sampled_from([-1.0, 0.0, 2.0, 4.0])
_VEC = st.tuples(_AMOUNT, _AMOUNT, _AMOUNT)
_OPT = st.none() | _VEC


@st.composite
def _view(draw: st.DrawFn) -> QueueView:
    return QueueView(draw(st.sampled_from(["a", "b"])), draw(st.sampled_from([50, 100])),
                     draw(st.sampled_from([1.0, 2.0])), draw(_VEC), draw(_VEC),
                     draw(st.tuples(_SHARE, _SHARE, _SHARE)), draw(st.tuples(_SHARE, _SHARE, _SHARE)))


def _ratio(x: float, s: float, t: float) -> float:
    s = t if s == -1 else s
    return x * 1000.0 if s == 0 else x / s


def _drs(a: tuple[float, ...], req: tuple[float, ...], vic: tuple[float, ...], share: tuple[float, ...],
         total: tuple[float, ...]) -> float:
    return max(0.0, *(_ratio(a[i] + req[i] - vic[i], share[i], total[i]) for i in range(3)))


def _kai(l: QueueView, r: QueueView, lq: tuple[float, ...] | None, rq: tuple[float, ...] | None,
         total: tuple[float, ...], lv: tuple[float, ...] | None, rv: tuple[float, ...] | None) -> int:
    """KAI's rules in order, each deciding only when the ones before tie (the reference)."""
    zero = (0.0, 0.0, 0.0)

    def over(q: QueueView) -> bool:
        return all(q.fair_share[i] < q.allocated[i] for i in range(3))

    def starved(q: QueueView, req: tuple[float, ...] | None) -> bool:
        req = req or zero
        return all(q.deserved[i] == -1 or q.allocated[i] + req[i] <= q.deserved[i] for i in range(3))

    def violates(q: QueueView, req: tuple[float, ...]) -> bool:
        return any(q.alloc_share[i] == 0 and q.allocated[i] + req[i] > 0 for i in range(3))

    if over(l) != over(r):
        return 1 if over(l) else -1
    if starved(l, lq) != starved(r, rq):
        return -1 if starved(l, lq) else 1
    if l.priority != r.priority:
        return -1 if l.priority > r.priority else 1
    lreq, rreq = lq or zero, rq or zero
    if violates(l, lreq) != violates(r, rreq):
        return 1 if violates(l, lreq) else -1
    ld = _drs(tuple(l.allocated), lreq, lv or zero, tuple(l.alloc_share), total)
    rd = _drs(tuple(r.allocated), rreq, rv or zero, tuple(r.alloc_share), total)
    if ld != rd:
        return -1 if ld < rd else 1
    ld = _drs(tuple(l.allocated), zero, zero, tuple(l.alloc_share), total)
    rd = _drs(tuple(r.allocated), zero, zero, tuple(r.alloc_share), total)
    if ld != rd:
        return -1 if ld < rd else 1
    ls, rs = tuple(l.alloc_share), tuple(r.alloc_share)
    if ls != rs and all(ls[i] <= rs[i] for i in range(3)):
        return -1
    if ls != rs and all(rs[i] <= ls[i] for i in range(3)):
        return 1
    if l.creation != r.creation:
        return -1 if l.creation < r.creation else 1
    return 0


@settings(max_examples=1500, deadline=None)
@given(_view(), _view(), _OPT, _OPT, st.tuples(_AMOUNT, _AMOUNT, _AMOUNT), _OPT, _OPT)
def test_ranked_comparator_orders_as_kais_rules_one_by_one(
        l: QueueView, r: QueueView, lq: tuple[float, ...] | None, rq: tuple[float, ...] | None,
        total: tuple[float, ...], lv: tuple[float, ...] | None, rv: tuple[float, ...] | None) -> None:
    want = _kai(l, r, lq, rq, total, lv, rv)
    assert compare(l, r, lq, rq, total, lv, rv) == want
    assert compare(r, l, rq, lq, total, rv, lv) == -want


def test_rank_key_puts_the_under_served_starved_high_priority_queue_first() -> None:
    total = (8.0, 8.0, 8.0)
    hungry = QueueView("hungry", 100, 1.0, (1.0, 1.0, 1.0), (4.0, 4.0, 4.0), (4.0, 4.0, 4.0), (4.0, 4.0, 4.0))
    fed = QueueView("fed", 100, 1.0, (6.0, 6.0, 6.0), (4.0, 4.0, 4.0), (4.0, 4.0, 4.0), (4.0, 4.0, 4.0))
    assert rank_key(hungry, (1.0, 0.0, 0.0), total) < rank_key(fed, (1.0, 0.0, 0.0), total)
    assert compare(hungry, fed, (1.0, 0.0, 0.0), (1.0, 0.0, 0.0), total) == -1
