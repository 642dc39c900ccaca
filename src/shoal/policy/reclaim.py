"""Reclaim conditions as pure math over queue vectors (kai-spec §4.5).

Every vector has three columns (GPU milli, CPU milli, memory bytes); -1 in a bound means
unlimited. `QueueState` is what the rules read of one queue, frozen at the start of a
reclaimer's attempt; the functions never mutate their inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class QueueState:
    """One queue as the reclaim rules see it."""

    name: str
    parent: str | None
    allocated: np.ndarray
    allocated_np: np.ndarray
    deserved: np.ndarray
    fair_share: np.ndarray
    alloc_share: np.ndarray


def fits_under(x: np.ndarray, bound: np.ndarray) -> bool:
    """x <= bound in every column, where a bound of -1 is unlimited (KAI `LessEqual`)."""
    return bool(np.all((bound == -1) | (x <= bound)))


def can_reclaim(q: QueueState, req: np.ndarray, preemptible: bool) -> bool:
    """`CanReclaimResources`: the reclaimer's leaf stays within its fair share with the job
    (and, for a non-preemptible job, its non-preemptible allocation within the quota)."""
    if not fits_under(q.allocated + req, q.fair_share):
        return False
    return preemptible or fits_under(q.allocated_np + req, q.deserved)


def path(queues: dict[str, QueueState], name: str) -> list[str]:
    """Queue names from the top-level queue down to `name`."""
    out: list[str] = []
    q: str | None = name
    while q is not None and q in queues:
        out.append(q)
        q = queues[q].parent
    return out[::-1]


def leveled(queues: dict[str, QueueState], reclaimer: str, reclaimee: str) -> tuple[str, str]:
    """The two queues under the lowest common ancestor (siblings) on each side (KAI
    `getLeveledQueues`: walk both root paths until they differ)."""
    a, b = path(queues, reclaimer), path(queues, reclaimee)
    x, y = a[0], b[0]
    for i in range(min(len(a), len(b))):
        x, y = a[i], b[i]
        if x != y:
            break
    return x, y


def fits_strategy(req: np.ndarray, x: QueueState, y: QueueState, remaining_y: np.ndarray) -> bool:
    """MaintainFairShare (Y above its allocatable share) or GuaranteeDeservedQuota (X stays
    within its quota with the job and Y is above its quota)."""
    if not fits_under(remaining_y, y.alloc_share):
        return True
    return fits_under(x.allocated + req, x.deserved) and not fits_under(remaining_y, y.deserved)


def _ratio(x: float, f: float) -> float:
    if f == 0:
        return float("inf") if x > 0 else 0.0
    if f == -1:
        return 0.0
    return x / f


#: Per reclaimee leaf queue: (the sum of its chunks but the last, the sum of all its chunks).
QueueSums = dict[str, tuple[np.ndarray, np.ndarray]]


def chunk_sums(chunks: dict[str, list[np.ndarray]]) -> QueueSums:
    """`reclaimable`'s reading of the chunks: per queue with chunks, the sum of all but the last
    (added one after another, in order) and the sum of all."""
    out: QueueSums = {}
    for qname, got in chunks.items():
        if not got:
            continue
        # np.array reads a list of small vectors several times faster than np.stack.
        taken = np.array(got, dtype=np.float64).reshape(-1, 3)
        before_last = np.cumsum(taken[:-1], axis=0)[-1] if len(taken) > 1 else np.zeros(3)
        out[qname] = (before_last, taken.sum(axis=0))
    return out


def reclaimable(queues: dict[str, QueueState], reclaimer: str, req: np.ndarray, preemptible: bool,
                chunks: dict[str, list[np.ndarray]], multiplier: float = 1.0) -> bool:
    """`Reclaimable`: may the reclaimer (leaf `reclaimer`, asking `req`) take `chunks`
    (per reclaimee leaf queue: the victims' resources, one vector per core/elastic chunk)?
    See `reclaimable_sums`."""
    return reclaimable_sums(queues, reclaimer, req, preemptible, chunk_sums(chunks), multiplier)


def reclaimable_sums(queues: dict[str, QueueState], reclaimer: str, req: np.ndarray, preemptible: bool,
                     sums: QueueSums, multiplier: float = 1.0) -> bool:
    """`Reclaimable` from each reclaimee queue's chunk sums (`chunk_sums`).

    Reclaimee queues are visited in name order (KAI: Go map order). A queue's chunks go one after
    another: before chunk i, its leveled queue Y has lost chunks 0..i-1, and the strategy
    (`fits_strategy`) must hold before every chunk. Chunks are never negative, so Y's remainder
    only shrinks from one chunk to the next, `fits_under` can only turn true, and the strategy -
    true while Y is above a bound - can only turn false: it holds before every chunk exactly when
    it holds before the last one, which is all that is checked."""
    remaining: dict[str, np.ndarray] = {}
    touched: dict[str, np.ndarray] = {}
    for qname in sorted(sums):
        before_last, total = sums[qname]
        x, y = leveled(queues, reclaimer, qname)
        if y not in remaining:
            remaining[y] = queues[y].allocated.copy()
        if not fits_strategy(req, queues[x], queues[y], remaining[y] - before_last):
            return False
        hit = total > 0  # some chunk takes the column (chunks are never negative)
        for a in path(queues, qname):
            if a not in remaining:
                remaining[a] = queues[a].allocated.copy()
            remaining[a] = remaining[a] - total
            touched[a] = touched.get(a, np.zeros(3, dtype=bool)) | hit
    return _within_boundaries(queues, reclaimer, req, preemptible, remaining, touched, multiplier)


def _siblings(queues: dict[str, QueueState], name: str) -> list[str]:
    parent = queues[name].parent
    return sorted(n for n, q in queues.items() if q.parent == parent and n != name)


def _within_boundaries(queues: dict[str, QueueState], reclaimer: str, req: np.ndarray, preemptible: bool,
                       remaining: dict[str, np.ndarray], touched: dict[str, np.ndarray],
                       multiplier: float) -> bool:
    """The saturation check at every level of the reclaimer's path: after the reclaim the
    reclaimer's side must not be more saturated (x multiplier) than a touched sibling."""
    for qname in reversed(path(queues, reclaimer)):
        q = queues[qname]
        a = remaining.get(qname, q.allocated) + req
        for sname in _siblings(queues, qname):
            if sname not in remaining:
                continue
            s = queues[sname]
            involved = touched.get(sname, np.zeros(3, dtype=bool)) | (req > 0)
            for r in np.flatnonzero(involved):
                fq, fs = float(q.fair_share[r]), float(s.fair_share[r])
                if fq == -1 and fs == -1:
                    continue
                rq = _ratio(float(a[r]), fq)
                if rq > 1 and fs > 0 and rq * multiplier >= _ratio(float(remaining[sname][r]), fs):
                    return False
        if not preemptible and not fits_under(q.allocated_np + req, q.deserved):
            return False
    return True
