"""Inter-pod affinity and anti-affinity over all nodes at once, as kube-scheduler's
InterPodAffinity plugin decides and scores them (pkg/scheduler/framework/plugins/interpodaffinity).

Filter: the incoming pod's required affinity (every term's domain must hold a pod matching all
its terms, except for the first pod of a group that matches its own terms), its required
anti-affinity, and the required anti-affinity of the pods already placed. Score (raw, before
normalisation): the incoming pod's preferred terms against placed pods, and placed pods'
preferred terms and required affinity terms (weight 1) against the incoming pod.

Pods count where `Session.placed` says they are, so a gang's pods placed earlier in a statement
count for the next one. Not node-local: node choice applies these at pick time, never cached.
"""

from __future__ import annotations

import numpy as np

from shoal.framework.jobs import Task
from shoal.framework.podindex import PodIndex, pod_index
from shoal.framework.session import Session
from shoal.model.constraints import PodAffinityTerm


def _blocked_by_domains(idx: PodIndex, key: str, nodes: np.ndarray) -> np.ndarray:
    """Nodes sharing the `key` domain of any of `nodes` (nodes lacking the key never do)."""
    codes, n = idx.domains(key)
    present = np.zeros(n + 1, dtype=bool)
    present[codes[nodes]] = True  # code -1 lands on the spare last slot
    present[n] = False
    out: np.ndarray = present[codes]
    return out


def _required_affinity(idx: PodIndex, task: Task, terms: tuple[PodAffinityTerm, ...]) -> np.ndarray:
    me = task.ordinal
    match_all = np.ones(len(idx.ns_codes), dtype=bool)
    for t in terms:
        match_all &= idx.term_mask(t)
    n = len(idx.nodes.codes(terms[0].topology_key)[0])
    has_all = np.ones(n, dtype=bool)
    exist = np.ones(n, dtype=bool)
    any_pair = False
    for t in terms:
        counts = idx.domain_counts(match_all, t.topology_key, me)
        any_pair = any_pair or bool(counts.any())
        codes, _ = idx.domains(t.topology_key)
        has_all &= codes >= 0
        exist &= idx.per_node(counts, t.topology_key) > 0
    if not any_pair and all(idx.term_mask(t)[me] for t in terms):
        return has_all  # the first pod of a group matching its own terms may start anywhere
    return has_all & exist


def affinity_filter(ssn: Session, task: Task) -> tuple[np.ndarray, str] | None:
    """Mask of nodes the inter-pod constraints allow for `task`; None when none apply to it."""
    pa = task.pod.pod_affinity
    idx = pod_index(ssn)
    me = task.ordinal
    ok: np.ndarray | None = None
    reason = ""
    if pa is not None and pa.required:
        ok = _required_affinity(idx, task, pa.required)
        reason = "pod affinity not satisfied"
    if pa is not None and pa.required_anti:
        blocked = np.zeros(len(ssn.nodes), dtype=bool)
        for t in pa.required_anti:
            nodes = idx.placed_nodes(np.flatnonzero(idx.term_mask(t)), me)
            blocked |= _blocked_by_domains(idx, t.topology_key, nodes)
        ok = ~blocked if ok is None else ok & ~blocked
        reason = "pod affinity / anti-affinity not satisfied"
    if idx.required_anti:
        terms = list(idx.required_anti)
        row = idx.term_matrix("anti", terms)[me]
        if row.any():
            blocked = np.zeros(len(ssn.nodes), dtype=bool)
            for j in np.flatnonzero(row).tolist():
                t = terms[j]
                blocked |= _blocked_by_domains(idx, t.topology_key, idx.placed_nodes(idx.required_anti[t], me))
            if blocked.any():
                ok = ~blocked if ok is None else ok & ~blocked
                reason = reason or "existing pods' anti-affinity rules not satisfied"
    return None if ok is None else (ok, reason)


def affinity_raw_score(ssn: Session, task: Task) -> np.ndarray | None:
    """Per node: kube-scheduler's raw InterPodAffinity score; None when no term applies."""
    pa = task.pod.pod_affinity
    idx = pod_index(ssn)
    me = task.ordinal
    total: np.ndarray | None = None

    def add(counts: np.ndarray, key: str) -> None:
        nonlocal total
        per = idx.per_node(counts, key)
        total = per if total is None else total + per

    if pa is not None:
        for sign, weighted in ((1, pa.preferred), (-1, pa.preferred_anti)):
            for w, t in weighted:
                add(idx.domain_counts(idx.term_mask(t), t.topology_key, me, float(sign * w)), t.topology_key)
    if idx.symmetric:
        keys = list(idx.symmetric)
        row = idx.term_matrix("symmetric", [t for t, _ in keys])[me]
        for j in np.flatnonzero(row).tolist():
            t, w = keys[j]
            codes, n = idx.domains(t.topology_key)
            doms = codes[idx.placed_nodes(idx.symmetric[(t, w)], me)]
            add(np.bincount(doms[doms >= 0], minlength=n).astype(np.float64) * w, t.topology_key)
    return total


def normalise_affinity(raw: np.ndarray) -> np.ndarray:
    """InterPodAffinity.NormalizeScore over the candidates: 100 x (s - min) / (max - min), truncated."""
    if not raw.size:
        return raw.astype(np.int64)
    lo, hi = float(raw.min()), float(raw.max())
    if hi - lo <= 0:
        return np.zeros(raw.size, dtype=np.int64)
    return np.trunc(100.0 * ((raw - lo) / (hi - lo))).astype(np.int64)
