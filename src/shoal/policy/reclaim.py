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


def _fits_rows(x: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """`fits_under` for every row of x."""
    out: np.ndarray = np.all((bound == -1) | (x <= bound), axis=1)
    return out


def _strategy_rows(req: np.ndarray, x: QueueState, y: QueueState, remaining_y: np.ndarray) -> np.ndarray:
    """`fits_strategy` for every row of `remaining_y`."""
    guarantee = fits_under(x.allocated + req, x.deserved)
    out: np.ndarray = ~_fits_rows(remaining_y, y.alloc_share) | (guarantee & ~_fits_rows(remaining_y, y.deserved))
    return out


def _ratio(x: float, f: float) -> float:
    if f == 0:
        return float("inf") if x > 0 else 0.0
    if f == -1:
        return 0.0
    return x / f


def reclaimable(queues: dict[str, QueueState], reclaimer: str, req: np.ndarray, preemptible: bool,
                chunks: dict[str, list[np.ndarray]], multiplier: float = 1.0) -> bool:
    """`Reclaimable`: may the reclaimer (leaf `reclaimer`, asking `req`) take `chunks`
    (per reclaimee leaf queue: the victims' resources, one vector per core/elastic chunk)?

    Reclaimee queues are visited in name order (KAI: Go map order)."""
    remaining: dict[str, np.ndarray] = {}
    touched: dict[str, np.ndarray] = {}
    for qname in sorted(chunks):
        if not chunks[qname]:
            continue
        x, y = leveled(queues, reclaimer, qname)
        if y not in remaining:
            remaining[y] = queues[y].allocated.copy()
        # np.array reads a list of small vectors several times faster than np.stack.
        taken = np.array(chunks[qname], dtype=np.float64).reshape(-1, 3)
        # The chunks go one after another: before chunk i, Y has lost chunks 0..i-1 (y is on
        # qname's path). Checked for all i at once.
        before = remaining[y] - np.vstack([np.zeros((1, 3)), np.cumsum(taken[:-1], axis=0)])
        if not _strategy_rows(req, queues[x], queues[y], before).all():
            return False
        total = taken.sum(axis=0)
        hit = (taken > 0).any(axis=0)
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
