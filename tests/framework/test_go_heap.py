"""GoHeap sifts exactly as Go's container/heap: same pops for a consistent order, and the same
(unsorted) arrangement when the order changes between fixes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shoal.framework.go_heap import GoHeap


def _lt(a: int, b: int) -> bool:
    return a < b


@given(st.lists(st.integers(-50, 50), max_size=60))
def test_pops_in_order_for_a_consistent_comparator(xs: list[int]) -> None:
    h: GoHeap[int] = GoHeap()
    for x in xs:
        h.push(x, _lt)
    assert [h.pop(_lt) for _ in range(len(xs))] == sorted(xs)
    assert not h


def test_arrangement_matches_go() -> None:
    # Go: h := &IntHeap{}; for _, x := range []int{5, 2, 8, 1, 9, 3} { heap.Push(h, x) } -> [1 2 3 5 9 8]
    h: GoHeap[int] = GoHeap()
    for x in (5, 2, 8, 1, 9, 3):
        h.push(x, _lt)
    assert h.items == [1, 2, 3, 5, 9, 8]
    # heap.Pop -> 1, leaving [2 5 3 8 9]
    assert h.pop(_lt) == 1 and h.items == [2, 5, 3, 8, 9]


def test_fix_re_sifts_only_the_entry_it_is_given() -> None:
    # Values change behind the heap's back (KAI's queues gain allocations); Fix(0) moves only the top.
    score = {"a": 1, "b": 2, "c": 3, "d": 4}

    def less(x: str, y: str) -> bool:
        return score[x] < score[y]

    h: GoHeap[str] = GoHeap()
    for k in "abcd":
        h.push(k, less)
    assert h.items == ["a", "b", "c", "d"]
    score.update(a=10, d=0)  # d is now best but sits deep; a is now worst
    h.fix(0, less)
    assert h.items == ["b", "d", "c", "a"]  # a sank below b then d; d did not rise past b
    assert h.peek() == "b"
