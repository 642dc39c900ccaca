"""PodMixTracker: the pod mix the ``fragaware`` plugin scores against, learned online.

Adapters (the live scheduler, the simulator) own one tracker, feed it the pods they see arrive
(``observe``) and pass ``mix(now)`` to the core each cycle as the ``fragaware`` plugin's ``mix``
argument: the core itself keeps no state between cycles. Counts decay exponentially with a
half-life, so the mix follows a changing workload; ``mix`` keeps the most frequent kinds that
cover ``coverage`` of the decayed count (FGD's typical pods use 95%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from shoal.framework.config import PluginConfig, SchedulerConfig
from shoal.model.pod import Pod, portion_for_memory
from shoal.policy.fragaware import MixEntry, encode_mix

DEFAULT_MODEL_LABEL = "nvidia.com/gpu.product"
MILLI = 1000

MixKey = tuple[int, int, int, tuple[str, ...]]


def pod_kind(pod: Pod, model_label: str = DEFAULT_MODEL_LABEL, device_memory_mib: int = 0) -> MixKey:
    """(CPU milli, GPU milli per device, devices, allowed models) of a pod.

    A GPU-memory request becomes a portion of a ``device_memory_mib`` device (a whole device if
    that is unknown); the allowed models come from the pod's node selector on ``model_label``.
    """
    g = pod.gpu
    if g.whole:
        milli, devices = MILLI, g.whole
    elif g.portion_milli:
        milli, devices = g.portion_milli, g.devices
    elif g.memory_mib:
        milli, devices = min(MILLI, portion_for_memory(g.memory_mib, device_memory_mib)), g.devices
    else:
        milli, devices = 0, 0
    model = pod.node_selector.get(model_label)
    models = (model,) if model and devices else ()
    return pod.cpu_milli, milli, devices, models


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
        """The current mix as the ``fragaware`` plugin's ``mix`` argument (``encode_mix``)."""
        return encode_mix(self.entries(now))


def with_mix(config: SchedulerConfig, mix: str, plugin: str = "fragaware", churn: bool = False) -> SchedulerConfig:
    """``config`` with the ``fragaware`` plugin's ``mix`` argument set to ``mix`` (the adapter's
    per-cycle hand-over) and, when ``churn`` (the adapter has seen pods leave), ``churn: "1"``.
    Unchanged when the plugin is not configured, or when ``mix`` is empty and not ``churn`` (the
    plugin then uses the snapshot's pods). Never mutates ``config``."""
    if (not mix and not churn) or not config.has_plugin(plugin):
        return config
    extra = ({"mix": mix} if mix else {}) | ({"churn": "1"} if churn else {})
    plugins = tuple(PluginConfig(p.name, {**p.arguments, **extra}) if p.name == plugin else p
                    for p in config.plugins)
    return replace(config, plugins=plugins)
