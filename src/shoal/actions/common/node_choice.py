"""Choosing a task's node: fit, node-local predicates and summed scores, with a per-session cache.

Every fit check, predicate and score is node-local (a node's answer changes only when that node
changes), so the answers for one kind of task (same requests and constraints) are cached per
session and only the rows of nodes whose state changed are recomputed. Placing a gang of
identical pods therefore costs one vectorised pass plus O(1) rows per pod.

A node's state is named by its `NodeState.token`, which a statement rollback gives back when it
restores the node exactly. Each kind of task also keeps the answers of every node state it has
seen by token, so after a victim scenario is simulated and rolled back (thousands of times in one
consolidation or reclaim at scale) the nodes it touched get their earlier answers back without
being recomputed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from shoal.framework.cycle_state import StateKey
from shoal.framework.fit import fit_and_available, fit_masks, nonzero_columns
from shoal.framework.jobs import Task
from shoal.framework.session import NodeScorer, Predicate, Session


@dataclass(slots=True)
class _Entry:
    #: The node tokens (`NodeState.token`) the rows below answer for.
    tokens: list[int]
    fits_idle: np.ndarray
    ok: np.ndarray
    score: np.ndarray
    #: `score` where `ok`, -inf elsewhere: the common case (no extra masks) is a single argmax.
    masked: np.ndarray
    #: AND of the predicates whose answer never changes with the node's load (see predicates).
    static_ok: np.ndarray
    #: The predicates / scorers that matter for this kind of task (the others answered None or a
    #: constant the first time, which depends on the task alone), so row refreshes skip them.
    predicates: list[Predicate]
    scorers: list[NodeScorer]
    constant_score: float
    #: False once every score adjuster answered None for this kind of task (see Hooks.score_adjusters).
    adjust: bool = True
    #: `len(NodeState.changes)` when `tokens` last matched the nodes' tokens on every row.
    seen: int = 0
    #: Node token -> (fits idle, ok, score) of every node state this kind of task was answered
    #: for (a row settled as full has ok False; its score is never read).
    memo: dict[int, tuple[bool, bool, float]] = field(default_factory=dict)


#: The memo's answer for a node too full for the task (`_drop_full`).
_FULL = (False, False, -np.inf)

#: Up to this many node bumps since an entry's last look are read from `NodeState.changes`.
_FEW_CHANGES = 64

#: Per session: task signature -> the cached answers for that kind of task.
_CACHE: StateKey[dict[tuple[object, ...], _Entry]] = StateKey("node choice cache")


def task_signature(task: Task) -> tuple[object, ...]:
    """Tasks with equal signatures get equal answers from every node-local check and score."""
    p = task.pod
    return (task.vec.tobytes(), p.gpu, p.is_cpu_only, p.legacy_mig, p.best_effort, p.nominated_node,
            tuple(sorted(p.node_selector.items())), p.node_affinity, tuple(p.tolerations), p.host_ports,
            p.spread, p.pod_affinity)


def _full(ssn: Session, task: Task) -> _Entry:
    fits_idle, ok, available = fit_and_available(ssn, task, None)
    preds: list[Predicate] = []
    static = ssn.hooks.static_predicates
    static_ok = np.ones(len(ssn.nodes), dtype=bool)
    for pred in ssn.hooks.predicates:
        res = pred(ssn, task, None)
        if res is not None:
            ok = ok & res[0]
            if pred in static:
                static_ok &= res[0]
            else:
                preds.append(pred)
    availability = ssn.hooks.availability_score
    score = available * availability if availability else np.zeros(len(ssn.nodes))
    scorers: list[NodeScorer] = []
    constant = 0.0
    for scorer in ssn.hooks.node_scorers:
        value = scorer(ssn, task, None)
        if isinstance(value, np.ndarray):
            scorers.append(scorer)
        else:
            constant += float(value)
        score = score + value
    masked = np.where(ok, score, -np.inf)
    tokens = list(ssn.nodes.token)
    memo = dict(zip(tokens, zip(fits_idle.tolist(), ok.tolist(), score.tolist(), strict=True), strict=True))
    return _Entry(tokens, fits_idle, ok, score, masked, static_ok, preds, scorers, constant,
                  seen=len(ssn.nodes.changes), memo=memo)


def _refresh(ssn: Session, task: Task, entry: _Entry, rows: np.ndarray) -> None:
    fits_idle, ok, available = fit_and_available(ssn, task, rows)
    ok = ok & entry.static_ok[rows]
    for pred in entry.predicates:
        res = pred(ssn, task, rows)
        if res is not None:
            ok = ok & res[0]
    score = available * ssn.hooks.availability_score + entry.constant_score
    for scorer in entry.scorers:
        score = score + scorer(ssn, task, rows)
    entry.fits_idle[rows] = fits_idle
    entry.ok[rows] = ok
    entry.score[rows] = score
    entry.masked[rows] = np.where(ok, score, -np.inf)
    token, had = ssn.nodes.token, entry.tokens
    tokens = []
    for i in rows.tolist():
        t = had[i] = token[i]
        tokens.append(t)
    entry.memo.update(zip(tokens, zip(np.broadcast_to(fits_idle, rows.shape).tolist(),
                                      np.broadcast_to(ok, rows.shape).tolist(),
                                      np.broadcast_to(score, rows.shape).tolist(), strict=True), strict=True))


def _entry(ssn: Session, task: Task) -> _Entry:
    cache = ssn.state.setdefault(_CACHE, dict)
    sig = task.signature
    if sig is None:
        sig = task.signature = task_signature(task)
    entry = cache.get(sig)
    if entry is None:
        entry = cache[sig] = _full(ssn, task)
        return entry
    # Every changed row is brought up to date below, so the rows to look at are the nodes bumped
    # since the last look (few while a gang is placed), else those whose tokens differ.
    nodes = ssn.nodes
    bumped = nodes.changed_since(entry.seen, _FEW_CHANGES)
    if bumped is None:
        bumped = [i for i, (t, had) in enumerate(zip(nodes.token, entry.tokens, strict=True)) if t != had]
    entry.seen = len(nodes.changes)
    if not bumped:
        return entry
    left = _from_memo(nodes.token, entry, bumped)
    if not left:
        return entry
    changed = _drop_full(ssn, task, entry, np.array(left, dtype=np.int64))
    if changed.size:
        _refresh(ssn, task, entry, changed)
    return entry


def _from_memo(token: list[int], entry: _Entry, rows: list[int]) -> list[int]:
    """Settle the rows whose node state is the one answered (a node changed and brought back)
    or was answered before (`_Entry.memo`); the rows left, ascending."""
    memo, had = entry.memo, entry.tokens
    left: list[int] = []
    for i in rows:
        t = token[i]
        if t == had[i]:
            continue
        got = memo.get(t)
        if got is None:
            left.append(i)
            continue
        fits_idle, ok, score = got
        entry.fits_idle[i] = fits_idle
        entry.ok[i] = ok
        entry.score[i] = score
        entry.masked[i] = score if ok else -np.inf
        had[i] = t
    return left


def _drop_full(ssn: Session, task: Task, entry: _Entry, rows: np.ndarray) -> np.ndarray:
    """Settle the changed rows where the task's requests exceed idle + releasing (the node was
    just filled): such a node fails `fit_masks` whatever else holds, so it is not ok and never a
    candidate - its stale score and idle fit are never read (only rows that are ok are). Returns
    the rows still to refresh."""
    if task.pod.best_effort:
        return rows
    nodes = ssn.nodes
    cols, need = nonzero_columns(ssn, task.vec)
    if rows.size == 1:  # the common case (the node a gang's last pod went to), in fewer steps
        i = int(rows[0])
        if not ((nodes.idle[i] + nodes.releasing[i])[cols] < need).any():
            return rows
        entry.ok[i] = False
        entry.masked[i] = -np.inf
        t = entry.tokens[i] = nodes.token[i]
        entry.memo[t] = _FULL
        return rows[:0]
    full = ((nodes.idle[rows][:, cols] + nodes.releasing[rows][:, cols]) < need).any(axis=1)
    if not full.any():
        return rows
    done = rows[full]
    entry.ok[done] = False
    entry.masked[done] = -np.inf
    token, had, memo = nodes.token, entry.tokens, entry.memo
    for i in done.tolist():
        t = had[i] = token[i]
        memo[t] = _FULL
    rest: np.ndarray = rows[~full]
    return rest


def dynamic_mask(ssn: Session, task: Task) -> np.ndarray | None:
    """AND of the pick-time (not node-local) filters that apply to `task`; None if none does."""
    mask: np.ndarray | None = None
    for flt in ssn.hooks.dynamic_filters:
        res = flt(ssn, task)
        if res is not None:
            mask = res[0] if mask is None else mask & res[0]
    return mask


def best_node(ssn: Session, task: Task, node_mask: np.ndarray | None,
              capacity_mask: np.ndarray | None) -> tuple[int, bool] | None:
    """(node index, fits idle now) of the best node for `task`, or None. Ties: lowest node name.

    The cached node-local answers are ANDed with the pick-time filters (`Hooks.dynamic_filters`)
    and the cached scores adjusted by `Hooks.score_adjusters`, if any. A cluster without nodes
    has no best node (None), like a cluster where no node fits."""
    if not len(ssn.nodes):
        return None
    entry = _entry(ssn, task)
    dyn = dynamic_mask(ssn, task)
    if dyn is not None:
        node_mask = dyn if node_mask is None else node_mask & dyn
    if ssn.hooks.score_adjusters and entry.adjust:
        return _adjusted_best(ssn, task, entry, node_mask, capacity_mask)
    if node_mask is None and capacity_mask is None:
        i = int(np.argmax(entry.masked))
        if not entry.ok[i]:
            return None
        return i, bool(entry.fits_idle[i])
    # `entry.masked` is the score where ok, -inf elsewhere: masking it again is the same array
    # as masking the score with ok & the masks, one step shorter.
    if node_mask is None:
        assert capacity_mask is not None
        allowed = capacity_mask
    else:
        allowed = node_mask if capacity_mask is None else node_mask & capacity_mask
    i = int(np.where(allowed, entry.masked, -np.inf).argmax())
    if not (entry.ok[i] and allowed[i]):
        return None
    return i, bool(entry.fits_idle[i])


def _adjusted_best(ssn: Session, task: Task, entry: _Entry, node_mask: np.ndarray | None,
                   capacity_mask: np.ndarray | None) -> tuple[int, bool] | None:
    """`best_node` with the cluster-wide adjusters applied to the candidates' cached scores (the
    cache itself is never changed: the adjustment is per task and per moment)."""
    cand = entry.ok
    if node_mask is not None:
        cand = cand & node_mask
    if capacity_mask is not None:
        cand = cand & capacity_mask
    rows = np.flatnonzero(cand)
    if not rows.size:
        return None
    scores = entry.score[rows]
    applied = False
    for adjust in ssn.hooks.score_adjusters:
        adjusted = adjust(ssn, task, rows, scores)
        if adjusted is not None:
            scores, applied = adjusted, True
    entry.adjust = applied
    i = int(rows[int(np.argmax(scores))])  # rows ascend: the first maximum is the lowest node
    return i, bool(entry.fits_idle[i])


def rejection_counts(ssn: Session, task: Task, node_mask: np.ndarray | None,
                     capacity_mask: np.ndarray | None, capacity_reason: str) -> Counter[str]:
    """Why nodes were rejected for `task`: reason -> number of nodes (first failing check wins)."""
    rejected: Counter[str] = Counter()
    alive = np.ones(len(ssn.nodes), dtype=bool)

    def drop(mask: np.ndarray, reason: str) -> None:
        nonlocal alive
        newly = alive & ~mask
        if newly.any():
            rejected[reason] += int(newly.sum())
            alive &= mask

    if node_mask is not None:
        drop(node_mask, "outside the allowed node set")
    _idle, free = fit_masks(ssn, task, None)
    if (alive & ~free).any():
        for reason, mask in _resource_shortfalls(ssn, task, alive & ~free):
            drop(mask, reason)
        drop(free, "insufficient resources")
    for pred in ssn.hooks.predicates:
        res = pred(ssn, task, None)
        if res is not None:
            drop(res[0], res[1])
    for flt in ssn.hooks.dynamic_filters:
        dyn = flt(ssn, task)
        if dyn is not None:
            drop(dyn[0], dyn[1])
    if capacity_mask is not None:
        drop(capacity_mask, capacity_reason)
    return rejected


def _resource_shortfalls(ssn: Session, task: Task, lacking: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Per resource the task asks for: the nodes that lack it (counting releasing resources)."""
    nodes = ssn.nodes
    free = nodes.idle + nodes.releasing
    out = []
    for col in np.flatnonzero(task.vec).tolist():
        need = int(task.vec[col])
        ok = free[:, col] >= need
        if (~ok & lacking).any():
            name = nodes.space.names[col]
            most = int(free[lacking, col].max())
            unit = 1000 if name in ("nvidia.com/gpu", "cpu") else (1024**3 if name == "memory" else 1)
            label = {"memory": "GiB"}.get(name, "")
            out.append((f"insufficient {name} (need {need / unit:g}{label}, at most "
                        f"{most / unit:g}{label} free)", ok))
    return out
