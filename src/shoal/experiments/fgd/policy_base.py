"""What a placement policy of the FGD replay is (:class:`Policy`) and the helpers policies share.

Every policy module imports this one and never :mod:`policies` (the registry), which imports
them all: no import circle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from shoal.experiments.fgd.cluster import Cluster, IntArray, PodKind
from shoal.experiments.fgd.streams import RandomStream
from shoal.policy.fragmentation import TypicalPods

_BIG = 1 << 40


class Policy(Protocol):
    """A placement policy. ``score`` never mutates the cluster."""

    name: str
    picks: bool  # True: ``pick`` chooses the node; False: best score, first in priority order

    def score(self, cluster: Cluster, idx: IntArray, kind: PodKind) -> tuple[IntArray, IntArray]:
        """(scores, device) for the feasible nodes ``idx``; device = GPU of a 1-GPU pod, else -1."""
        ...

    def pick(self, cluster: Cluster, feasible: IntArray, kind: PodKind) -> tuple[int, int] | None:
        """(node, device) chosen directly, or None to take the best score (with the tie rule)."""
        ...


PolicyFactory = Callable[[TypicalPods, RandomStream], Policy]


def best_fit_device(cluster: Cluster, idx: IntArray, kind: PodKind) -> IntArray:
    """For 1-GPU pods: the fitting GPU with the least free milli (lowest index on ties); else -1."""
    if kind.num_gpu != 1:
        return np.full(len(idx), -1, dtype=np.int64)
    free = cluster.free[idx]
    device: IntArray = np.argmin(np.where(free >= kind.gpu_milli, free, _BIG), axis=1).astype(np.int64)
    return device


class DeterministicPolicy:
    """Shared ``pick``: deterministic policies always take the best score."""

    name = ""
    picks = False

    def pick(self, cluster: Cluster, feasible: IntArray, kind: PodKind) -> tuple[int, int] | None:
        return None
