"""DRA-claimed GPUs (kai-spec §3.15): counted as whole GPUs for quota and fit; claim checks."""

from __future__ import annotations

import pytest

from shoal.cycle import run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot, Node, Pod, PodGroup, PodStatus, Queue, QueueResource
from shoal.model.dra import MAX_CLAIM_CONSUMERS, QUEUE_LABEL, ResourceClaim, pod_dra_gpus

NS = "ns"


def _claim(name: str, count: int = 1, device_class: str = "nvidia.com/gpu", queue: str | None = "q",
           reserved: int = 0) -> ResourceClaim:
    labels = {} if queue is None else {QUEUE_LABEL: queue}
    return ResourceClaim(name, NS, device_class, count, labels, reserved)


@pytest.mark.parametrize(("claims", "want"), [
    pytest.param([_claim("a", 2)], 2, id="gpu-class"),
    pytest.param([_claim("a", 2, device_class="fpga")], 0, id="other-class"),
    pytest.param([_claim("a", 1), _claim("b", 3)], 4, id="summed"),
])
def test_pod_dra_gpus(claims: list[ResourceClaim], want: int) -> None:
    index = {(c.namespace, c.name): c for c in claims}
    assert pod_dra_gpus(NS, (*(c.name for c in claims), "missing"), index) == want


def _run(claims: list[ResourceClaim], pods: int, node_gpus: int = 2, limit_gpus: int = -1
         ) -> list[str]:
    """Binds of one gang of `pods` pods, each referencing every claim."""
    names = tuple(c.name for c in claims)
    index = {(c.namespace, c.name): c for c in claims}
    gpus = pod_dra_gpus(NS, names, index)
    pod_list = [Pod(f"p{i}", f"p{i}", NS, "job", PodStatus.PENDING, cpu_milli=1000, memory=10**9,
                    resource_claims=names, dra_gpus=gpus) for i in range(pods)]
    node = Node("node0", {"cpu": 8000, "memory": 64 * 10**9, "nvidia.com/gpu": node_gpus, "pods": 110})
    queue = Queue("q", gpu=QueueResource(quota=-1, limit=limit_gpus * 1000 if limit_gpus >= 0 else -1))
    pg = PodGroup("job", "job", NS, "q", priority=50, preemptible=True, creation=0.0, min_member=pods)
    snap = ClusterSnapshot(now=1.0, nodes=[node], pods=pod_list, podgroups=[pg], queues=[queue],
                           resource_claims=index)
    result = run_cycle(snap, SchedulerConfig(actions=("allocate",)))
    return [b.pod for b in result.decisions.binds]


@pytest.mark.parametrize(("claims", "pods", "node_gpus", "limit", "binds"), [
    pytest.param([_claim("c", 2)], 1, 2, -1, 1, id="fits"),
    pytest.param([_claim("c", 2)], 1, 1, -1, 0, id="too-many-devices"),
    pytest.param([_claim("c", 2)], 1, 2, 1, 0, id="over-queue-limit"),
    pytest.param([_claim("c", 2, device_class="fpga", queue=None)], 1, 0, 1, 1, id="non-gpu-claim-is-free"),
    pytest.param([_claim("c", 1, queue="other")], 1, 2, -1, 0, id="shared-claim-wrong-queue"),
    pytest.param([_claim("c", 0, reserved=MAX_CLAIM_CONSUMERS - 1)], 1, 2, -1, 1, id="last-consumer-place"),
    pytest.param([_claim("c", 0, reserved=MAX_CLAIM_CONSUMERS - 2)], 3, 2, -1, 0, id="gang-over-max-consumers"),
    pytest.param([_claim("c", 0, reserved=MAX_CLAIM_CONSUMERS)], 1, 2, -1, 0, id="claim-full"),
])
def test_dra_gang(claims: list[ResourceClaim], pods: int, node_gpus: int, limit: int, binds: int) -> None:
    assert len(_run(claims, pods, node_gpus, limit)) == binds


def test_unknown_claim_keeps_the_pod_pending() -> None:
    pod = Pod("p", "p", NS, "job", PodStatus.PENDING, cpu_milli=1000, memory=10**9, resource_claims=("nope",))
    pg = PodGroup("job", "job", NS, "q", priority=50, preemptible=True, creation=0.0)
    node = Node("node0", {"cpu": 8000, "memory": 64 * 10**9, "pods": 110})
    snap = ClusterSnapshot(now=1.0, nodes=[node], pods=[pod], podgroups=[pg], queues=[Queue("q")])
    result = run_cycle(snap, SchedulerConfig(actions=("allocate",)))
    assert not result.decisions.binds
    assert any("resource claim ns/nope not found" in e for e in result.session.jobs["job"].fit_errors)
