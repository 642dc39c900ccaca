"""``fragaware`` in the FGD replay: the core's fragmentation-aware score against the trace's
typical pods (the distribution FGD uses), with the runner's node order as the stable order.

Scores are the float score of :mod:`shoal.policy.fragaware` mapped monotonically onto
non-negative int64 (the runner's caches are int64, -1 = infeasible), so ``argmax`` with the
runner's first-maximum rule picks the best placement.
"""

from __future__ import annotations

import numpy as np

from shoal.experiments.fgd.cluster import Cluster, IntArray, PodKind
from shoal.experiments.fgd.policy_base import DeterministicPolicy, best_fit_device
from shoal.policy.fragaware import (
    CHURN_WEIGHTS,
    DEFAULT_WEIGHTS,
    FragAwareWeights,
    NodeStates,
    delta_to_score,
    gap_levels,
    growth,
    ss_growth,
)
from shoal.policy.fragmentation import FloatArray, TypicalPods
from shoal.sim.loaders.openb import MILLI_PER_GPU

_OFFSET = float(1 << 52)
_SCALE = 1e6  # score resolution: 1e-6 GPU of fragment


def to_int_scores(score: FloatArray) -> IntArray:
    """Monotone map of float scores (|score| < 1e9) onto non-negative int64."""
    return np.round(_OFFSET + score * _SCALE).astype(np.int64)


class FragAwarePolicy(DeterministicPolicy):
    """Fragmentation delta + best fit + stable node order (docs/fragaware.md).

    With ``weights.ss`` > 0 a cluster-wide Sum-of-Squares term is added at pick time (see
    :meth:`pick`): node scores stay per node (cached by the runner), the global term is
    recomputed from the whole cluster for every fractional pod. The departures replay only
    calls ``score``, so it never sees the term (the churn weights have ``ss`` 0 anyway).
    """

    name = "fragaware"

    def __init__(self, typical: TypicalPods, weights: FragAwareWeights = DEFAULT_WEIGHTS,
                 best_fit_device: bool = True, churn_weights: FragAwareWeights | None = CHURN_WEIGHTS) -> None:
        self._typical = typical
        self._weights = weights
        self._churn_weights = churn_weights
        # True: a 1-GPU pod takes the fullest GPU it fits (the core's device order, gpupack);
        # False: every fitting GPU is scored and the node keeps its best.
        self._best_fit_device = best_fit_device
        self._levels = gap_levels(typical)
        # The runner's per-kind cache only hands ``pick`` the feasible nodes: keep our own copy
        # of the node-local scores and devices (every node ``score`` saw, by kind).
        self._local: dict[PodKind, tuple[IntArray, IntArray]] = {}
        self.picks = weights.ss != 0.0

    def pick(self, cluster: Cluster, feasible: IntArray, kind: PodKind) -> tuple[int, int] | None:
        """Node-local score minus ``weights.ss`` x the Sum-of-Squares growth (:func:`ss_growth`)
        that placing the pod on the node's chosen device causes. First maximum wins (the tie
        rule)."""
        scores, devices = self._local[kind]
        local = (scores[feasible] - _OFFSET) / _SCALE
        if kind.fractional and self._weights.ss:
            before = cluster.free[feasible, devices[feasible]]
            local = local - self._weights.ss * ss_growth(cluster.free, before, before - kind.gpu_milli, self._levels)
        best = int(np.argmax(local))
        return int(feasible[best]), int(devices[feasible[best]])

    def on_departure(self) -> bool:
        """A pod left: from now on score with the churn weights (docs/fragaware.md, "With
        departures"). True when the weights changed, i.e. every cached node score is stale."""
        if self._churn_weights is None or self._weights == self._churn_weights:
            return False
        self._weights = self._churn_weights
        self.picks = self.picks and self._weights.ss != 0.0  # the local store only exists if it was on
        return True

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        free = cluster.free[idx]
        cpu = cluster.cpu_left[idx]
        if kind.num_gpu == 1 and self._best_fit_device:
            node_i = np.arange(len(idx), dtype=np.int64)
            dev_i = best_fit_device(cluster, idx, kind)
        elif kind.num_gpu == 1:
            node_i, dev_i = _fractional_candidates(free, kind.gpu_milli)
        else:
            node_i = np.arange(len(idx), dtype=np.int64)
            dev_i = np.full(len(idx), -1, dtype=np.int64)
        after = free[node_i].copy()
        if kind.num_gpu == 1:
            after[np.arange(len(node_i)), dev_i] -= kind.gpu_milli
        elif kind.num_gpu > 1:
            whole = after == MILLI_PER_GPU
            after = np.where(whole & (np.cumsum(whole, axis=1) <= kind.num_gpu), 0, after)
        model = cluster.model[idx][node_i]
        count = cluster.gpu_count[idx][node_i]
        cpu_b = cpu[node_i]
        before_s = NodeStates(free[node_i], cpu_b, model, count)
        after_s = NodeStates(after, cpu_b - kind.cpu_score, model, count)
        rank = idx[node_i] / float(len(cluster))
        delta = growth(before_s, after_s, self._typical, self._weights)
        cand = to_int_scores(delta_to_score(delta, before_s, after_s, rank, self._weights))
        if len(node_i) == len(idx):  # one candidate per node (node_i = 0..n-1): nothing to group
            best, dev = cand, dev_i
        else:
            best, dev = _best_per_node(len(idx), node_i, dev_i, cand)
        if self.picks:
            store = self._local.get(kind)
            if store is None:
                n = len(cluster)
                store = self._local[kind] = (np.full(n, -1, np.int64), np.full(n, -1, np.int64))
            store[0][idx], store[1][idx] = best, dev
        return best, dev


def _fractional_candidates(free: IntArray, milli: int) -> tuple[IntArray, IntArray]:
    """(node, device) pairs a 1-GPU pod could take; a device whose free milli equals a lower-index
    device's gives the same state, so only the lowest such device is kept."""
    fits = free >= milli
    lower = np.tri(free.shape[1], k=-1, dtype=bool).T  # lower[j, d] = j < d
    repeated = ((free[:, :, None] == free[:, None, :]) & lower[None]).any(axis=1)
    node_i, dev_i = np.nonzero(fits & ~repeated)
    return node_i.astype(np.int64), dev_i.astype(np.int64)


def _best_per_node(n: int, node_i: IntArray, dev_i: IntArray, cand: IntArray) -> tuple[IntArray, IntArray]:
    """Per node: the best candidate score and its device (lowest index on ties)."""
    best = np.full(n, -1, dtype=np.int64)
    np.maximum.at(best, node_i, cand)
    reach = np.flatnonzero(cand == best[node_i])
    _, first = np.unique(node_i[reach], return_index=True)
    dev = np.full(n, -1, dtype=np.int64)
    dev[node_i[reach[first]]] = dev_i[reach[first]]
    return best, dev
