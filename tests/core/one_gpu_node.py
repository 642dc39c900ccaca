"""One GPU node holding given pods and one pending pod: the world of the shared-device count tests
(`test_feasible_nodes`, `test_consolidation_gate`)."""

from __future__ import annotations

from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource

GIB = 1 << 30
NOW = 1_000_000.0
QUARTER = GpuRequest(portion_milli=250)
HALF = GpuRequest(portion_milli=500)
WHOLE = GpuRequest(whole=1)

#: A pod on the node: (status, GPU request, shared device name or "" for whole devices).
Held = tuple[PodStatus, GpuRequest, str]


def snapshot(gpus: int, want: GpuRequest, *held: Held) -> ClusterSnapshot:
    """A `gpus`-GPU node (40,000 MiB devices) holding the pods `held`, each its own job of queue
    `a` (quota: every GPU), and a pending pod `want-0` asking for `want`."""
    node = Node("n0", {"cpu": 8000, "memory": 64 * GIB, "nvidia.com/gpu": gpus, "pods": 110},
                gpu_memory_mib=40_000)
    snap = ClusterSnapshot(now=NOW, nodes=[node], queues=[Queue("a", gpu=QueueResource(1000 * gpus, -1))])
    pods = [(f"held{i}", st, gpu, group) for i, (st, gpu, group) in enumerate(held)]
    for name, st, gpu, group in [*pods, ("want", PodStatus.PENDING, want, "")]:
        pg = PodGroup(name, name, "ns", "a", 50, True, creation=float(len(snap.podgroups)))
        snap.podgroups.append(pg)
        snap.pods.append(Pod(f"{name}-0", f"{name}-0", "ns", name, st, cpu_milli=100, memory=GIB, gpu=gpu,
                             node=None if st == PodStatus.PENDING else "n0",
                             gpu_groups=[group] if group else [], creation=pg.creation))
    return snap
