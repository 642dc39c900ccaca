"""Queue order (KAI proportion's comparator, kai-spec §4.4): which queue is served next.

All vectors have three columns (GPU, CPU, memory) in core units; -1 = unlimited.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class QueueView:
    """What the comparator reads of one queue."""

    name: str
    priority: int
    creation: float
    allocated: np.ndarray
    fair_share: np.ndarray
    deserved: np.ndarray
    alloc_share: np.ndarray


def _drs(x: np.ndarray, share: np.ndarray, total: np.ndarray) -> float:
    best = 0.0
    for r in range(len(x)):
        s = share[r]
        if s == -1:
            s = total[r]
        if s == 0:
            v = x[r] * 1000.0
        else:
            v = x[r] / s
        best = max(best, float(v))
    return best


def compare(l: QueueView, r: QueueView, l_req: np.ndarray | None, r_req: np.ndarray | None,
            total: np.ndarray, l_victims: np.ndarray | None = None,
            r_victims: np.ndarray | None = None) -> int:
    """-1 if `l` goes first, 1 if `r` goes first, 0 if no rule decides.

    `l_req`/`r_req` are the requests of each queue's best job (None = no job); victims are the
    resources of jobs already chosen as victims from that queue (victim mode only).
    """
    # 1. Under-utilised first: over-utilised means above fair share in every resource.
    lo = bool(np.all(l.fair_share < l.allocated))
    ro = bool(np.all(r.fair_share < r.allocated))
    if lo != ro:
        return 1 if lo else -1
    # 2. Starved first: the best job still fits inside the deserved quota.
    ls, rs = _starved(l, l_req), _starved(r, r_req)
    if ls != rs:
        return -1 if ls else 1
    # 3. Higher queue priority first.
    if l.priority != r.priority:
        return -1 if l.priority > r.priority else 1
    # 4. Queues that would use a resource they have zero share of go last.
    lz, rz = _zero_share_violation(l, l_req), _zero_share_violation(r, r_req)
    if lz != rz:
        return 1 if lz else -1
    lv = l_victims if l_victims is not None else 0.0
    rv = r_victims if r_victims is not None else 0.0
    # 5. Smaller dominant-resource share counting the job; 6. without it.
    lx = l.allocated + (l_req if l_req is not None else 0.0) - lv
    rx = r.allocated + (r_req if r_req is not None else 0.0) - rv
    ld, rd = _drs(lx, l.alloc_share, total), _drs(rx, r.alloc_share, total)
    if ld != rd:
        return -1 if ld < rd else 1
    ld, rd = _drs(l.allocated - lv, l.alloc_share, total), _drs(r.allocated - rv, r.alloc_share, total)
    if ld != rd:
        return -1 if ld < rd else 1
    # 7. Smaller allocatable share (everywhere <=, somewhere <).
    if np.all(l.alloc_share <= r.alloc_share) and np.any(l.alloc_share < r.alloc_share):
        return -1
    if np.all(r.alloc_share <= l.alloc_share) and np.any(r.alloc_share < l.alloc_share):
        return 1
    # 8. Older queue first.
    if l.creation != r.creation:
        return -1 if l.creation < r.creation else 1
    return 0


def _starved(q: QueueView, req: np.ndarray | None) -> bool:
    if req is None:
        return False
    x = q.allocated + req
    return bool(np.all((q.deserved == -1) | (x <= q.deserved)))


def _zero_share_violation(q: QueueView, req: np.ndarray | None) -> bool:
    x = q.allocated + (req if req is not None else 0.0)
    return bool(np.any((q.alloc_share == 0) & (x > 0)))
