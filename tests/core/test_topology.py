"""Topology domain math (shoal.policy.topology) and the topology plugin end to end (kai-spec §3.12)."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.conformance.runner import kai_detailed_message
from shoal.cycle import CycleResult, run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.model import (
    ClusterSnapshot,
    GpuRequest,
    Node,
    Pod,
    PodGroup,
    PodStatus,
    Queue,
    Topology,
    TopologyConstraint,
)
from shoal.model.resources import CPU_COL, GPU_COL, MEM_COL, PODS_COL
from shoal.policy import topology as topo

ZONE, RACK = "zone", "rack"
TOPOLOGY = Topology("t", (ZONE, RACK))


def _labels(*pairs: tuple[str, str] | None) -> list[dict[str, str]]:
    return [{} if p is None else {ZONE: p[0], RACK: p[1]} for p in pairs]


def test_build_tree_ids_parents_and_members() -> None:
    tree = topo.build_tree(TOPOLOGY, _labels(("z1", "r1"), ("z1", "r2"), ("z2", "r1"), None))
    assert tree.ids == [["root"], ["z1", "z2"], ["z1.r1", "z1.r2", "z2.r1"]]
    assert tree.member.tolist() == [True, True, True, False]
    assert tree.node_domain[2].tolist() == [0, 1, 2, -1]
    assert tree.parent[2].tolist() == [0, 0, 1]


@pytest.mark.parametrize(("nodes", "preferred", "want"), [
    pytest.param([0, 1], "", (1, 0), id="same-zone-different-racks"),
    pytest.param([0], "", (2, 0), id="one-node-goes-to-the-bottom"),
    pytest.param([0], ZONE, (1, 0), id="stops-at-preferred-level"),
    pytest.param([0, 2], "", (0, 0), id="different-zones-root"),
    pytest.param([3], "", (0, 0), id="no-topology-node-root"),
])
def test_lowest_common_domain(nodes: list[int], preferred: str, want: tuple[int, int]) -> None:
    tree = topo.build_tree(TOPOLOGY, _labels(("z1", "r1"), ("z1", "r2"), ("z2", "r1"), None))
    mask = np.zeros(4, dtype=bool)
    mask[nodes] = True
    assert topo.lowest_common_domain(tree, mask, preferred) == want


@pytest.mark.parametrize(("required", "preferred", "want"), [
    pytest.param(RACK, "", [2], id="required-only"),
    pytest.param("", RACK, [2, 1, 0], id="preferred-only-up-to-root"),
    pytest.param(ZONE, RACK, [2, 1], id="preferred-up-to-required"),
    pytest.param(RACK, ZONE, [2], id="preferred-above-required"),
    pytest.param("spine", "", "no level", id="unknown-level"),
])
def test_relevant_depths(required: str, preferred: str, want: list[int] | str) -> None:
    tree = topo.build_tree(TOPOLOGY, _labels(("z1", "r1")))
    got = topo.relevant_depths(tree, required, preferred)
    if isinstance(want, str):
        assert isinstance(got, str) and want in got
    else:
        assert got == want


def _vec(cpu: int = 0, mem: int = 0, gpu: int = 0, pods: int = 0) -> np.ndarray:
    v = np.zeros(4, dtype=np.int64)
    v[CPU_COL], v[MEM_COL], v[GPU_COL], v[PODS_COL] = cpu, mem, gpu, pods
    return v


@pytest.mark.parametrize(("request_", "free", "want"), [
    pytest.param(_vec(gpu=3000), _vec(gpu=2000), 1.5, id="gpu-over"),
    pytest.param(_vec(gpu=3000, cpu=1000), _vec(gpu=4000, cpu=4000), 0.75, id="dominant-gpu"),
    pytest.param(_vec(cpu=1500), _vec(cpu=3000), 2 / 3, id="cpu-rounds-up-to-cores"),
    pytest.param(_vec(gpu=1000), _vec(cpu=1000), topo.MISSING_RATIO, id="missing-resource"),
    pytest.param(_vec(pods=4), _vec(pods=1), 0.0, id="pods-ignored"),
])
def test_fill_ratio(request_: np.ndarray, free: np.ndarray, want: float) -> None:
    assert topo.fill_ratio(request_, free[None, :])[0] == pytest.approx(want)


ONE_GPU_POD = _vec(gpu=1000, cpu=1000, pods=1)


@pytest.mark.parametrize(("free", "req", "want"), [
    pytest.param(_vec(gpu=2000, cpu=8000, pods=110), ONE_GPU_POD, 2, id="gpu-bound"),
    pytest.param(_vec(gpu=8000, cpu=8000, pods=110), ONE_GPU_POD, 4, id="capped-at-tasks"),
    pytest.param(_vec(gpu=0, cpu=8000, pods=110), ONE_GPU_POD, 0, id="no-gpu"),
    pytest.param(_vec(pods=0), _vec(pods=1), 4, id="best-effort"),
])
def test_node_accommodation(free: np.ndarray, req: np.ndarray, want: int) -> None:
    assert topo.node_accommodation(free[None, :], req, 4).tolist() == [want]


# -- end to end: the example of kai-spec §3.12 ----------------------------------------------

def _node(name: str, zone: str, rack: str, gpus: int = 2) -> Node:
    return Node(name, {"cpu": 64000, "memory": 256 * 10**9, "nvidia.com/gpu": gpus, "pods": 110},
                labels={ZONE: zone, RACK: rack})


def _pods(job: str, n: int, status: PodStatus = PodStatus.PENDING, node: str | None = None,
          subgroup: str = "") -> list[Pod]:
    return [Pod(f"{job}-{i}", f"{job}-{i}", "ns", job, status, cpu_milli=1000, memory=10**9,
                gpu=GpuRequest(whole=1), node=node, subgroup=subgroup) for i in range(n)]


def _snapshot(nodes: list[Node], pgs: list[PodGroup], pods: list[Pod]) -> ClusterSnapshot:
    snap = ClusterSnapshot(now=1000.0, nodes=nodes, pods=pods, podgroups=pgs, queues=[Queue("q")])
    snap.topologies.append(TOPOLOGY)
    return snap


def _pg(name: str, n: int, constraint: TopologyConstraint | None) -> PodGroup:
    return PodGroup(name, name, "ns", "q", priority=50, preemptible=True, creation=0.0, min_member=n,
                    topology=constraint)


def _placements(result: CycleResult) -> dict[str, str]:
    return {b.pod: b.node for b in result.decisions.binds}


def test_spec_example_required_zone_preferred_rack() -> None:
    nodes = [_node("node0", "zone1", "rack1"), _node("node1", "zone1", "rack2"),
             _node("node2", "zone2", "rack3")]
    pg = _pg("job", 3, TopologyConstraint("t", required_level=ZONE, preferred_level=RACK))
    result = run_cycle(_snapshot(nodes, [pg], _pods("job", 3)), SchedulerConfig(actions=("allocate",)))
    placed = sorted(_placements(result).values())
    assert placed == ["node0", "node1", "node1"]


@pytest.mark.parametrize(("constraint", "want"), [
    pytest.param(TopologyConstraint("t", required_level=RACK), {"node2"}, id="required-packs-fuller-rack"),
    pytest.param(TopologyConstraint("t", preferred_level=RACK), {"node2"}, id="preferred-packs-fuller-rack"),
    pytest.param(None, {"node1"}, id="no-constraint-binpacks-nodes"),
])
def test_bin_packing_prefers_the_fuller_domain(constraint: TopologyConstraint | None, want: set[str]) -> None:
    # rack1 = node0 (4 free) + node1 (2 free), rack2 = node2 (3 free). Node bin-packing alone picks
    # node1 (fewest free GPUs); domain packing picks rack2 (the job takes 2/3 of it, 2/6 of rack1).
    nodes = [_node("node0", "z", "rack1", 4), _node("node1", "z", "rack1", 4),
             _node("node2", "z", "rack2", 4)]
    running = [*_pods("a", 2, PodStatus.RUNNING, "node1"), *_pods("b", 1, PodStatus.RUNNING, "node2")]
    pgs = [_pg("a", 2, None), _pg("b", 1, None), _pg("job", 2, constraint)]
    result = run_cycle(_snapshot(nodes, pgs, running + _pods("job", 2)),
                       SchedulerConfig(actions=("allocate",)))
    placed = _placements(result)
    assert len(placed) == 2
    assert set(placed.values()) == want


def test_required_level_that_no_domain_fits_keeps_the_job_pending_with_kai_errors() -> None:
    nodes = [_node("node0", "z", "rack1"), _node("node1", "z", "rack2")]
    pg = _pg("job", 3, TopologyConstraint("t", required_level=RACK))
    result = run_cycle(_snapshot(nodes, [pg], _pods("job", 3)), SchedulerConfig(actions=("allocate",)))
    assert not result.decisions.binds
    errors = result.session.jobs["job"].fit_errors
    assert kai_detailed_message(errors) == (
        "\nUnable to schedule podgroup."
        "\n<z.rack1>: node-group z.rack1 can allocate only 2 of 3 required pods."
        "\n<z.rack2>: node-group z.rack2 can allocate only 2 of 3 required pods."
        "\ntopology t, requirement rack couldn't be satisfied for job <ns/job>.")


def test_unknown_topology_is_a_fit_error() -> None:
    pg = _pg("job", 1, TopologyConstraint("nope", required_level=RACK))
    result = run_cycle(_snapshot([_node("node0", "z", "r")], [pg], _pods("job", 1)),
                       SchedulerConfig(actions=("allocate",)))
    assert not result.decisions.binds
    assert result.session.jobs["job"].fit_errors == ["Requested topology nope does not exist"]


def test_partly_running_gang_sticks_to_its_required_domain() -> None:
    # The job already runs one pod in rack1 (full afterwards); rack2 is empty and could take
    # the rest, but a required rack keeps the gang in rack1, so the extra pod waits.
    nodes = [_node("node0", "z", "rack1", 1), _node("node1", "z", "rack2", 4)]
    pods = [*_pods("job", 1, PodStatus.RUNNING, "node0"),
            Pod("job-x", "job-x", "ns", "job", PodStatus.PENDING, cpu_milli=1000, memory=10**9,
                gpu=GpuRequest(whole=1))]
    pg = _pg("job", 1, TopologyConstraint("t", required_level=RACK))
    result = run_cycle(_snapshot(nodes, [pg], pods), SchedulerConfig(actions=("allocate",)))
    assert not result.decisions.binds
