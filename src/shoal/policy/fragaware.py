"""Fragmentation-aware placement score (``fragaware``): pure numpy math shared by the core plugin
and the FGD replay.

A candidate placement turns a node state ``before`` into ``after``. Its score (higher wins) is

    score = - dF / 1000                                   (FGD's fragment growth, unrounded, in GPUs)
            - w_order  * rank                             (stable node order, rank in [0, 1))
            - w_fit    * (free GPU left on the node / node GPUs)        (best fit among equal dF)
            - w_fresh  * [a fractional pod opens a completely free GPU]
            - w_open   * [the pod opens a completely idle node]

F is FGD's fragment (:func:`fragment`) against the distribution of the pods
likely to come next. The three packing terms are small against one GPU of fragment: they order
placements that fragment equally (best fit, then keep using the same subset of nodes), which is
where most of FGD's gain came from (its integer scores tie among hundreds of nodes and ties went
to a fixed node order). Every term above depends on one node's state only, so callers can cache a
node's score until that node changes. The one cluster-wide term, :func:`ss_growth` (weight
``FragAwareWeights.ss``), is separate: callers add it at pick time (the FGD replay's ``pick``, the core
plugin's score adjuster). No I/O, no randomness, never mutates its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shoal.policy.fragaware_mix import MixEntry as MixEntry  # re-exported: callers import the mix from here
from shoal.policy.fragaware_mix import MixFormatError as MixFormatError
from shoal.policy.fragaware_mix import encode_mix as encode_mix
from shoal.policy.fragaware_mix import parse_mix as parse_mix
from shoal.policy.fragaware_mix import typical_from_mix as typical_from_mix
from shoal.policy.fragmentation import FloatArray, TypicalPods

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

MILLI_PER_GPU = 1000
CPU_UNIT = 100_000  # milli-CPU per unit of the ``cpu`` term (100 cores)


@dataclass(frozen=True, slots=True)
class FragAwareWeights:
    """Weights of the terms, in GPUs of score per unit of the term (tuned on the openb grid,
    seeds 42-43; docs/fragaware.md)."""

    fragment: float = 1.0  # per GPU of FGD fragment added
    capacity: float = 0.0  # per GPU of expected capacity waste added (see capacity_waste)
    shortage: float = 0.5  # per GPU of expected CPU-shortage stranding added (see cpu_shortage)
    order: float = 2.0  # across the whole stable node order (rank 0 -> 1)
    fit: float = 0.05  # per share of the node's GPUs left free after the placement
    device: float = 0.01  # per GPU left free on the device a fractional pod shares
    fresh: float = 0.0  # a fractional pod opening a completely free GPU
    open: float = 0.0  # a GPU pod opening a completely idle node
    used: float = 0.0  # per share of the node's GPUs that were free before the placement (used-first)
    cpu: float = -0.3  # per 100 cores left free after the placement (negative: prefer CPU-rich nodes)
    lookahead: float = 0.0  # per GPU of fragment growth after also placing the next likely pod
    # Cluster-wide Sum-of-Squares term (see ss_growth): per unit of growth of sum_l N_l^2 / G over
    # the gap levels l of the partly used GPUs. Not node-local: applied at pick time, not cached.
    ss: float = 0.4


DEFAULT_WEIGHTS = FragAwareWeights()
#: Once pods leave: no fixed node order (it keeps sending pods to early nodes while free capacity
#: reappears all over the cluster), used nodes first instead (docs/fragaware.md, "With departures").
CHURN_WEIGHTS = FragAwareWeights(order=0.1, used=0.3, cpu=0.0, ss=0.0)


@dataclass(frozen=True, slots=True)
class NodeStates:
    """B node states: free milli-GPU per device [B, D] (0 for devices a node lacks), milli-CPU left
    [B], GPU model index [B] (column of ``TypicalPods.allowed``) and the node's GPU count [B]."""

    free: IntArray
    cpu_left: IntArray
    model: IntArray
    gpu_count: IntArray


_DEDUP_FROM = 200  # batch size from which evaluating each distinct node state once pays off


def state_measure(states: NodeStates, mix: TypicalPods, weights: FragAwareWeights) -> FloatArray:
    """The weighted fragmentation measure of each node state, milli-GPU:
    ``fragment * F + capacity * W + shortage * S`` (FGD's F, :func:`capacity_waste`,
    :func:`cpu_shortage`). Large batches repeat few distinct states: each is evaluated once."""
    if len(states.cpu_left) >= _DEDUP_FROM:
        key = np.column_stack([states.model, states.cpu_left, states.free])
        uniq, inverse = _unique_rows(key)
        inner = NodeStates(uniq[:, 2:], uniq[:, 1], uniq[:, 0], np.zeros(len(uniq), dtype=np.int64))
        out: FloatArray = _measure(inner, mix, weights)[inverse]
        return out
    return _measure(states, mix, weights)


def _unique_rows(key: IntArray) -> tuple[IntArray, IntArray]:
    """``np.unique(key, axis=0, return_inverse=True)`` exactly (same rows in the same order, so
    the measure sees the same batch bit for bit), ~3x faster: rows are grouped as raw bytes, and
    only the few distinct rows are put in numeric lexicographic order."""
    rows = np.ascontiguousarray(key)
    raw = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    _, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
    uniq = rows[first]
    order = np.lexsort(uniq.T[::-1])
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    out: IntArray = rank[inverse.reshape(-1)]
    return uniq[order], out


def _measure(s: NodeStates, mix: TypicalPods, weights: FragAwareWeights) -> FloatArray:
    """fragment * F + shortage * S (+ capacity * W) in one pass: F and S share their
    intermediates, so a one-node refresh costs few numpy calls."""
    if not len(mix.freq):
        return np.zeros(len(s.cpu_left), dtype=np.float64)
    free, cpu_left = s.free, s.cpu_left
    total = free.sum(axis=1)[None, :]  # [1, B]
    access = mix.allowed[:, s.model]  # [M, B]
    gpu_pod = (mix.count > 0)[:, None]
    fits_dev = free[None, :, :] >= mix.milli[:, None, None]  # [M, B, D]
    usable = (free[None, :, :] * fits_dev).sum(axis=2)
    ok = (fits_dev.sum(axis=2) >= mix.count[:, None]) & (mix.cpu_milli[:, None] <= cpu_left[None, :])
    ok &= access & gpu_pod
    per_pod = weights.fragment * np.where(ok, total - usable, total)  # [M, B]
    if weights.shortage:
        ratio = (mix.count * mix.milli / np.maximum(mix.cpu_milli, 1))[:, None]
        stranded = np.where(access, np.maximum(0.0, total - cpu_left[None, :] * ratio), total)
        per_pod = per_pod + weights.shortage * np.where(gpu_pod, stranded, 0.0)
    out: FloatArray = mix.freq @ per_pod
    if weights.lookahead:
        out = out + weights.lookahead * lookahead_fragment(s, mix)
    if weights.capacity:
        out = out + weights.capacity * capacity_waste(free, cpu_left, s.model, mix)
    return out


def place_each(s: NodeStates, mix: TypicalPods) -> tuple[IntArray, IntArray, BoolArray]:
    """Each node state after placing one pod of each mix kind [M, B, D] / [M, B] (fractions on
    the fullest fitting device, whole GPUs on the first free ones, CPU-only pods take CPU only)
    and whether that pod fits [M, B]; where it does not, the state is unchanged."""
    free = s.free[None, :, :]
    milli = mix.milli[:, None, None]
    fits_dev = free >= milli
    ok = (fits_dev.sum(axis=2) >= mix.count[:, None]) & (mix.cpu_milli[:, None] <= s.cpu_left[None, :])
    ok &= mix.allowed[:, s.model] | (mix.count == 0)[:, None]
    frac = ((mix.count == 1) & (mix.milli < MILLI_PER_GPU))[:, None, None]
    # fractional: the fullest fitting device; whole: the first `count` free devices
    best = np.argmin(np.where(fits_dev, free, 1 << 40), axis=2)  # [M, B]
    onehot = np.arange(free.shape[2])[None, None, :] == best[:, :, None]
    whole = (free == MILLI_PER_GPU) & (np.cumsum(free == MILLI_PER_GPU, axis=2) <= mix.count[:, None, None])
    take = np.where(frac, onehot * milli, whole * MILLI_PER_GPU)
    after = np.where(ok[:, :, None], free - take, free)
    cpu = np.where(ok, s.cpu_left[None, :] - mix.cpu_milli[:, None], s.cpu_left[None, :])
    return after, cpu, ok


def lookahead_fragment(s: NodeStates, mix: TypicalPods) -> FloatArray:
    """Expected FGD fragment (milli-GPU) of each node state after one more pod drawn from the mix
    is placed on it where it fits (:func:`place_each`): a state whose likely next pod leaves
    unusable slivers scores worse than one the next pod would fill exactly."""
    m, b = len(mix.freq), len(s.cpu_left)
    if not m or not b:
        return np.zeros(b, dtype=np.float64)
    after, cpu, _ = place_each(s, mix)
    model = np.broadcast_to(s.model[None, :], (m, b)).reshape(-1)
    f = fragment(after.reshape(m * b, -1), cpu.reshape(-1), model, mix).reshape(m, b)
    out: FloatArray = mix.freq @ f
    return out


def growth(before: NodeStates, after: NodeStates, mix: TypicalPods,
           weights: FragAwareWeights = DEFAULT_WEIGHTS) -> FloatArray:
    """Measure(after) - measure(before) per candidate, in GPUs (positive = adds fragment)."""
    both = NodeStates(
        np.concatenate([before.free, after.free]),
        np.concatenate([before.cpu_left, after.cpu_left]),
        np.concatenate([before.model, after.model]),
        np.concatenate([before.gpu_count, after.gpu_count]),
    )
    m = state_measure(both, mix, weights)
    n = len(before.cpu_left)
    out: FloatArray = (m[n:] - m[:n]) / MILLI_PER_GPU
    return out


def placement_score(
    before: NodeStates,
    after: NodeStates,
    rank: FloatArray,
    mix: TypicalPods,
    weights: FragAwareWeights = DEFAULT_WEIGHTS,
) -> FloatArray:
    """Score of each candidate placement ``before[i] -> after[i]`` (higher is better).

    ``rank`` in [0, 1) is the node's position in a stable node order (0 = preferred).
    """
    return delta_to_score(growth(before, after, mix, weights), before, after, rank, weights)


def fragment(free: IntArray, cpu_left: IntArray, model: IntArray, mix: TypicalPods) -> FloatArray:
    """FGD's fragment F_n (milli-GPU) of each node state against the mix: equal to
    :func:`shoal.policy.fragmentation.node_fragment` up to float rounding (that one reproduces
    Go's summation order bit for bit for FGD's integer scores; this one needs fewer numpy calls,
    which is what a one-node refresh costs)."""
    total = free.sum(axis=1)  # [B]
    fits_dev = free[None, :, :] >= mix.milli[:, None, None]  # [M, B, D]
    usable = np.where(fits_dev, free[None, :, :], 0).sum(axis=2)  # [M, B]
    ok = (fits_dev.sum(axis=2) >= mix.count[:, None]) & (mix.cpu_milli[:, None] <= cpu_left[None, :])
    ok &= mix.allowed[:, model] & (mix.count > 0)[:, None]
    frag = np.where(ok, total[None, :] - usable, total[None, :])
    out: FloatArray = mix.freq @ frag
    return out


def cpu_shortage(free: IntArray, cpu_left: IntArray, model: IntArray, mix: TypicalPods) -> FloatArray:
    """Expected milli-GPU a node strands for lack of CPU if filled with the mix's GPU pods.

    For GPU pod m (CPU c_m, GPU g_m = count * milli): the node's CPU left feeds at most
    ``cpu_left * g_m / c_m`` milli-GPU of m, so ``max(0, G - cpu_left * g_m / c_m)`` of its free
    GPU G can never be used by m. Averaged with the mix's frequencies (models m may not use
    count as stranded in full). A smooth, capacity-based counterpart of FGD's "lacks CPU" class.
    """
    gpu_pods = mix.count > 0
    ratio = np.where(gpu_pods, mix.count * mix.milli / np.maximum(mix.cpu_milli, 1), 0.0)  # [M]
    total = free.sum(axis=1).astype(np.float64)  # [B]
    usable = cpu_left[None, :] * ratio[:, None]  # [M, B]
    stranded = np.where(mix.allowed[:, model], np.maximum(0.0, total[None, :] - usable), total[None, :])
    out: FloatArray = (mix.freq[gpu_pods, None] * stranded[gpu_pods]).sum(axis=0)
    return out


def capacity_waste(free: IntArray, cpu_left: IntArray, model: IntArray, mix: TypicalPods) -> FloatArray:
    """Expected milli-GPU a node would strand if filled with copies of one pod of the mix.

    For GPU pod m (CPU c_m, ``count`` devices of ``milli`` each): the node holds
    k_m = min(floor(sum_d floor(free_d / milli) / count), floor(cpu_left / c_m)) copies, and
    ``G - k_m * count * milli`` of its free GPU G stays unused (all of G where m may not use the
    node's model). Weighted by the mix's GPU-pod frequencies. Unlike FGD's measure, which only
    asks whether one more m fits, this counts the slivers repeated packing leaves and the GPU a
    node's CPU cannot feed.
    """
    gpu_pods = np.flatnonzero(mix.count > 0)
    total = free.sum(axis=1).astype(np.float64)
    out: FloatArray = np.zeros(len(free), dtype=np.float64)
    for m in gpu_pods.tolist():  # M is small (tens); each step is vectorised over nodes
        milli, count = int(mix.milli[m]), int(mix.count[m])
        slots = (free // max(milli, 1)).sum(axis=1) // count
        k = np.minimum(slots, cpu_left // max(int(mix.cpu_milli[m]), 1))
        waste = np.where(mix.allowed[m, model], total - np.maximum(k, 0) * (milli * count), total)
        out += mix.freq[m] * waste
    return out


def gap_levels(mix: TypicalPods) -> IntArray:
    """Gap level of every free amount h = 0..1000 milli: how many of the mix's fractional sizes
    fit in h. Two gaps the same typical pods fit are interchangeable for what comes next."""
    sizes = np.unique(mix.milli[(mix.count == 1) & (mix.milli < MILLI_PER_GPU)])
    out: IntArray = np.searchsorted(sizes, np.arange(MILLI_PER_GPU + 1), side="right").astype(np.int64)
    return out


def ss_growth(free: IntArray, before: IntArray, after: IntArray, levels: IntArray) -> FloatArray:
    """Sum-of-Squares growth (Csirik et al., bin packing with discrete item sizes) of moving one
    GPU from ``before`` to ``after`` free milli, per candidate: the change of ``sum_l N_l^2 / G``,
    N_l = partly used GPUs of the cluster (0 < free < 1000, ``free`` = every device of every node)
    at gap level ``levels[free]`` (:func:`gap_levels`), G = their number + 1. Keeping the counts
    of every gap level even means the next pod finds a gap that fits it; the scale makes a
    weight read in GPUs of score. :func:`ss_level_counts` + :func:`ss_delta`."""
    return ss_delta(ss_level_counts(free, levels), before, after, levels)


def ss_level_counts(free: IntArray, levels: IntArray) -> IntArray:
    """N_l: the partly used GPUs (0 < free < 1000) among the free milli ``free`` (any shape) per
    gap level l = 0..levels[-1]. Counts of disjoint device sets add up (callers may keep them
    incrementally, node by node)."""
    partial = levels[free[(free > 0) & (free < MILLI_PER_GPU)]]
    out: IntArray = np.bincount(partial, minlength=int(levels[-1]) + 1).astype(np.int64)
    return out


def ss_delta(counts: IntArray, before: IntArray, after: IntArray, levels: IntArray) -> FloatArray:
    """The Sum-of-Squares growth of :func:`ss_growth` given the cluster's level counts ``counts``
    (:func:`ss_level_counts`) instead of its devices."""
    out: FloatArray = ss_delta_table(counts)[ss_codes(before, levels), ss_codes(after, levels)]
    return out


def ss_codes(free: IntArray, levels: IntArray) -> IntArray:
    """Code of each free amount for :func:`ss_delta_table`: 0 for a GPU that is not partly used
    (whole, full, or no device), else its gap level + 1."""
    partial = (free > 0) & (free < MILLI_PER_GPU)
    out: IntArray = np.where(partial, levels[np.clip(free, 0, MILLI_PER_GPU)] + 1, 0)
    return out


def ss_delta_table(counts: IntArray) -> FloatArray:
    """[L + 2, L + 2]: the Sum-of-Squares growth of moving one GPU from code b to code a
    (:func:`ss_codes`). Leaving level h takes ``(N_h - 1)^2 - N_h^2 = 1 - 2 N_h``, entering it
    adds ``2 N_h + 1``; leaving and entering the same level changes nothing. Divided by the
    partly used GPUs + 1."""
    n = counts.astype(np.float64)
    leave = np.concatenate([[0.0], 1.0 - 2.0 * n])
    enter = np.concatenate([[0.0], 2.0 * n + 1.0])
    table = leave[:, None] + enter[None, :]
    np.fill_diagonal(table, 0.0)
    out: FloatArray = table / (float(counts.sum()) + 1.0)
    return out


def delta_to_score(
    delta_gpus: FloatArray,
    before: NodeStates,
    after: NodeStates,
    rank: FloatArray,
    weights: FragAwareWeights = DEFAULT_WEIGHTS,
) -> FloatArray:
    """The score given the fragment growth ``delta_gpus`` (in GPUs) of each candidate."""
    taken = before.free - after.free
    # Free milli left on the device(s) the pod shares (0 for whole GPUs, CPU-only pods).
    device_left = np.where((taken > 0) & (after.free > 0), after.free, 0).sum(axis=1) / MILLI_PER_GPU
    count = np.maximum(before.gpu_count, 1)
    left = after.free.sum(axis=1) / (count * MILLI_PER_GPU)
    whole_before = (before.free == MILLI_PER_GPU).sum(axis=1)
    whole_after = (after.free == MILLI_PER_GPU).sum(axis=1)
    used_milli = before.free.sum(axis=1) - after.free.sum(axis=1)
    # A fractional placement that consumes a whole GPU without taking all of it.
    fresh = (whole_after < whole_before) & (used_milli < (whole_before - whole_after) * MILLI_PER_GPU)
    idle = (before.free.sum(axis=1) == before.gpu_count * MILLI_PER_GPU) & (before.gpu_count > 0)
    opens = idle & (used_milli > 0)
    free_before = before.free.sum(axis=1) / (count * MILLI_PER_GPU)
    out: FloatArray = (
        -delta_gpus
        - weights.order * rank
        - weights.fit * left
        - weights.fresh * fresh
        - weights.open * opens
        - weights.device * device_left
        - weights.used * free_before
        - weights.cpu * after.cpu_left / CPU_UNIT
    )
    return out
