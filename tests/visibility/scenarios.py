"""Small snapshots with one pending gang blocked by a known cause (queue limit, fragmentation,
topology), shared by the visibility tests."""

from __future__ import annotations

from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource
from shoal.model.topology import Topology, TopologyConstraint

NOW = 1_700_000_000.0
GIB = 1024**3


def node(name: str, gpus: int = 8, labels: dict[str, str] | None = None) -> Node:
    return Node(name=name, allocatable={"cpu": 64_000, "memory": 512 * GIB, "nvidia.com/gpu": gpus, "pods": 110},
                labels={"nvidia.com/gpu.count": str(gpus), **(labels or {})})


def queue(name: str, quota: float = -1, limit: float = -1, parent: str = "") -> Queue:
    q = -1 if quota == -1 else int(quota * 1000)
    lim = -1 if limit == -1 else int(limit * 1000)
    return Queue(name=name, parent=parent, gpu=QueueResource(q, lim, 1.0))


def gang(snap: ClusterSnapshot, name: str, q: str, pods: int, gpus: int, *, running_on: list[str] | None = None,
         topology: TopologyConstraint | None = None, age: float = 60.0, priority: int = 50) -> PodGroup:
    pg = PodGroup(uid=f"ns/{name}", name=name, namespace="ns", queue=q, priority=priority, preemptible=priority < 100,
                  creation=NOW - age, min_member=pods, topology=topology)
    snap.podgroups.append(pg)
    running_on = running_on or []
    for k in range(pods):
        where = running_on[k] if k < len(running_on) else None
        snap.pods.append(Pod(uid=f"{name}-{k}", name=f"{name}-{k}", namespace="ns", job=pg.uid,
                             status=PodStatus.RUNNING if where else PodStatus.PENDING, node=where,
                             cpu_milli=1000, memory=GIB, gpu=GpuRequest(whole=gpus), creation=NOW - age,
                             start_time=NOW - age if where else None))
    return pg


def limit_blocked() -> ClusterSnapshot:
    """team-a (limit 8 GPUs) runs 8 GPUs; its 4-GPU gang waits although nodes are free."""
    s = ClusterSnapshot(now=NOW, nodes=[node("n0"), node("n1")], queues=[queue("team-a", 4, 8)])
    gang(s, "big", "team-a", 1, 8, running_on=["n0"], age=600)
    gang(s, "waits", "team-a", 1, 4)
    return s


def fragmented() -> ClusterSnapshot:
    """Four nodes with 2 free GPUs each (8 in total); a 4-GPU pod fits nowhere."""
    s = ClusterSnapshot(now=NOW, nodes=[node(f"n{i}") for i in range(4)], queues=[queue("team-b")])
    for i in range(4):
        gang(s, f"filler-{i}", "team-b", 1, 6, running_on=[f"n{i}"], age=600, priority=125)
    gang(s, "wide", "team-b", 1, 4)
    return s


def topology_blocked() -> ClusterSnapshot:
    """Two racks of two 8-GPU nodes; one node per rack is full. A 2 x 8-GPU gang needs one rack."""
    rack = "topology.kubernetes.io/rack"
    nodes = [node(f"n{i}", labels={rack: f"rack-{i // 2}"}) for i in range(4)]
    s = ClusterSnapshot(now=NOW, nodes=nodes, queues=[queue("team-c")],
                        topologies=[Topology("racks", (rack,))])
    gang(s, "f0", "team-c", 1, 8, running_on=["n0"], age=600, priority=125)  # non-preemptible: stays
    gang(s, "f1", "team-c", 1, 8, running_on=["n2"], age=600, priority=125)
    gang(s, "pair", "team-c", 2, 8, topology=TopologyConstraint("racks", rack))
    return s
