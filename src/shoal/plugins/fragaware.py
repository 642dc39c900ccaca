"""``fragaware``: fragmentation-aware node scoring (replaces ``nodeplacement``; docs/fragaware.md).

A node's score is how little placing the task there fragments the node's free GPUs against the
pod mix the cluster is likely to see next, plus small best-fit and stable-node-order terms
(:mod:`shoal.policy.fragaware`). Arguments (all optional, strings like every plugin argument):

* ``mix`` — a fixed pod mix (``shoal.policy.fragaware.encode_mix`` format). The adapters hand
  the mix they learn (:class:`shoal.history.podmix.PodMixFeed`) to the core as
  ``ClusterSnapshot.pod_mix``, which wins over this argument; without either the mix is the
  snapshot's own pods (pending and running), counted equally.
* ``modelLabel`` — node label naming the GPU model (default ``nvidia.com/gpu.product``); mix
  entries restricted to models only count nodes of those models as usable.
* ``churn`` — ``"1"``: the weights start from ``CHURN_WEIGHTS`` (weak node order, used nodes
  first) instead of ``DEFAULT_WEIGHTS``; so do they once the adapter has seen pods leave
  (``ClusterSnapshot.pods_departed``).
* ``order``, ``fit``, ``fragment``, ``capacity``, ``shortage``, ``used``, ``cpu``, ``device``, ``ss`` —
  weights of the terms (``FragAwareWeights``), overriding the base weights (``ss: "0"`` turns the
  cluster-wide term off).

The score is node-local (a node's answer changes only when the node does), so the node-choice
cache keeps it; the per-device free-milli matrix is cached here by node version as well. The one
cluster-wide term, Sum-of-Squares over gap levels (weight ``ss``), is added at pick time through
``Hooks.score_adjusters`` for single-device shared-GPU tasks (:class:`_SumOfSquares`). Device
choice stays with the GPU-order plugin (``gpupack``: fullest fitting GPU first), which is the
device the score assumes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from shoal.framework.fit import Rows
from shoal.framework.jobs import Task
from shoal.framework.session import Session
from shoal.model.pod import GpuRequest
from shoal.model.resources import CPU_COL, GPU_COL, MILLI
from shoal.policy.fragaware import (
    CHURN_WEIGHTS,
    DEFAULT_WEIGHTS,
    FragAwareWeights,
    IntArray,
    MixEntry,
    NodeStates,
    delta_to_score,
    gap_levels,
    parse_mix,
    ss_codes,
    ss_delta_table,
    state_measure,
    typical_from_mix,
)
from shoal.policy.fragaware_mix import DEFAULT_MODEL_LABEL, pod_kind
from shoal.policy.fragmentation import TypicalPods

#: Scores are squashed into (0, SCALE): the band of nodeplacement (every other plugin scores in
#: multiples of 10), so fragaware only orders nodes the other plugins rank equally.
SCALE = 9.0
_SQUASH = 4.0  # GPUs of score difference that span most of the band
_BIG = 1 << 40


def open_fragaware(ssn: Session, args: dict[str, str]) -> None:
    """Register the fragmentation-aware node scorer."""
    label = args.get("modelLabel", DEFAULT_MODEL_LABEL)
    weights = _weights(args, ssn.snapshot.pods_departed)
    nodes = ssn.nodes
    models = sorted({n.labels.get(label, "") for n in nodes.nodes})
    model_of = {m: k for k, m in enumerate(models)}
    model = np.array([model_of[n.labels.get(label, "")] for n in nodes.nodes], dtype=np.int64)
    entries = ssn.snapshot.pod_mix or (parse_mix(args["mix"]) if "mix" in args else _snapshot_mix(ssn, label))
    mix = typical_from_mix(entries, models)
    levels = gap_levels(mix) if weights.ss else None
    devices = _DeviceCache(ssn, levels)
    n = max(len(nodes), 1)
    rank_all = np.arange(len(nodes), dtype=np.float64) / n

    sos = _SumOfSquares(devices, levels, weights.ss) if levels is not None else None

    def score(s: Session, task: Task, rows: Rows) -> np.ndarray:
        idx = np.arange(len(s.nodes), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        before = NodeStates(devices.free(idx), s.nodes.idle[idx, CPU_COL], model[idx], devices.count[idx])
        after = _after(s, task, idx, before)
        delta = devices.growth(idx, before, after, mix, weights)
        raw = delta_to_score(delta, before, after, rank_all[idx], weights)
        squashed = squash(raw)
        if sos is not None:
            sos.keep(task, idx, before, after, raw, squashed)
        return squashed

    ssn.hooks.node_scorers.append(score)
    if sos is not None:
        ssn.hooks.score_adjusters.append(sos.adjust)


def squash(raw: np.ndarray) -> np.ndarray:
    """Monotone map of raw scores (GPUs) into (0, SCALE)."""
    out: np.ndarray = SCALE / 2 * (1.0 + np.tanh(raw / _SQUASH))
    return out


_WEIGHT_ARGS = ("order", "fit", "fragment", "capacity", "shortage", "used", "cpu", "device", "ss")


def _weights(args: dict[str, str], pods_departed: bool) -> FragAwareWeights:
    churn = pods_departed or args.get("churn", "0") not in ("", "0", "false")
    w = CHURN_WEIGHTS if churn else DEFAULT_WEIGHTS
    for key in _WEIGHT_ARGS:
        if key in args:
            try:
                w = replace(w, **{key: float(args[key])})
            except ValueError:
                raise ValueError(f"fragaware: {key}: expected a number, got {args[key]!r}") from None
    return w


def _snapshot_mix(ssn: Session, label: str) -> list[MixEntry]:
    """Cold start: the kinds of the snapshot's pods, each pod counted once."""
    counts: dict[tuple[int, int, int, tuple[str, ...]], int] = {}
    mem = int(ssn.nodes.gpu_memory.max(initial=0))
    for pod in ssn.snapshot.pods:
        key = pod_kind(pod, label, mem)
        counts[key] = counts.get(key, 0) + 1
    return [MixEntry(c, m, d, ms, float(w)) for (c, m, d, ms), w in sorted(counts.items())]


class _DeviceCache:
    """Free milli-GPU per device [n, D] (shared groups first, then whole idle devices, then 0s)
    and the node's fragmentation measure, rebuilt for a node only when its version moved."""

    def __init__(self, ssn: Session, levels: IntArray | None = None) -> None:
        self._ssn = ssn
        nodes = ssn.nodes
        #: With gap levels: N_l of the Sum-of-Squares term (:func:`ss_level_counts` of every
        #: device), kept up to date as node rows are rebuilt.
        self._levels = levels.tolist() if levels is not None else None
        self.level_counts = np.zeros(int(levels[-1]) + 1 if levels is not None else 0, dtype=np.int64)
        self.count = np.maximum(nodes.gpu_count, nodes.alloc[:, GPU_COL] // MILLI).astype(np.int64)
        self._free = np.zeros((len(nodes), max(int(self.count.max(initial=0)), 1)), dtype=np.int64)
        self._version = np.full(len(nodes), -1, dtype=np.int64)
        self._measure = np.zeros(len(nodes), dtype=np.float64)
        self._measure_version = np.full(len(nodes), -1, dtype=np.int64)

    def growth(self, idx: np.ndarray, before: NodeStates, after: NodeStates, mix: TypicalPods,
               weights: FragAwareWeights) -> np.ndarray:
        """Measure(after) - measure(before) in GPUs. The measure of a node as it is is the same
        for every task, so it is kept until the node changes; stale ones ride along with the
        after-states in one evaluation."""
        version = self._ssn.nodes.version[idx]
        stale = np.flatnonzero(version != self._measure_version[idx])
        if stale.size:
            both = NodeStates(np.concatenate([after.free, before.free[stale]]),
                              np.concatenate([after.cpu_left, before.cpu_left[stale]]),
                              np.concatenate([after.model, before.model[stale]]),
                              np.concatenate([after.gpu_count, before.gpu_count[stale]]))
            values = state_measure(both, mix, weights)
            self._measure[idx[stale]] = values[len(idx):]
            self._measure_version[idx[stale]] = version[stale]
            after_m = values[: len(idx)]
        else:
            after_m = state_measure(after, mix, weights)
        out: np.ndarray = (after_m - self._measure[idx]) / MILLI
        return out

    def free(self, idx: np.ndarray) -> np.ndarray:
        nodes = self._ssn.nodes
        stale = idx[nodes.version[idx] != self._version[idx]]
        for i in stale.tolist():
            row = self._free[i]
            if self._levels is not None:
                self._count(row, -1)
            row[:] = 0
            k = 0
            mem = int(nodes.gpu_memory[i])
            for g in nodes.groups[i].values():
                if g.allocated > 0 and k < len(row):
                    row[k] = max(0, (mem - g.allocated) * MILLI // mem) if mem > 0 else 0
                    k += 1
            whole = min(int(nodes.idle[i, GPU_COL]) // MILLI, len(row) - k)
            row[k:k + max(whole, 0)] = MILLI
            if self._levels is not None:
                self._count(row, 1)
            self._version[i] = nodes.version[i]
        out: np.ndarray = self._free[idx]
        return out

    def _count(self, row: np.ndarray, sign: int) -> None:
        """Add (sign 1) or remove (-1) one node's partly used GPUs to the level counts: the
        incremental form of :func:`ss_level_counts`, in plain Python (a row has a few devices)."""
        assert self._levels is not None
        counts, levels = self.level_counts, self._levels
        for v in row.tolist():
            if 0 < v < MILLI:
                counts[levels[v]] += sign


class _SumOfSquares:
    """The cluster-wide Sum-of-Squares term (:func:`shoal.policy.fragaware.ss_delta`, weight
    ``ss``) as a node-choice score adjuster, for single-device shared-GPU tasks.

    What it needs per node is kept by node version, so a pick costs a few gathers over the
    candidates: the level counts N_l (by the device cache, as node rows are rebuilt) and, handed
    over by the scorer for the nodes it scores, each node's raw node-local score, its squashed
    value and the move the task makes there (gap code before and after, on the fullest fitting
    device, as ``gpupack`` picks it), keyed by what they depend on (the task's CPU and GPU
    request). The adjusted score is ``other plugins + squash(raw - ss * dSS)``: the replay's
    ``raw - ss * dSS`` inside the plugin's band."""

    def __init__(self, devices: _DeviceCache, levels: IntArray, weight: float) -> None:
        self._devices = devices
        self._levels = levels
        self._weight = weight
        self._width = int(levels[-1]) + 2  # codes 0..L+1 (ss_codes)
        self._code_of = ss_codes(np.arange(MILLI + 1, dtype=np.int64), levels)
        self._store: dict[tuple[int, GpuRequest], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def keep(self, task: Task, idx: np.ndarray, before: NodeStates, after: NodeStates, raw: np.ndarray,
             squashed: np.ndarray) -> None:
        """Record the scorer's answers for nodes ``idx`` (single-device shared tasks only)."""
        g = task.pod.gpu
        if not g.is_shared or g.devices != 1:
            return
        key = (task.pod.cpu_milli, g)
        store = self._store.get(key)
        if store is None:
            n = len(self._devices.count)
            store = self._store[key] = (np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64))
        # The one device the task takes (none where nothing fits: a move from 0 to 0).
        gap_after = np.where(before.free != after.free, after.free, 0).sum(axis=1)
        gap_before = gap_after + (before.free - after.free).sum(axis=1)
        store[0][idx] = raw
        store[1][idx] = squashed
        store[2][idx] = self._code_of[gap_before] * self._width + self._code_of[gap_after]

    def adjust(self, ssn: Session, task: Task, rows: np.ndarray, base: np.ndarray) -> np.ndarray | None:
        """Scores of ``rows`` with the Sum-of-Squares term; None for tasks it does not apply to
        (whole GPUs, CPU-only, multi-device shares: the term is 0 for them, as in the replay)."""
        store = self._store.get((task.pod.cpu_milli, task.pod.gpu))
        if store is None:
            return None
        # Node choice has just rescored every node that moved for this task's kind, through the
        # scorer, so the device cache's level counts and the store are current for all rows.
        table = ss_delta_table(self._devices.level_counts).ravel()
        out: np.ndarray = base - store[1][rows] + squash(store[0][rows] - self._weight * table[store[2][rows]])
        return out


def _portion(ssn: Session, task: Task, idx: np.ndarray) -> np.ndarray:
    """Milli-GPU a shared task takes from one device of each node ``idx`` (GPU memory: the
    node's share of its device)."""
    g = task.pod.gpu
    if g.is_gpu_memory:
        mem = ssn.nodes.gpu_memory[idx]
        portion = np.where(mem > 0, -(-g.memory_mib * 100 // np.maximum(mem, 1)) * 10, MILLI)
    else:
        portion = np.full(len(idx), g.portion_milli, dtype=np.int64)
    out: np.ndarray = np.minimum(portion, MILLI)
    return out


def _after(ssn: Session, task: Task, idx: np.ndarray, before: NodeStates) -> NodeStates:
    """The node states after placing ``task`` (whole GPUs: lowest free devices; shared: the
    fullest fitting devices, as gpupack chooses; CPU-only: only CPU changes)."""
    g = task.pod.gpu
    free = before.free.copy()
    if g.whole:
        whole = free == MILLI
        free = np.where(whole & (np.cumsum(whole, axis=1) <= g.whole), 0, free)
    elif g.is_shared:
        portion = _portion(ssn, task, idx)
        for _ in range(max(g.devices, 1)):
            fits = free >= portion[:, None]
            dev = np.argmin(np.where(fits, free, _BIG), axis=1)
            rows = np.flatnonzero(fits.any(axis=1))
            # A device taken for this pod cannot take a second share of it: mark it negative.
            free[rows, dev[rows]] = -(free[rows, dev[rows]] - portion[rows]) - 1
        free = np.where(free < 0, -free - 1, free)
    return NodeStates(free, before.cpu_left - task.pod.cpu_milli, before.model, before.gpu_count)
