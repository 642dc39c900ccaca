"""MIG nodes never take shared-GPU pods (fraction or GPU memory), whichever action places them.

KAI's `PredicateByNodeResourcesType` (kai-spec §3.10, §3.15): a MIG node (label
`node-role.kubernetes.io/mig-enabled`, or MIG resources) under strategy `single` takes only
whole-GPU requests, under `mixed` only MIG requests. Every placement (allocate, the victim
solver's simulation for reclaim / preempt / consolidation) goes through that predicate.
"""

from __future__ import annotations

import pytest

from shoal.cycle import CycleResult, run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource

GIB = 1 << 30
NOW = 1_000_000.0
HALF = GpuRequest(portion_milli=500)
MEMORY = GpuRequest(memory_mib=10_000)
WHOLE = GpuRequest(whole=1)


def _node(name: str, gpus: int, mig: str = "", mig_label: bool = True, cpu: int = 8000) -> Node:
    """A GPU node of 40 GB devices; `mig` = its MIG strategy ("" = not MIG; the node is MIG by
    label or, without the label, by exposing a MIG resource)."""
    alloc = {"cpu": cpu, "memory": 64 * GIB, "nvidia.com/gpu": gpus, "pods": 110}
    if mig and not mig_label:
        alloc["nvidia.com/mig-1g.10gb"] = 7
    return Node(name, alloc, labels={"zone": name}, gpu_memory_mib=40_000,
                mig_strategy=mig or "none", mig_enabled=bool(mig) and mig_label)


class _Cluster:
    def __init__(self, *nodes: Node) -> None:
        self.snap = ClusterSnapshot(now=NOW, nodes=list(nodes),
                                    queues=[Queue("a", gpu=QueueResource(0, -1)),
                                            Queue("b", gpu=QueueResource(2000, -1))])

    def job(self, name: str, queue: str, gpu: GpuRequest, node: str = "", groups: tuple[str, ...] = (),
            priority: int = 50, selector: str = "", cpu: int = 100) -> _Cluster:
        running = bool(node)
        pg = PodGroup(name, name, "ns", queue, priority, True, creation=float(len(self.snap.podgroups)),
                      last_start_time=NOW - 3600 if running else None)
        self.snap.podgroups.append(pg)
        self.snap.pods.append(Pod(f"{name}-0", f"{name}-0", "ns", name,
                                  PodStatus.RUNNING if running else PodStatus.PENDING, cpu_milli=cpu,
                                  memory=GIB, gpu=gpu, node=node or None, gpu_groups=list(groups),
                                  node_selector={"zone": selector} if selector else {},
                                  creation=pg.creation, start_time=NOW - 3600 if running else None))
        return self

    def run(self, *actions: str) -> CycleResult:
        return run_cycle(self.snap, SchedulerConfig(actions=actions))


def _placed_on(result: CycleResult) -> dict[str, str]:
    d = result.decisions
    return {p.pod: p.node for p in (*d.binds, *d.pipelines)}


@pytest.mark.parametrize("gpu", [pytest.param(HALF, id="fraction"), pytest.param(MEMORY, id="gpu-memory")])
@pytest.mark.parametrize(("mig", "label"), [
    pytest.param("single", True, id="strategy-single-by-label"),
    pytest.param("single", False, id="strategy-single-by-mig-resource"),
    pytest.param("mixed", True, id="strategy-mixed"),
    pytest.param("none", True, id="mig-without-strategy"),
])
def test_allocate_never_shares_a_mig_node(gpu: GpuRequest, mig: str, label: bool) -> None:
    result = _Cluster(_node("m", 7, mig, label)).job("p", "b", gpu).run("allocate")
    assert _placed_on(result) == {}
    assert any("MIG-partitioned" in m for m in result.decisions.explanations["p"].messages)


@pytest.mark.parametrize(("gpu", "want"), [
    pytest.param(HALF, "n", id="fraction-goes-to-the-plain-node"),
    pytest.param(MEMORY, "n", id="gpu-memory-goes-to-the-plain-node"),
    pytest.param(WHOLE, "m", id="whole-gpu-may-use-a-single-strategy-mig-node"),
])
def test_allocate_prefers_by_kind(gpu: GpuRequest, want: str) -> None:
    # binpack: the busier node wins, so only the predicate keeps shared pods off m
    c = _Cluster(_node("m", 2, "single"), _node("n", 2)).job("busy", "b", WHOLE, node="m")
    assert _placed_on(c.job("p", "b", gpu).run("allocate")) == {"p-0": want}


def test_mig_strategy_label_on_a_plain_node_is_ignored() -> None:
    """GPU feature discovery labels every GPU node with the cluster's strategy; only MIG nodes obey it."""
    plain = _node("n", 1)
    plain.mig_strategy = "mixed"
    assert _placed_on(_Cluster(plain).job("p", "b", HALF).run("allocate")) == {"p-0": "n"}


@pytest.mark.parametrize("gpu", [pytest.param(HALF, id="fraction"), pytest.param(MEMORY, id="gpu-memory")])
def test_consolidation_never_moves_a_shared_pod_onto_a_mig_node(gpu: GpuRequest) -> None:
    """Freeing n for the whole-GPU pod would need the shared victim to move to m."""
    c = (_Cluster(_node("m", 1, "single"), _node("n", 1))
         .job("victim", "b", gpu, node="n", groups=("n-gpu0",))
         .job("p", "b", WHOLE, selector="n"))
    result = c.run("consolidation")
    assert result.decisions.evictions == []
    assert _placed_on(result) == {}


@pytest.mark.parametrize(("action", "gpu"), [
    pytest.param("reclaim", HALF, id="reclaim-fraction"),
    # (no GPU-memory reclaim case: such a preemptor reclaims nothing here even without a MIG node)
    pytest.param("preempt", HALF, id="preempt-fraction"),
    pytest.param("preempt", MEMORY, id="preempt-gpu-memory"),
])
def test_victim_solver_never_places_the_preemptor_on_a_mig_node(gpu: GpuRequest, action: str) -> None:
    """The solver simulates the preemptor's placement (pipelined) with `allocate_job`: the idle MIG
    node must not be taken for it; the victim on n is the only way (a whole-GPU victim may move to m)."""
    queue_of_victim = "a" if action == "reclaim" else "b"
    c = (_Cluster(_node("m", 1, "single"), _node("n", 1))
         .job("victim", queue_of_victim, WHOLE, node="n")
         .job("p", "b", gpu, priority=100))
    result = c.run(action)
    assert {e.job for e in result.decisions.evictions} == {"victim"}
    assert _placed_on(result)["p-0"] == "n"
