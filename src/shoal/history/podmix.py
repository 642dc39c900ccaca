"""The pod mix ``fragaware`` scores against, learned online by the adapters.

`PodMixTracker` keeps exponentially decayed counts of the kinds of pods seen, so the mix follows
a changing workload; `entries(now)` keeps the most frequent kinds that cover ``coverage`` of the
decayed count (FGD's typical pods use 95%). `PodMixFeed` is how an adapter uses it: each cycle
it observes the pods a snapshot shows for the first time, at the snapshot's time, and fills the
snapshot's `pod_mix` and `pods_departed`. The live service and the simulator both use it, so
``fragaware`` learns the mix the same way in `shoal run` and `shoal simulate`.
"""

from __future__ import annotations

import math
from collections.abc import Container
from dataclasses import dataclass

from shoal.model.pod import Pod
from shoal.model.podmix import MixEntry
from shoal.model.snapshot import ClusterSnapshot
from shoal.policy.fragaware_mix import DEFAULT_MODEL_LABEL, MixKey, encode_mix, pod_kind


@dataclass(slots=True)
class _Count:
    weight: float
    at: float


class PodMixTracker:
    """Exponentially decayed counts of the kinds of pods seen. Not thread-safe; never raises on
    a pod (every pod has a kind)."""

    def __init__(self, half_life_seconds: float = 3600.0, coverage: float = 0.95,
                 model_label: str = DEFAULT_MODEL_LABEL, device_memory_mib: int = 0,
                 max_kinds: int = 64) -> None:
        if half_life_seconds <= 0 or not 0 < coverage <= 1 or max_kinds < 1:
            raise ValueError("half_life_seconds > 0, 0 < coverage <= 1 and max_kinds >= 1 are required")
        self.half_life = half_life_seconds
        self.coverage = coverage
        self.model_label = model_label
        self.device_memory_mib = device_memory_mib
        self.max_kinds = max_kinds
        self._counts: dict[MixKey, _Count] = {}

    def _decayed(self, c: _Count, now: float) -> float:
        return c.weight * math.pow(0.5, max(0.0, now - c.at) / self.half_life)

    def observe(self, pod: Pod, now: float, count: float = 1.0) -> None:
        """Count ``count`` pods of ``pod``'s kind seen at time ``now`` (seconds)."""
        key = pod_kind(pod, self.model_label, self.device_memory_mib)
        c = self._counts.get(key)
        if c is None:
            self._counts[key] = _Count(count, now)
        else:
            c.weight = self._decayed(c, now) + count
            c.at = max(c.at, now)

    def entries(self, now: float) -> list[MixEntry]:
        """The most frequent kinds (decayed weight, ties by kind) covering ``coverage``.

        Kinds whose weight decayed below 1e-6 of the total are forgotten.
        """
        weights = {k: self._decayed(c, now) for k, c in self._counts.items()}
        total = sum(weights.values())
        if total <= 0:
            return []
        for k in [k for k, w in weights.items() if w < 1e-6 * total]:
            del self._counts[k]
            del weights[k]
        ordered = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
        out: list[MixEntry] = []
        covered = 0.0
        for (cpu, milli, devices, models), w in ordered[: self.max_kinds]:
            out.append(MixEntry(cpu, milli, devices, models, w))
            covered += w
            if covered >= self.coverage * total:
                break
        return out

    def mix(self, now: float) -> str:
        """The current mix in the text form of the ``fragaware`` plugin's ``mix`` argument."""
        return encode_mix(self.entries(now))


class PodMixFeed:
    """A `PodMixTracker` fed with every pod the first time a snapshot shows it (pending or already
    running), at the snapshot's time; `fill` hands the mix to the core through the snapshot, and
    `pods_departed` once a pod seen before has left (docs/fragaware.md). Pods of the jobs in
    `ignored_jobs` (other schedulers' pods, which are capacity, not arrivals) are not counted.
    The core stays clock-free: the time comes from the snapshot."""

    def __init__(self, tracker: PodMixTracker | None = None, ignored_jobs: Container[str] = ()) -> None:
        self.tracker = tracker or PodMixTracker()
        self.ignored_jobs = ignored_jobs
        self._seen: set[str] = set()
        self.churn = False

    def fill(self, snapshot: ClusterSnapshot, model_label: str | None = None) -> None:
        """Observe the snapshot's new pods, then set its `pod_mix` and `pods_departed`.

        `model_label` is the fragaware plugin's `modelLabel` (None: keep the tracker's)."""
        if model_label is not None:
            self.tracker.model_label = model_label
        # Fractions given as GPU memory become a share of the cluster's largest device (the plugin's rule).
        self.tracker.device_memory_mib = max((n.gpu_memory_mib for n in snapshot.nodes),
                                             default=self.tracker.device_memory_mib)
        live: set[str] = set()
        for pod in snapshot.pods:
            if pod.job in self.ignored_jobs:
                continue
            live.add(pod.uid)
            if pod.uid not in self._seen:
                self.tracker.observe(pod, snapshot.now)
        self.churn = self.churn or bool(self._seen - live)
        self._seen = live  # forget pods that are gone; a uid is never reused
        snapshot.pod_mix = self.tracker.entries(snapshot.now)
        snapshot.pods_departed = self.churn
