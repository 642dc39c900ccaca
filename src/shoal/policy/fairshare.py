"""Fair-share division of a resource among sibling queues (KAI proportion, kai-spec §4.2).

Deserved quota first, then the surplus by over-quota priority tiers and weights (water-filling,
with per-round floors to whole units and usage-adjusted weights), then leftover whole units to
the largest residues. Applied top-down: the children of a queue divide the parent's share.
Amounts are floats in core units; `unit` is the whole unit shares are floored to (1000 for GPU
milli, 1 for CPU milli and memory bytes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

UNLIMITED = -1.0


@dataclass(frozen=True, slots=True)
class ShareInput:
    """One queue's inputs for one resource. deserved/limit -1 = unlimited."""

    name: str
    deserved: float
    limit: float
    weight: float
    priority: int
    request: float
    creation: float
    usage: float = 0.0

    @property
    def requestable(self) -> float:
        return self.request if self.limit == UNLIMITED else min(self.limit, self.request)


def divide(total: float, queues: Sequence[ShareInput], unit: float = 1.0, k_value: float = 1.0) -> dict[str, float]:
    """Fair share of each queue out of `total`. Pure; deterministic for a given input order.

    Contract: no queue gets more over-quota share than it can request (its request capped by
    its limit); the sum of shares never exceeds `total` unless deserved quotas alone exceed it.
    """
    fs = {q.name: 0.0 for q in queues}
    rem = float(total)
    for q in queues:
        deserved = float(total) if q.deserved == UNLIMITED else q.deserved
        give = max(min(deserved, q.requestable), 0.0)
        fs[q.name] += give
        rem -= give
    if rem <= 0:
        return fs
    residues: dict[int, dict[str, float]] = {}
    for prio in sorted({q.priority for q in queues}, reverse=True):
        tier = [q for q in queues if q.priority == prio]
        rem, residues[prio] = _waterfill(rem, tier, fs, unit, k_value)
        if rem <= 0:
            break
    by_name = {q.name: q for q in queues}
    for prio in sorted(residues, reverse=True):
        order = sorted(residues[prio].items(), key=lambda kv: (-kv[1], by_name[kv[0]].creation, kv[0]))
        for name, _residue in order:
            if rem <= 0:
                break
            amount = min(unit, rem)
            fs[name] += amount
            rem -= amount
    return fs


def _waterfill(
    rem: float, tier: Sequence[ShareInput], fs: dict[str, float], unit: float, k_value: float
) -> tuple[float, dict[str, float]]:
    residue: dict[str, float] = {}
    while True:
        def unsat(q: ShareInput) -> bool:
            return q.request > fs[q.name] and (q.limit == UNLIMITED or q.limit > fs[q.name])

        w_total = sum(q.weight for q in tier if q.requestable - fs[q.name] > 0)
        if w_total <= 0:
            break
        shares: dict[str, float] = {}
        for q in tier:
            if unsat(q):
                n = q.weight / w_total
                shares[q.name] = max(0.0, n + k_value * (n - q.usage))
        s_total = sum(shares.values())
        if s_total <= 0:
            break
        give, more = rem, False
        for q in tier:
            if rem <= 0:
                break
            if not unsat(q) or q.weight == 0:
                continue
            need = max(0.0, q.requestable - fs[q.name])
            share = give * shares[q.name] / s_total
            if need <= share:
                x = need
                residue.pop(q.name, None)
            else:
                x = math.floor(share / unit) * unit
                if share - x > 0:
                    residue[q.name] = share - x
            fs[q.name] += x
            rem -= x
            more = more or need < share
        if not more or rem <= 0:
            break
    return rem, residue


def allocatable_share(deserved: float, fair_share: float, limit: float) -> float:
    """KAI's allocatable share: the limit if quota is unlimited, else max(quota, FS) capped by the limit."""
    if deserved == UNLIMITED:
        return limit
    share = max(deserved, fair_share)
    return min(share, limit) if limit != UNLIMITED else share
