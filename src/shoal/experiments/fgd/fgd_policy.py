"""The FGD policy: place where the node's GPU fragmentation grows least (ATC'23, §3.2 of the notes).

score = floor(100 * sigmoid((F_n - F_n') / 1000)), F from :mod:`shoal.policy.fragmentation`,
F_n' after a hypothetical placement (CPU reduced by the non-zero request). A fractional 1-GPU pod
tries every fitting GPU; the node scores the best of those integer scores and uses the lowest-index
GPU reaching it. Whole-GPU pods use the lowest-index completely free GPUs. CPU-only pods are
scored too (only CPU changes).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from shoal.experiments.fgd.cluster import Cluster, IntArray, PodKind
from shoal.experiments.fgd.fragment_memo import FragmentMemo, distinct_states
from shoal.experiments.fgd.policy_base import DeterministicPolicy
from shoal.policy.fragmentation import FloatArray, TypicalPods, fgd_score
from shoal.sim.loaders.openb import MAX_GPUS_PER_NODE, MILLI_PER_GPU

_DEDUP_FROM = 64  # batch size from which scoring distinct node states only pays off
_LOWER_INDEX = np.tri(MAX_GPUS_PER_NODE, k=-1, dtype=bool).T[None]  # [1, j, d]: j < d


class FgdPolicy(DeterministicPolicy):
    """Fragmentation Gradient Descent against the workload's typical pods."""

    name = "fgd"

    def __init__(self, typical: TypicalPods) -> None:
        self._typical = typical
        self._memo = FragmentMemo(typical)

    def _frag(self, free: IntArray, cpu_left: IntArray, model: IntArray) -> FloatArray:
        return self._memo.fragment(free, cpu_left, model)

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        free = cluster.free[idx]
        cpu = cluster.cpu_left[idx]
        model = cluster.model[idx]
        if len(idx) < _DEDUP_FROM:
            return self._score_states(free, cpu, model, kind)
        # A kind's first batch holds every node, mostly in a few identical states: score each
        # exact (model, CPU, free row) once; score and device are functions of that state.
        reps, inverse = distinct_states(free, cpu, model)
        scores, dev = self._score_states(free[reps], cpu[reps], model[reps], kind)
        return scores[inverse], dev[inverse]

    def _score_states(
        self, free: IntArray, cpu: IntArray, model: IntArray, kind: PodKind
    ) -> tuple[IntArray, IntArray]:
        cpu_after = cpu - kind.cpu_score
        if kind.fractional:
            return self._score_fractional(free, cpu, cpu_after, model, kind)
        if kind.num_gpu == 0:
            after = free
            dev = np.full(len(free), -1, dtype=np.int64)
        else:
            whole = free == MILLI_PER_GPU
            take = whole & (np.cumsum(whole, axis=1) <= kind.num_gpu)
            after = np.where(take, 0, free)
            dev = np.argmax(whole, axis=1).astype(np.int64)  # lowest completely free GPU
        frag = self._frag(
            np.concatenate([free, after]), np.concatenate([cpu, cpu_after]), np.concatenate([model, model])
        )
        n = len(free)
        return fgd_score(frag[:n], frag[n:]), dev

    def _score_fractional(
        self, free: IntArray, cpu: IntArray, cpu_after: IntArray, model: IntArray, kind: PodKind
    ) -> tuple[IntArray, IntArray]:
        # Candidates grouped by node, by device. A device whose free milli equals a lower-index
        # device's gives the same multiset after placement, hence the same score: skip it (the
        # chosen GPU is the lowest index reaching the best score either way).
        fits = free >= kind.gpu_milli
        repeated = ((free[:, :, None] == free[:, None, :]) & _LOWER_INDEX).any(axis=1)
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
        if n == 1:  # the common case (one node changed since the kind's last pod): no grouping
            k = int(np.argmax(cand))  # first maximum = lowest device reaching the best
            return cand[k : k + 1], dev_i[k : k + 1]
        # Every feasible node has at least one candidate and candidates come grouped by node.
        starts = np.flatnonzero(_group_starts(node_i))
        best: IntArray = np.maximum.reduceat(cand, starts)
        reach = np.flatnonzero(cand == best[node_i])
        first = reach[_group_starts(node_i[reach])]  # lowest device reaching the best
        dev = np.full(n, -1, dtype=np.int64)
        dev[node_i[first]] = dev_i[first]
        return best, dev


def _group_starts(sorted_ids: IntArray) -> npt.NDArray[np.bool_]:
    """True where a run of equal ids starts (``np.diff(prepend=...) != 0`` without its overhead)."""
    starts = np.ones(len(sorted_ids), dtype=bool)
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=starts[1:])
    return starts
