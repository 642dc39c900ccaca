"""Queue order (KAI proportion's comparator, kai-spec §4.4): which queue is served next.

Resource vectors are 3-tuples of floats (GPU, CPU, memory) in core units; -1 = unlimited.
Plain, unrolled Python on purpose: the vectors are tiny and the comparator runs in the hot loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Vec = Sequence[float]
_ZERO = (0.0, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class QueueView:
    """What the comparator reads of one queue."""

    name: str
    priority: int
    creation: float
    allocated: Vec
    fair_share: Vec
    deserved: Vec
    alloc_share: Vec


def _ratio(x: float, s: float, t: float) -> float:
    if s == -1:
        s = t
    return x * 1000.0 if s == 0 else x / s


def _drs(a: Vec, req: Vec, vic: Vec, share: Vec, total: Vec) -> float:
    return max(0.0,
               _ratio(a[0] + req[0] - vic[0], share[0], total[0]),
               _ratio(a[1] + req[1] - vic[1], share[1], total[1]),
               _ratio(a[2] + req[2] - vic[2], share[2], total[2]))


#: Rules 1-6 of `compare` for one queue: each rule reads only that queue's own values, so the
#: rules compare as a tuple (smaller goes first): over-utilised, not starved, -priority, zero-share
#: violation, dominant share counting job and victims, dominant share of the allocation alone.
RankKey = tuple[bool, bool, int, bool, float, float]


def rank_key(q: QueueView, req: Vec | None, total: Vec, victims: Vec | None = None) -> RankKey:
    """`q`'s key for rules 1-6 of `compare` with its best job's request `req` (None = no job) and,
    in victim mode, the resources of its victims already chosen."""
    a, f = q.allocated, q.fair_share
    # 1. Under-utilised first: over-utilised means above fair share in every resource.
    over = f[0] < a[0] and f[1] < a[1] and f[2] < a[2]
    # 2. Starved first: the best job still fits inside the deserved quota.
    starved = _starved(a, q.deserved, req)
    # 3. Higher queue priority first.
    r = req if req is not None else _ZERO
    share = q.alloc_share
    # 4. Queues that would use a resource they have zero share of go last.
    zero = _zero_violation(a, r, share)
    # 5. Smaller dominant-resource share counting the job (and, in victim mode, without the
    # victims taken); 6. the queue's own share, neither job nor victims counted.
    v = victims if victims is not None else _ZERO
    return (over, not starved, -q.priority, zero, _drs(a, r, v, share, total), _drs(a, _ZERO, _ZERO, share, total))


def compare(l: QueueView, r: QueueView, l_req: Vec | None, r_req: Vec | None, total: Vec,
            l_victims: Vec | None = None, r_victims: Vec | None = None) -> int:
    """-1 if `l` goes first, 1 if `r` goes first, 0 if no rule decides.

    `l_req`/`r_req` are the requests of each queue's best job (None = no job); victims are the
    resources of jobs already chosen as victims from that queue (victim mode only).
    """
    return compare_ranked(l, r, rank_key(l, l_req, total, l_victims), rank_key(r, r_req, total, r_victims))


def compare_ranked(l: QueueView, r: QueueView, lk: RankKey, rk: RankKey) -> int:
    """`compare` given each queue's `rank_key` (callers may keep the keys between comparisons)."""
    if lk != rk:
        return -1 if lk < rk else 1
    las, ras = l.alloc_share, r.alloc_share
    # 7. Smaller allocatable share (everywhere <=, somewhere <).
    if las[0] <= ras[0] and las[1] <= ras[1] and las[2] <= ras[2] and tuple(las) != tuple(ras):
        return -1
    if ras[0] <= las[0] and ras[1] <= las[1] and ras[2] <= las[2] and tuple(las) != tuple(ras):
        return 1
    # 8. Older queue first.
    if l.creation != r.creation:
        return -1 if l.creation < r.creation else 1
    return 0


def _starved(a: Vec, d: Vec, req: Vec | None) -> bool:
    """Allocation plus the best job's request within the deserved quota. No job (victim mode)
    counts as an empty request, as KAI's `GetTasksToAllocateInitResource(nil)` does."""
    if req is None:
        req = _ZERO
    return ((d[0] == -1 or a[0] + req[0] <= d[0]) and (d[1] == -1 or a[1] + req[1] <= d[1])
            and (d[2] == -1 or a[2] + req[2] <= d[2]))


def _zero_violation(a: Vec, req: Vec, share: Vec) -> bool:
    return ((share[0] == 0 and a[0] + req[0] > 0) or (share[1] == 0 and a[1] + req[1] > 0)
            or (share[2] == 0 and a[2] + req[2] > 0))
