"""The preempting actions' feasible nodes read shared devices as KAI's `FeasibleNodesForJob` does.

KAI sums a node's idle GPUs as the whole idle devices plus the free room of every shared device
with *allocated* memory, and its releasing GPUs as the whole releasing devices plus the releasing
memory of shared devices not releasing as a whole. A device whose only shares are pipelined (they
wait for the releasing device they were put on) has no allocated memory, so its free room makes no
node feasible (docs/reclaim.md, found on unseen seed 71).
"""

from __future__ import annotations

from shoal.actions.common.victims import feasible_nodes
from shoal.cycle import open_session
from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource

GIB = 1 << 30
NOW = 1_000_000.0
HALF = GpuRequest(portion_milli=500)
WHOLE = GpuRequest(whole=1)


def _snapshot(*held: tuple[PodStatus, GpuRequest, str]) -> ClusterSnapshot:
    """One 1-GPU node holding the pods `held` (status, request, shared device or ""), and a
    pending quarter-GPU pod."""
    node = Node("n0", {"cpu": 8000, "memory": 64 * GIB, "nvidia.com/gpu": 1, "pods": 110},
                gpu_memory_mib=40_000)
    snap = ClusterSnapshot(now=NOW, nodes=[node], queues=[Queue("a", gpu=QueueResource(1000, -1))])
    pods = [(f"held{i}", st, gpu, group) for i, (st, gpu, group) in enumerate(held)]
    for name, st, gpu, group in [*pods, ("want", PodStatus.PENDING, GpuRequest(portion_milli=250), "")]:
        pg = PodGroup(name, name, "ns", "a", 50, True, creation=float(len(snap.podgroups)))
        snap.podgroups.append(pg)
        snap.pods.append(Pod(f"{name}-0", f"{name}-0", "ns", name, st, cpu_milli=100, memory=GIB, gpu=gpu,
                             node=None if st == PodStatus.PENDING else "n0",
                             gpu_groups=[group] if group else [], creation=pg.creation))
    return snap


def _feasible(*held: tuple[PodStatus, GpuRequest, str]) -> bool:
    ssn = open_session(_snapshot(*held), SchedulerConfig())
    want = next(j for j in ssn.jobs.values() if j.pg.name == "want")
    return bool(feasible_nodes(ssn, want.tasks)[0])


def test_an_idle_device_is_feasible() -> None:
    assert _feasible()


def test_room_on_a_device_with_allocated_shares_is_feasible() -> None:
    assert _feasible((PodStatus.RUNNING, HALF, "g0"))


def test_a_full_shared_device_is_not_feasible() -> None:
    assert not _feasible((PodStatus.RUNNING, HALF, "g0"), (PodStatus.RUNNING, HALF, "g0"))


def test_a_releasing_device_is_feasible() -> None:
    assert _feasible((PodStatus.RELEASING, WHOLE, ""))
    assert _feasible((PodStatus.RUNNING, HALF, "g0"), (PodStatus.RELEASING, HALF, "g0"))


def test_room_on_a_device_holding_only_pipelined_shares_is_not_feasible() -> None:
    # The share was pipelined onto the device the whole pod releases: no idle or releasing
    # device is left, and the device's free half counts in neither of KAI's sums.
    assert not _feasible((PodStatus.RELEASING, WHOLE, ""), (PodStatus.PIPELINED, HALF, "g0"))
