"""Hierarchical pod groups (kai-spec §3.7-3.8): the pod-set tree, allocSet over node sets with
rollback, per-leaf minimums and topology constraints (segments are leaves with a required level)."""

from __future__ import annotations

import pytest

from shoal.actions.common.job_allocation import subgroup_tree
from shoal.cycle import run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.model import (
    ClusterSnapshot,
    GpuRequest,
    Node,
    Pod,
    PodGroup,
    PodSetSpec,
    PodStatus,
    Queue,
    SubGroupSetSpec,
    Topology,
    TopologyConstraint,
)

ZONE, RACK = "zone", "rack"
TOPO = Topology("t", (ZONE, RACK))
ALLOCATE = SchedulerConfig(actions=("allocate",))


def _node(name: str, zone: str, rack: str, gpus: int = 1) -> Node:
    return Node(name, {"cpu": 64000, "memory": 256 * 10**9, "nvidia.com/gpu": gpus, "pods": 110},
                labels={ZONE: zone, RACK: rack})


def _pod(uid: str, subgroup: str, status: PodStatus = PodStatus.PENDING, node: str | None = None) -> Pod:
    return Pod(uid, uid, "ns", "job", status, cpu_milli=1000, memory=10**9, gpu=GpuRequest(whole=1),
               node=node, subgroup=subgroup)


def _run(nodes: list[Node], pg: PodGroup, pods: list[Pod]) -> dict[str, str]:
    snap = ClusterSnapshot(now=10.0, nodes=nodes, pods=pods, podgroups=[pg], queues=[Queue("q")],
                           topologies=[TOPO])
    result = run_cycle(snap, ALLOCATE)
    return {b.pod: b.node for b in result.decisions.binds}


def _pg(pod_sets: list[PodSetSpec], sub_sets: list[SubGroupSetSpec] | None = None,
        topology: TopologyConstraint | None = None) -> PodGroup:
    return PodGroup("job", "job", "ns", "q", priority=50, preemptible=True, creation=0.0,
                    pod_sets=pod_sets, sub_group_sets=sub_sets or [], topology=topology)


def test_subgroup_tree_shape() -> None:
    from shoal.framework.jobs import Job, PodSet

    pg = _pg([PodSetSpec("leader", 1), PodSetSpec("w1", 2, parent="workers"),
              PodSetSpec("w2", 2, parent="workers"), PodSetSpec("stray", 1, parent="nope")],
             [SubGroupSetSpec("workers", "")])
    job = Job(pg=pg, queue=None)
    for spec in pg.pod_sets:
        job.pod_sets[spec.name] = PodSet(spec)
    root = subgroup_tree(job)
    assert root.name == ""
    assert [c.name for c in root.children] == ["workers"]
    assert sorted(ps.name for ps in root.pod_sets) == ["leader", "stray"]
    assert sorted(ps.name for ps in root.children[0].pod_sets) == ["w1", "w2"]
    assert len(root.all_pod_sets()) == 4


def test_required_zone_rolls_back_when_a_subgroup_cannot_fit_a_rack() -> None:
    # zone1 (4 free GPUs, split 3+1 over its racks) is fuller than zone2 (2+2+1) and is tried
    # first: s1 takes two GPUs of r1, then s2 finds no rack with two free GPUs, so the walk rolls
    # zone1 back and places both subgroups in zone2 (one rack each).
    nodes = [_node("a0", "zone1", "r1", 3), _node("a1", "zone1", "r2", 1),
             _node("b0", "zone2", "r3", 2), _node("b1", "zone2", "r4", 2), _node("b2", "zone2", "r5", 1)]
    rack = TopologyConstraint("t", required_level=RACK)
    pg = _pg([PodSetSpec("s1", 2, topology=rack), PodSetSpec("s2", 2, topology=rack)],
             topology=TopologyConstraint("t", required_level=ZONE))
    pods = [_pod("p0", "s1"), _pod("p1", "s1"), _pod("p2", "s2"), _pod("p3", "s2")]
    placed = _run(nodes, pg, pods)
    assert len(placed) == 4
    assert {placed["p0"], placed["p1"]} in ({"b0"}, {"b1"})
    assert {placed["p2"], placed["p3"]} in ({"b0"}, {"b1"})
    assert placed["p0"] != placed["p2"]


@pytest.mark.parametrize(("segment", "racks", "want_placed"), [
    pytest.param(2, 3, 6, id="three-segments-three-racks"),
    pytest.param(3, 3, 0, id="segment-larger-than-a-rack"),
])
def test_segments_each_in_one_rack(segment: int, racks: int, want_placed: int) -> None:
    # A worker group of 6 cut into segments (leaf pod sets) that each require one rack of 2 GPUs.
    nodes = [_node(f"n{r}{k}", "z", f"r{r}") for r in range(racks) for k in range(2)]
    rack = TopologyConstraint("t", required_level=RACK)
    n_seg = 6 // segment
    pg = _pg([PodSetSpec(f"seg{s}", segment, parent="workers", topology=rack) for s in range(n_seg)],
             [SubGroupSetSpec("workers", "")])
    pods = [_pod(f"w{i}", f"seg{i // segment}") for i in range(6)]
    placed = _run(nodes, pg, pods)
    assert len(placed) == want_placed
    for s in range(n_seg if want_placed else 0):
        seg_racks = {placed[f"w{i}"][1] for i in range(6) if i // segment == s}
        assert len(seg_racks) == 1


def test_each_leaf_gets_its_minimum_then_elastic_growth_is_one_pod() -> None:
    nodes = [_node("n0", "z", "r", 8)]
    pg = _pg([PodSetSpec("a", 1), PodSetSpec("b", 2)])
    pods = [_pod("a0", "a"), _pod("a1", "a"), _pod("b0", "b"), _pod("b1", "b"), _pod("b2", "b")]
    placed = _run(nodes, pg, pods)
    # allocate pushes an elastic job back while it has pending pods, so everything fits in the end
    assert set(placed) == {"a0", "a1", "b0", "b1", "b2"}


def test_a_leaf_below_its_minimum_keeps_the_whole_gang_pending() -> None:
    nodes = [_node("n0", "z", "r", 2)]
    pg = _pg([PodSetSpec("a", 1), PodSetSpec("b", 2)])
    pods = [_pod("a0", "a"), _pod("b0", "b"), _pod("b1", "b")]
    assert _run(nodes, pg, pods) == {}


def test_partly_running_subgroup_stays_in_its_rack() -> None:
    # Segment seg0 runs one pod in rack r0 (now full); its second pod must join it in r0 and so
    # waits, although rack r1 is empty.
    nodes = [_node("n00", "z", "r0"), _node("n10", "z", "r1", 2)]
    rack = TopologyConstraint("t", required_level=RACK)
    pg = _pg([PodSetSpec("seg0", 1, topology=rack)])
    pods = [_pod("w0", "seg0", PodStatus.RUNNING, "n00"), _pod("w1", "seg0")]
    assert _run(nodes, pg, pods) == {}
