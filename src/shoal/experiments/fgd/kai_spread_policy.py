"""``kai-spread`` in the FGD replay: KAI's spread placement (kai-spec §3.9, §3.11) on the openb cluster.

KAI's operator turns ``placementStrategy: spread`` into ``nodeplacement{gpu: spread, cpu: spread}``
plus ``gpuspread`` in place of ``gpupack`` *and* ``gpusharingorder`` (kai-spec §9.1: "gpupack +
gpusharingorder iff GPU binpack, else gpuspread"), so no node bonus for a partly used GPU:

* node: the core's ``nodeplacement`` spread term, ``free whole GPUs / GPU count`` for GPU pods
  (shared devices are not free) and ``free CPU / allocatable CPU`` for CPU-only pods, emptiest
  node first, ties by node name (the runner's first maximum);
* device: ``gpuspread`` orders a whole free GPU first (score 1), then the fitting shared GPU with
  the least used (score ``1 - used/M``); equal scores keep the lowest index.

The scores are the core's float quotients (``shoal.plugins.scoring.open_nodeplacement``); their
IEEE-754 bit patterns, read as int64, order exactly as the floats do for non-negative values, so
the runner's integer argmax ranks nodes as the core would, with no rounding that could merge two
different quotients.

``kai-spread-sharing`` keeps ``gpusharingorder`` next to spread, which KAI's operator never
generates (see :class:`KaiSpreadPolicy`).
"""

from __future__ import annotations

import numpy as np

from shoal.experiments.fgd.cluster import Cluster, IntArray, PodKind
from shoal.experiments.fgd.policy_base import DeterministicPolicy
from shoal.sim.loaders.openb import MILLI_PER_GPU

_SHARING_BONUS = 1000.0  # gpusharingorder (kai-spec §3.9)


def ordered_bits(values: np.ndarray) -> IntArray:
    """Order-preserving int64 keys of non-negative float64 values (their bit patterns)."""
    as_float = np.ascontiguousarray(values, dtype=np.float64)
    if as_float.size and float(as_float.min()) < 0.0:
        raise ValueError("ordered_bits: negative score")
    keys: IntArray = (as_float + 0.0).view(np.int64)  # + 0.0 turns -0.0 into 0.0
    return keys


def spread_device(cluster: Cluster, idx: IntArray, kind: PodKind) -> IntArray:
    """For 1-GPU pods: a whole free GPU, else the fitting GPU with the most free milli; lowest
    index on ties (``gpuspread``). -1 for other pods."""
    if kind.num_gpu != 1:
        return np.full(len(idx), -1, dtype=np.int64)
    free = cluster.free[idx]
    device: IntArray = np.argmax(np.where(free >= kind.gpu_milli, free, -1), axis=1).astype(np.int64)
    return device


class KaiSpreadPolicy(DeterministicPolicy):
    """KAI's nodeplacement spread + gpuspread; ``sharing_bonus`` adds gpusharingorder back.

    Without the bonus this is KAI's operator under ``placementStrategy: spread`` (and what
    ``shoal.sim.schedconf`` builds for it). With it, gpusharingorder is kept next to spread: +1000
    for a shared pod on a node with a partly used GPU it fits, far above every spread share (<= 1).
    """

    name = "kai-spread"

    def __init__(self, sharing_bonus: bool = False) -> None:
        self._sharing_bonus = sharing_bonus
        if sharing_bonus:
            self.name = "kai-spread-sharing"

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        dev = spread_device(cluster, idx, kind)
        if kind.num_gpu == 0:
            total = cluster.cpu_total[idx].astype(np.float64)
            share = np.where(total > 0, cluster.cpu_left[idx] / np.where(total > 0, total, 1.0), 0.0)
            return ordered_bits(share), dev
        free = cluster.free[idx]
        count = cluster.gpu_count[idx].astype(np.float64)
        whole_free = (free == MILLI_PER_GPU).sum(axis=1)
        share = np.where(count > 0, whole_free / np.where(count > 0, count, 1.0), 0.0)
        if self._sharing_bonus and kind.fractional:
            shared_fit = ((free >= kind.gpu_milli) & (free < MILLI_PER_GPU)).any(axis=1)
            share = share + _SHARING_BONUS * shared_fit  # shares k/count (count <= 8) stay distinct
        return ordered_bits(share), dev
