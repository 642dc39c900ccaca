"""fragaware vs KAI's binpack: allocate-action cost per pod on 5,000 nodes (issue 8: ratio <= 2).

5,000 nodes x 8 GPUs (two GPU models), running pods that leave every node partly used (whole
GPUs and shared fractions), pending single-pod gangs of a mixed kind (0.25 / 0.5 / 0.75 GPU,
1, 2 and 4 whole GPUs, CPU-only). The same snapshot runs the allocate action twice: KAI's
default plugins, then the same list with ``nodeplacement`` -> ``fragaware`` (and without
``gpusharingorder``), the mix a PodMixTracker learns given as the plugin's `mix` argument.
Prints CPU seconds per placed pod for both and the ratio.

    python bench/bench_fragaware.py [--nodes 5000] [--pending 2000] [--ss 0.4] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numpy as np

from shoal.actions import allocate
from shoal.cycle import open_session
from shoal.framework.config import DEFAULT_PLUGINS, PluginConfig, SchedulerConfig
from shoal.history.podmix import PodMixTracker
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource

NOW = 1_700_000_000.0
KINDS = [GpuRequest(portion_milli=250), GpuRequest(portion_milli=500), GpuRequest(portion_milli=750),
         GpuRequest(whole=1), GpuRequest(whole=2), GpuRequest(whole=4), GpuRequest()]


def build(nodes: int, pending: int) -> tuple[ClusterSnapshot, PodMixTracker]:
    snap = ClusterSnapshot(now=NOW)
    for i in range(nodes):
        model = "A100" if i % 3 else "T4"
        snap.nodes.append(Node(f"node-{i:05d}", {"cpu": 128_000, "memory": 1024 * 1024**3,
                                                 "nvidia.com/gpu": 8, "pods": 110},
                               labels={"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": model}))
    snap.queues.append(Queue("q", creation=NOW, gpu=QueueResource(-1, -1, 1.0)))
    rng = np.random.default_rng(11)
    tracker = PodMixTracker()
    k = 0

    def add(gpu: GpuRequest, status: PodStatus, node: str | None) -> None:
        nonlocal k
        name = f"p{k}"
        k += 1
        snap.podgroups.append(PodGroup(name, name, "ns", "q", 50, True, NOW - k))
        p = Pod(name, name, "ns", name, status, 4000, 8 * 1024**3, gpu, node=node)
        snap.pods.append(p)
        tracker.observe(p, NOW)

    for i in range(nodes):  # 3 whole GPUs and one half-shared GPU used on every node
        add(GpuRequest(whole=3), PodStatus.RUNNING, f"node-{i:05d}")
        add(GpuRequest(portion_milli=500), PodStatus.RUNNING, f"node-{i:05d}")
    for j in rng.integers(len(KINDS), size=pending).tolist():
        add(KINDS[j], PodStatus.PENDING, None)
    return snap, tracker


def config(fragaware: str | None, extra: dict[str, str] | None = None) -> SchedulerConfig:
    plugins = []
    for name, args in DEFAULT_PLUGINS:
        if fragaware is not None and name == "gpusharingorder":
            continue
        if fragaware is not None and name == "nodeplacement":
            plugins.append(PluginConfig("fragaware", {"mix": fragaware, **(extra or {})}))
        else:
            plugins.append(PluginConfig(name, dict(args)))
    return SchedulerConfig(actions=("allocate",), plugins=tuple(plugins))


def measure(snap: ClusterSnapshot, cfg: SchedulerConfig, prof: cProfile.Profile | None) -> tuple[float, float, int]:
    t0 = time.process_time()
    ssn = open_session(snap, cfg)
    t_open = time.process_time() - t0
    t0 = time.process_time()
    if prof:
        prof.enable()
    allocate.run(ssn)
    if prof:
        prof.disable()
    return t_open, time.process_time() - t0, len(ssn.decisions.binds) + len(ssn.decisions.pipelines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pending", type=int, default=2000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--ss", help="fragaware's Sum-of-Squares weight (default: the plugin's, 0.4; 0 = node-local only)")
    a = ap.parse_args()
    snap, tracker = build(a.nodes, a.pending)
    mix = tracker.mix(NOW)
    prof = cProfile.Profile() if a.profile else None
    print(f"nodes={a.nodes} pending={a.pending} (single-pod gangs, {len(KINDS)} kinds); mix = {mix}")
    results = {}
    extra = {"ss": a.ss} if a.ss is not None else None
    for label, cfg in (("binpack", config(None)), ("fragaware", config(mix, extra))):
        t_open, t_alloc, placed = measure(snap, cfg, prof if label == "fragaware" else None)
        results[label] = t_alloc / max(placed, 1)
        print(f"{label:10s} session open {t_open:.3f} s CPU; allocate {t_alloc:.3f} s CPU, {placed} pods placed, "
              f"{1000 * results[label]:.3f} ms CPU per pod")
    print(f"ratio fragaware / binpack per pod: {results['fragaware'] / results['binpack']:.2f}x (target <= 2)")
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(18)
        print(s.getvalue())


if __name__ == "__main__":
    main()
