"""Memoised node fragments for the FGD replay: each distinct node state is measured once per run.

``node_fragment`` of a node depends only on (a) its GPU model, (b) which typical pods its CPU left
covers (``cpu_milli[m] <= cpu_left``) and (c) the *multiset* of its devices' free milli (the
per-device terms are integer sums, so device order cannot change a bit). A run revisits the same
states constantly: a node's state after a placement was already scored as that placement's
hypothetical "after" state, and identical nodes start identical. So states are reduced to that
canonical key and ``node_fragment`` runs only on keys never seen before. Every value is computed
by ``node_fragment`` itself on a real state with that key, whose result does not depend on the
other rows of the batch (it reduces per node, in typical-pod order), so the values are the very
floats an unmemoised run computes.
"""

from __future__ import annotations

import numpy as np

from shoal.policy.fragmentation import FloatArray, IntArray, TypicalPods, node_fragment
from shoal.sim.loaders.openb import MAX_GPUS_PER_NODE, MILLI_PER_GPU

Key = tuple[int, tuple[int, ...]]
_FREE_BITS = 11  # free milli of a device is 0..1000 < 2**11
_CPU_BITS = 20  # CPU left (milli) < 2**20; the largest openb node has 128000
_MODEL_BITS = 64 - 1 - _CPU_BITS - 3 * _FREE_BITS
assert MILLI_PER_GPU < 1 << _FREE_BITS and MAX_GPUS_PER_NODE == 8


def distinct_states(free: IntArray, cpu_left: IntArray, model: IntArray) -> tuple[IntArray, IntArray]:
    """(reps, inverse): row ``reps[inverse[i]]`` has exactly row i's model, CPU left and free row.

    Rows are packed into two int64 words without loss (model, CPU, devices 0-2 | devices 3-7)
    and grouped with one lexsort, far cheaper than ``np.unique(axis=0)``.
    """
    if len(free) and (int(cpu_left.min()) < 0 or int(cpu_left.max()) >= 1 << _CPU_BITS
                      or int(model.max()) >= 1 << _MODEL_BITS):
        raise ValueError("distinct_states: CPU or model out of the packed range")
    first = (model << _CPU_BITS) | cpu_left
    second = np.zeros(len(free), dtype=np.int64)
    for d in range(3):
        first = (first << _FREE_BITS) | free[:, d]
    for d in range(3, MAX_GPUS_PER_NODE):
        second = (second << _FREE_BITS) | free[:, d]
    order = np.lexsort((second, first))
    a, b = first[order], second[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    reps: IntArray = order[new]
    return reps, inverse


class FragmentMemo:
    """``fragment(free, cpu_left, model)`` equals ``node_fragment(...)`` bit for bit, with a cache."""

    def __init__(self, typical: TypicalPods) -> None:
        self._typical = typical
        self._cpu_steps: IntArray = np.unique(typical.cpu_milli)
        self._cache: dict[Key, float] = {}
        self.computed = 0  # states measured by node_fragment (for benchmarks and tests)

    def keys(self, free: IntArray, cpu_left: IntArray, model: IntArray) -> list[Key]:
        """The canonical key of each state: (model and CPU step, free milli of the devices sorted)."""
        steps = np.searchsorted(self._cpu_steps, cpu_left, side="right")  # typical CPU requests covered
        head = model * (len(self._cpu_steps) + 1) + steps
        # Tuples hash faster than packing the row into integers costs (measured).
        return list(zip(head.tolist(), map(tuple, np.sort(free, axis=1).tolist())))

    def fragment(self, free: IntArray, cpu_left: IntArray, model: IntArray) -> FloatArray:
        """F_n of each of the B states (see ``node_fragment``); unseen states are measured in one batch."""
        pairs = self.keys(free, cpu_left, model)
        cache = self._cache
        missing: dict[Key, int] = {}
        for row, key in enumerate(pairs):
            if key not in cache and key not in missing:
                missing[key] = row
        if missing:
            rows = np.fromiter(missing.values(), dtype=np.int64, count=len(missing))
            values = node_fragment(free[rows], cpu_left[rows], model[rows], self._typical)
            cache.update(zip(missing, values.tolist()))
            self.computed += len(rows)
        return np.fromiter((cache[k] for k in pairs), dtype=np.float64, count=len(pairs))
