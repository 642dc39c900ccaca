"""The FGD policy: place where the node's GPU fragmentation grows least (ATC'23, §3.2 of the notes).

score = floor(100 * sigmoid((F_n - F_n') / 1000)), F from :mod:`shoal.policy.fragmentation`,
F_n' after a hypothetical placement (CPU reduced by the non-zero request). A fractional 1-GPU pod
tries every fitting GPU; the node scores the best of those integer scores and uses the lowest-index
GPU reaching it. Whole-GPU pods use the lowest-index completely free GPUs. CPU-only pods are
scored too (only CPU changes).
"""

from __future__ import annotations

import numpy as np

from shoal.policy.fragmentation import FloatArray, TypicalPods, fgd_score, node_fragment
from shoal.sim.fgd.cluster import Cluster, IntArray, PodKind
from shoal.sim.fgd.policies import _DeterministicPolicy
from shoal.sim.openb import MILLI_PER_GPU

_DEDUP_FROM = 200  # batch size from which deduplicating node states pays off


class FgdPolicy(_DeterministicPolicy):
    """Fragmentation Gradient Descent against the workload's typical pods."""

    name = "fgd"

    def __init__(self, typical: TypicalPods) -> None:
        self._typical = typical

    def _frag(self, free: IntArray, cpu_left: IntArray, model: IntArray) -> FloatArray:
        if len(free) < _DEDUP_FROM:
            return node_fragment(free, cpu_left, model, self._typical)
        # Large batches (a pod kind's first appearance) repeat few distinct node states.
        states = np.column_stack([model, cpu_left, free])
        uniq, inverse = np.unique(states, axis=0, return_inverse=True)
        frag = node_fragment(uniq[:, 2:], uniq[:, 1], uniq[:, 0], self._typical)
        out: FloatArray = frag[inverse.reshape(-1)]
        return out

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        free = cluster.free[idx]
        cpu = cluster.cpu_left[idx]
        model = cluster.model[idx]
        cpu_after = cpu - kind.cpu_score
        if kind.fractional:
            return self._score_fractional(free, cpu, cpu_after, model, kind)
        if kind.num_gpu == 0:
            after = free
            dev = np.full(len(idx), -1, dtype=np.int64)
        else:
            whole = free == MILLI_PER_GPU
            take = whole & (np.cumsum(whole, axis=1) <= kind.num_gpu)
            after = np.where(take, 0, free)
            dev = np.argmax(whole, axis=1).astype(np.int64)  # lowest completely free GPU
        frag = self._frag(
            np.concatenate([free, after]), np.concatenate([cpu, cpu_after]), np.concatenate([model, model])
        )
        n = len(idx)
        return fgd_score(frag[:n], frag[n:]), dev

    def _score_fractional(
        self, free: IntArray, cpu: IntArray, cpu_after: IntArray, model: IntArray, kind: PodKind
    ) -> tuple[IntArray, IntArray]:
        # Candidates grouped by node, by device. A device whose free milli equals a lower-index
        # device's gives the same multiset after placement, hence the same score: skip it (the
        # chosen GPU is the lowest index reaching the best score either way).
        fits = free >= kind.gpu_milli
        lower = np.tri(free.shape[1], k=-1, dtype=bool).T  # lower[j, d] = j < d
        repeated = ((free[:, :, None] == free[:, None, :]) & lower[None]).any(axis=1)
        node_i, dev_i = np.nonzero(fits & ~repeated)
        after = free[node_i]
        after[np.arange(len(node_i)), dev_i] -= kind.gpu_milli
        n = len(free)
        frag = self._frag(
            np.concatenate([free, after]),
            np.concatenate([cpu, cpu_after[node_i]]),
            np.concatenate([model, model[node_i]]),
        )
        cand = fgd_score(frag[:n][node_i], frag[n:])
        # Every feasible node has at least one candidate and candidates come grouped by node.
        starts = np.flatnonzero(np.diff(node_i, prepend=-1))
        best: IntArray = np.maximum.reduceat(cand, starts)
        reach = np.flatnonzero(cand == best[node_i])
        first = reach[np.diff(node_i[reach], prepend=-1) != 0]  # lowest device reaching the best
        dev = np.full(n, -1, dtype=np.int64)
        dev[node_i[first]] = dev_i[first]
        return best, dev
