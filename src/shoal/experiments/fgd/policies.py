"""The FGD paper's baseline placement policies and the policy registry (extension point).

Each policy is a :class:`Policy`: ``score`` gives integer node scores (0..100, higher wins) and,
for 1-GPU pods, the GPU it would use, for a batch of *feasible* nodes. A node's score must depend
only on that node's state and the pod kind (the runner caches scores per pod kind and recomputes
only nodes whose state changed). The runner applies the tie rule (first node in priority order).
A policy that picks at random instead implements ``pick``. Formulas: reference/traces.md §3.2.

To add a policy (like the core's ``kai-binpack`` / ``kai-spread`` or ``fragaware``), write a class
following :class:`~shoal.experiments.fgd.policy_base.Policy` in its own module (importing only
``policy_base``, never this module) and add a factory to :func:`policy_registry`'s dict.
"""

from __future__ import annotations

import numpy as np

from shoal.experiments.fgd.cluster import Cluster, IntArray, PodKind
from shoal.experiments.fgd.fgd_policy import FgdPolicy
from shoal.experiments.fgd.fragaware_policy import FragAwarePolicy
from shoal.experiments.fgd.kai_binpack_policy import KaiBinpackPolicy
from shoal.experiments.fgd.kai_spread_policy import KaiSpreadPolicy
from shoal.experiments.fgd.policy_base import DeterministicPolicy, Policy, PolicyFactory, best_fit_device
from shoal.experiments.fgd.streams import RandomStream
from shoal.sim.loaders.openb import MAX_GPUS_PER_NODE, MILLI_PER_GPU

__all__ = ["PAPER_POLICIES", "PUBLISHED_NAMES", "Policy", "PolicyFactory", "policy_registry"]

# Normalisers of the authors' "-norm max": the largest node has 128 vCPU and 8 GPUs.
MAX_NODE_CPU = 128000.0
MAX_NODE_GPU_MILLI = 8000.0


class RandomPolicy:
    """``Random``: a uniformly drawn feasible node, a uniformly drawn fitting GPU.

    Matches the authors only in distribution: their feasible list comes from a parallel filter
    whose order is nondeterministic.
    """

    name = "random"
    picks = True

    def __init__(self, rng: RandomStream) -> None:
        self._rng = rng

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        return np.zeros(len(idx), dtype=np.int64), np.full(len(idx), -1, dtype=np.int64)

    def pick(self, cluster: Cluster, feasible: IntArray, kind: PodKind) -> tuple[int, int] | None:
        node = int(feasible[self._rng.intn(len(feasible))])
        if kind.num_gpu != 1:
            return node, -1
        fitting = np.flatnonzero(cluster.free[node] >= kind.gpu_milli)
        return node, int(fitting[self._rng.intn(len(fitting))])


class DotProdPolicy(DeterministicPolicy):
    """``DotProd``: prefer nodes whose leftover (CPU, GPU) is least aligned with the request."""

    name = "dotprod"

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        cpu_left = cluster.cpu_left[idx]
        dot = (cpu_left / MAX_NODE_CPU) * (kind.cpu_score / MAX_NODE_CPU) + (
            cluster.gpu_left[idx] / MAX_NODE_GPU_MILLI
        ) * (kind.gpu_request / MAX_NODE_GPU_MILLI)
        score = (100.0 * (1.0 - dot / 2.0)).astype(np.int64)
        score = np.where(cpu_left < kind.cpu_score, 0, score)
        return score, best_fit_device(cluster, idx, kind)


class BestFitPolicy(DeterministicPolicy):
    """``BestFit``: least (CPU, GPU) left after placement, equally weighted.

    The authors' min-max normalisation of the scores is monotone and never changes the winner.
    """

    name = "bestfit"

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        cpu_after = (cluster.cpu_left[idx] - kind.cpu_score) / MAX_NODE_CPU * 0.5
        gpu_after = (cluster.gpu_left[idx] - kind.gpu_request) / MAX_NODE_GPU_MILLI * 0.5
        score = (100.0 * (1.0 - (cpu_after + gpu_after))).astype(np.int64)
        return score, best_fit_device(cluster, idx, kind)


class ClusteringPolicy(DeterministicPolicy):
    """``GpuClustering``: co-locate GPU pods of the same tag (share / n-GPU); CPU pods score 0."""

    name = "clustering"

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        dev = best_fit_device(cluster, idx, kind)
        if kind.num_gpu == 0:
            return np.zeros(len(idx), dtype=np.int64), dev
        base = (25 * (8000 - cluster.gpu_left[idx])) // 8000
        tags = cluster.tags[idx]
        bit = 1 << kind.tag
        bonus = np.where(tags == bit, 75, np.where(tags & bit != 0, 50, np.where(tags == 0, 25, 0)))
        return (base + bonus).astype(np.int64), dev


class PackingPolicy(DeterministicPolicy):
    """``GpuPacking``: prefer partly used GPUs, then partly used nodes, then empty nodes."""

    name = "packing"

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        dev = best_fit_device(cluster, idx, kind)
        if kind.num_gpu == 0:
            return np.zeros(len(idx), dtype=np.int64), dev
        free = cluster.free[idx]
        count = cluster.gpu_count[idx]
        order = np.argsort(free, axis=1, kind="stable")  # ascending free, stable by index
        sorted_free = np.take_along_axis(free, order, axis=1)
        fits = sorted_free >= kind.gpu_milli
        used = fits & (np.cumsum(fits, axis=1) <= kind.num_gpu)
        full_used = (used & (sorted_free == MILLI_PER_GPU)).sum(axis=1)
        pct_used = np.where(used, sorted_free * 100 // MILLI_PER_GPU, 0).sum(axis=1)
        score = np.where(
            full_used > 0,
            np.maximum(50 - full_used, 33),
            np.maximum(100 - pct_used // 10, 50),
        )
        all_free = cluster.gpu_left[idx] == count * MILLI_PER_GPU
        score = np.where(all_free, np.maximum(33 - count, count), score)
        return score.astype(np.int64), dev


def policy_registry() -> dict[str, PolicyFactory]:
    """Policy name -> factory(typical pods, the run's random stream). Built fresh per call."""
    return {
        "random": lambda typical, rng: RandomPolicy(rng),
        "dotprod": lambda typical, rng: DotProdPolicy(),
        "clustering": lambda typical, rng: ClusteringPolicy(),
        "packing": lambda typical, rng: PackingPolicy(),
        "bestfit": lambda typical, rng: BestFitPolicy(),
        "fgd": lambda typical, rng: FgdPolicy(typical),
        "kai-binpack": lambda typical, rng: KaiBinpackPolicy(),
        "kai-spread": lambda typical, rng: KaiSpreadPolicy(),
        "kai-spread-sharing": lambda typical, rng: KaiSpreadPolicy(sharing_bonus=True),
        "fragaware": lambda typical, rng: FragAwarePolicy(typical),
    }


PAPER_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")
# Names used in the authors' result tables.
PUBLISHED_NAMES = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}
assert MAX_GPUS_PER_NODE == 8  # the 8000 milli normaliser above assumes 8-GPU nodes at most
