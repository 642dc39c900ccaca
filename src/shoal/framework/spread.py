"""Topology spread constraints over all nodes at once, as kube-scheduler's PodTopologySpread
decides (DoNotSchedule) and scores (ScheduleAnyway) them (plugins/podtopologyspread).

A constraint counts the pods of the incoming pod's namespace matching its selector (an empty
selector counts none, a kube-scheduler quirk kept for parity), not Releasing, on the nodes that
carry every topology key of the pod's constraints of the same kind and pass the constraint's node
inclusion policies (required node affinity: honoured by default; taints: ignored by default).
Filter: a node without the key is out; otherwise count(domain) + self - min(domains) <= maxSkew,
where min is 0 while fewer than `minDomains` domains exist. Not node-local: applied at pick time.
"""

from __future__ import annotations

import math

import numpy as np

from shoal.framework.jobs import Task
from shoal.framework.nodefilters import node_index
from shoal.framework.podindex import PodIndex, pod_index
from shoal.framework.session import Session
from shoal.model.constraints import SpreadConstraint
from shoal.model.pod import Pod

HOSTNAME = "kubernetes.io/hostname"
_NONE = 1 << 40


def _has_all_keys(idx: PodIndex, constraints: list[SpreadConstraint]) -> np.ndarray:
    ok: np.ndarray | None = None
    for c in constraints:
        has = idx.domains(c.topology_key)[0] >= 0
        ok = has if ok is None else ok & has
    assert ok is not None
    return ok


def _eligible(ssn: Session, pod: Pod, c: SpreadConstraint, has_all: np.ndarray) -> np.ndarray:
    nidx = node_index(ssn)
    ok = has_all
    if c.honor_node_affinity:
        ok = ok & nidx.required(pod)
    if c.honor_node_taints:
        ok = ok & ~nidx.untolerated(pod.tolerations)
    return ok


def _matched(ssn: Session, idx: PodIndex, task: Task, c: SpreadConstraint) -> np.ndarray:
    """Tasks counted by the constraint: same namespace, selector match, not Releasing."""
    if c.selector is None or not c.selector.requirements:
        return np.zeros(len(idx.ns_codes), dtype=bool)
    same_ns = idx.ns_codes == idx.ns_codes[task.ordinal]
    out: np.ndarray = idx.pods.selector(c.selector) & same_ns & ~ssn.releasing
    return out


def _counts(ssn: Session, idx: PodIndex, task: Task, c: SpreadConstraint, eligible: np.ndarray) -> np.ndarray:
    codes, n = idx.domains(c.topology_key)
    nodes = idx.placed_nodes(np.flatnonzero(_matched(ssn, idx, task, c)), task.ordinal)
    nodes = nodes[eligible[nodes]]
    doms = codes[nodes]
    return np.bincount(doms[doms >= 0], minlength=n)


def spread_filter(ssn: Session, task: Task) -> tuple[np.ndarray, str] | None:
    """Nodes the pod's DoNotSchedule constraints allow; None when it has none."""
    hard = [c for c in task.pod.spread if c.hard]
    if not hard:
        return None
    idx = pod_index(ssn)
    has_all = _has_all_keys(idx, hard)
    ok = has_all.copy()
    for c in hard:
        codes, n = idx.domains(c.topology_key)
        eligible = _eligible(ssn, task.pod, c, has_all)
        counts = _counts(ssn, idx, task, c, eligible)
        present = np.zeros(n + 1, dtype=bool)
        present[codes[eligible]] = True
        present = present[:n]
        if int(present.sum()) < c.min_domains:
            low = 0
        else:
            low = int(counts[present].min()) if present.any() else _NONE
        self_match = int(c.selector is not None and c.selector.matches(task.pod.labels))
        per_node = np.where(codes >= 0, counts[np.maximum(codes, 0)] if n else 0, 0)
        ok &= (codes >= 0) & (per_node + self_match - low <= c.max_skew)
    return ok, "pod topology spread constraints not satisfied"


def spread_score(ssn: Session, task: Task, rows: np.ndarray) -> np.ndarray | None:
    """kube-scheduler's normalised PodTopologySpread score (0..100) of the candidate `rows`;
    None when the pod has no ScheduleAnyway constraint."""
    soft = [c for c in task.pod.spread if not c.hard]
    if not soft:
        return None
    idx = pod_index(ssn)
    has_all = _has_all_keys(idx, soft)
    ignored = ~has_all[rows]
    live = rows[~ignored]
    score = np.zeros(len(rows), dtype=np.float64)
    for c in soft:
        codes, n = idx.domains(c.topology_key)
        if c.topology_key == HOSTNAME:
            weight = math.log(len(live) + 2)
            counts = _counts(ssn, idx, task, c, np.ones(len(has_all), dtype=bool))
        else:
            values = np.unique(codes[live])
            weight = math.log(len(values) + 2)
            counts = _counts(ssn, idx, task, c, _eligible(ssn, task.pod, c, has_all))
        cnt = np.where(codes[rows] >= 0, counts[np.maximum(codes[rows], 0)] if n else 0, 0)
        score = score + (cnt * weight + float(c.max_skew - 1))
    raw = np.floor(score + 0.5).astype(np.int64)  # Go's math.Round, for non-negative scores
    out = np.zeros(len(rows), dtype=np.int64)
    if not live.size:
        return out
    kept = raw[~ignored]
    hi, lo = int(kept.max()), int(kept.min())
    hi = max(hi, 0)
    if hi == 0:
        out[~ignored] = 100
    else:
        out[~ignored] = 100 * (hi + lo - kept) // hi
    return out
