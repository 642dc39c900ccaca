"""GPU fragmentation of nodes against a typical-pod distribution (FGD, ATC'23), vectorised.

The measure (reference/traces.md §3.3): for node n and typical pod m with frequency p_m,
the part of n's free GPU capacity G_n that m cannot use is fragment:

* m is CPU-only: all of G_n (a CPU task cannot use GPUs);
* n's GPU model is not allowed for m: all of G_n;
* m fits (CPU left >= m's CPU and at least m.count GPUs with free >= m.milli): only the free
  milli on GPUs whose free amount is below m.milli;
* otherwise (m lacks CPU and/or GPU on n): all of G_n.

F_n = sum_m p_m * frag_m(n). Memory is not part of the measure. The sum is accumulated per class
(Q1 lack both, Q2 lack GPU or the unusable part of a fitting node, Q4 lack CPU, XL/XR CPU-only
pod with/without CPU, NoAccess) in typical-pod order and the classes are added in the order
Q1+Q2+Q4+XL+XR+NoAccess: the same float64 operations as the authors' Go code, so the integer
FGD scores derived from it agree exactly. Pure numpy; no I/O, no randomness.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# Class codes, in the order Go adds the class totals.
_Q1, _Q2, _Q4, _XL, _XR, _NOACCESS = range(6)
_N_CLASSES = 6
_CLASS_IDS = np.arange(_N_CLASSES)[:, None, None]


@dataclass(frozen=True, slots=True)
class TypicalPods:
    """The typical-pod distribution M: one entry per typical pod, frequencies sum to 1.

    ``allowed[m, k]`` says whether GPU model index ``k`` may host typical pod ``m``.
    A CPU-only typical pod has ``count == 0`` and ``milli == 0``.
    """

    cpu_milli: IntArray
    milli: IntArray
    count: IntArray
    allowed: BoolArray
    freq: FloatArray
    # Column views for broadcasting, built once (node_fragment runs thousands of times per run).
    _milli_col: IntArray = field(init=False, repr=False, compare=False)
    _count_col: IntArray = field(init=False, repr=False, compare=False)
    _cpu_col: IntArray = field(init=False, repr=False, compare=False)
    _freq_col: FloatArray = field(init=False, repr=False, compare=False)
    _cpu_only_col: BoolArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = len(self.freq)
        shapes = {len(self.cpu_milli), len(self.milli), len(self.count), self.allowed.shape[0]}
        if shapes != {m}:
            raise ValueError("typical-pod arrays must all have one entry per typical pod")
        cpu_only = self.count == 0
        # A CPU-only pod can use no GPU: a milli no device reaches makes all free GPU "unusable".
        never = np.iinfo(np.int64).max
        object.__setattr__(self, "_milli_col", np.where(cpu_only, never, self.milli)[:, None, None])
        object.__setattr__(self, "_count_col", self.count[:, None])
        object.__setattr__(self, "_cpu_col", self.cpu_milli[:, None])
        object.__setattr__(self, "_freq_col", self.freq[:, None])
        object.__setattr__(self, "_cpu_only_col", cpu_only[:, None])


def node_fragment(
    free_milli: IntArray, cpu_left: IntArray, model: IntArray, typical: TypicalPods
) -> FloatArray:
    """Fragment F_n (milli-GPU, float64) of each of B node states.

    ``free_milli`` is [B, D]: free milli-GPU per device, 0 for devices the node does not have
    (a missing device then contributes nothing); ``cpu_left`` [B] milli-CPU; ``model`` [B] GPU
    model index into ``typical.allowed``'s columns. Never mutates its inputs.
    """
    # Layout [M, B(, D)]: the per-class sums below reduce over axis 0 of a C-contiguous array,
    # which numpy does strictly in order (m = 0, 1, ...), exactly like Go's accumulation; a sum
    # over the last axis would use pairwise blocks and could differ from Go in the last bit.
    if len(free_milli) == 1:
        # With B == 1 numpy would collapse the B axis and sum pairwise: evaluate the state twice.
        return node_fragment(np.repeat(free_milli, 2, axis=0), np.repeat(cpu_left, 2),
                             np.repeat(model, 2), typical)[:1]
    free = free_milli[None, :, :]  # [1, B, D]
    fits_dev = free >= typical._milli_col  # [M, B, D]
    gpu_ok = fits_dev.sum(axis=2) >= typical._count_col  # [M, B]
    # Free milli on devices too small for m (for a CPU-only m: all of it, i.e. G_n).
    unusable = np.where(fits_dev, 0, free).sum(axis=2)
    cpu_ok = typical._cpu_col <= cpu_left[None, :]
    access = typical.allowed[:, model]  # [M, B]
    # A fitting node books its unusable part under Q2 (as Go does), so CPU-ok is always Q2.
    cls = np.where(cpu_ok, _Q2, np.where(gpu_ok, _Q4, _Q1))
    cls = np.where(access, cls, _NOACCESS)
    cls = np.where(typical._cpu_only_col, np.where(cpu_ok, _XL, _XR), cls)
    # Fitting: the unusable part; CPU-only m: unusable == G_n already; otherwise all of G_n.
    fits = cpu_ok & gpu_ok & access
    contrib = typical._freq_col * np.where(fits, unusable, free_milli.sum(axis=1)[None, :])
    per_class = np.where(cls[None] == _CLASS_IDS, contrib[None], 0.0)  # [6, M, B]
    # Adding the 0.0 of other classes leaves a float64 unchanged, so each class sum is Go's.
    sums = per_class.sum(axis=1)  # [6, B], in m order
    out: FloatArray = sums.sum(axis=0)  # Q1 + Q2 + Q4 + XL + XR + NoAccess, left to right
    return out


def fgd_score(frag_before: FloatArray, frag_after: FloatArray) -> IntArray:
    """FGD node score 0..100: floor(100 * sigmoid((F_before - F_after) / 1000)).

    A placement that reduces fragmentation scores above 50, one that adds fragment below.
    """
    x = (frag_before - frag_after) / 1000.0
    sig = 1.0 / (1.0 + np.exp(-x))
    return (sig * 100.0).astype(np.int64)
