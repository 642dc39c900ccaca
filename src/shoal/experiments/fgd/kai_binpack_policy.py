"""``kai-binpack`` in the FGD replay: KAI's default placement (kai-spec §3.9) on the openb cluster.

KAI sums node scores: ``gpusharingorder`` (+1000 for a shared pod on a node with a partly used
GPU it fits), ``nodeplacement`` binpack (fewest free *whole* GPUs first for GPU pods, least free
CPU for CPU-only pods), ties by node name; the device is chosen by ``gpupack`` (the fitting
partly used GPU that is fullest, a whole free GPU last). Node names carry the run's random
prefix, so the runner's node order is the name order. Integer scores; the runner's first-maximum
rule is the name tie-break.
"""

from __future__ import annotations

import numpy as np

from shoal.experiments.fgd.cluster import Cluster, IntArray, PodKind
from shoal.experiments.fgd.policy_base import DeterministicPolicy, best_fit_device
from shoal.sim.loaders.openb import MAX_GPUS_PER_NODE, MILLI_PER_GPU

_SHARING_BONUS = 1000  # above every binpack difference (at most MAX_GPUS_PER_NODE)
_CPU_CEILING = 1 << 40


class KaiBinpackPolicy(DeterministicPolicy):
    """KAI's gpusharingorder + nodeplacement binpack + gpupack."""

    name = "kai-binpack"

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        dev = best_fit_device(cluster, idx, kind)  # least free fitting GPU = gpupack's order
        if kind.num_gpu == 0:
            return (_CPU_CEILING - cluster.cpu_left[idx]).astype(np.int64), dev
        free = cluster.free[idx]
        whole_free = (free == MILLI_PER_GPU).sum(axis=1)
        score = MAX_GPUS_PER_NODE - whole_free
        if kind.fractional:
            shared_fit = ((free >= kind.gpu_milli) & (free < MILLI_PER_GPU)).any(axis=1)
            score = score + _SHARING_BONUS * shared_fit
        return score.astype(np.int64), dev
