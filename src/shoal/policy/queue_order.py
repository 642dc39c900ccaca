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


def compare(l: QueueView, r: QueueView, l_req: Vec | None, r_req: Vec | None, total: Vec,
            l_victims: Vec | None = None, r_victims: Vec | None = None) -> int:
    """-1 if `l` goes first, 1 if `r` goes first, 0 if no rule decides.

    `l_req`/`r_req` are the requests of each queue's best job (None = no job); victims are the
    resources of jobs already chosen as victims from that queue (victim mode only).
    """
    la, ra = l.allocated, r.allocated
    lf, rf = l.fair_share, r.fair_share
    # 1. Under-utilised first: over-utilised means above fair share in every resource.
    lo = lf[0] < la[0] and lf[1] < la[1] and lf[2] < la[2]
    ro = rf[0] < ra[0] and rf[1] < ra[1] and rf[2] < ra[2]
    if lo != ro:
        return 1 if lo else -1
    # 2. Starved first: the best job still fits inside the deserved quota.
    ls, rs = _starved(la, l.deserved, l_req), _starved(ra, r.deserved, r_req)
    if ls != rs:
        return -1 if ls else 1
    # 3. Higher queue priority first.
    if l.priority != r.priority:
        return -1 if l.priority > r.priority else 1
    lreq = l_req if l_req is not None else _ZERO
    rreq = r_req if r_req is not None else _ZERO
    las, ras = l.alloc_share, r.alloc_share
    # 4. Queues that would use a resource they have zero share of go last.
    lz, rz = _zero_violation(la, lreq, las), _zero_violation(ra, rreq, ras)
    if lz != rz:
        return 1 if lz else -1
    lv = l_victims if l_victims is not None else _ZERO
    rv = r_victims if r_victims is not None else _ZERO
    # 5. Smaller dominant-resource share counting the job (and, in victim mode, without the
    # victims taken); 6. the queue's own share, neither job nor victims counted.
    ld, rd = _drs(la, lreq, lv, las, total), _drs(ra, rreq, rv, ras, total)
    if ld != rd:
        return -1 if ld < rd else 1
    ld, rd = _drs(la, _ZERO, _ZERO, las, total), _drs(ra, _ZERO, _ZERO, ras, total)
    if ld != rd:
        return -1 if ld < rd else 1
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
