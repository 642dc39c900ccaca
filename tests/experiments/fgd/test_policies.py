"""The six paper policies on tiny hand-made clusters: scores, tie rule, filters, failures."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.experiments.fgd.cluster import Cluster, PodKind
from shoal.experiments.fgd.policies import PAPER_POLICIES, ClusteringPolicy, PackingPolicy, policy_registry
from shoal.experiments.fgd.runner import simulate
from shoal.experiments.fgd.streams import make_stream
from shoal.experiments.fgd.workload import Arrivals, typical_pods
from shoal.policy.fragmentation import TypicalPods
from shoal.sim.loaders.openb import OpenbNode, OpenbPod


def node(name: str, gpus: int, cpu: int = 96000, mem: int = 1 << 20, model: str = "G2") -> OpenbNode:
    return OpenbNode(name, cpu, mem, gpus, model)


def pod(name: str, num_gpu: int = 1, milli: int = 1000, cpu: int = 4000, mem: int = 1024,
        spec: tuple[str, ...] = ()) -> OpenbPod:
    return OpenbPod(name, cpu, mem, num_gpu, milli if num_gpu else 0, spec)


def placements(policy: str, nodes: list[OpenbNode], pods: list[OpenbPod], priority: list[int]) -> list[str]:
    """Name of the node of each placed pod, in order (failed pods are left out)."""
    arrivals = Arrivals(pods, nodes, priority)
    trace = simulate(arrivals, policy_registry()[policy](typical_pods(pods), make_stream("go", 1)))
    out = trace.placed_names()
    assert trace.failed == len(pods) - len(out)
    return out


@pytest.mark.parametrize("policy", [p for p in PAPER_POLICIES if p != "random"])
def test_ties_go_to_the_first_node_in_priority_order(policy: str) -> None:
    nodes = [node("a", 8), node("b", 8), node("c", 8)]
    assert placements(policy, nodes, [pod("p", 1, 1000)], priority=[2, 0, 1]) == ["b"]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param("bestfit", ["small"], id="BestFit fills the 1-GPU node first"),
        pytest.param("packing", ["small"], id="GpuPacking: an empty 1-GPU node scores 32 > 25"),
        pytest.param("dotprod", ["small"], id="DotProd: the smaller (left over . request) product wins"),
    ],
)
def test_policy_preferences(policy: str, expected: list[str]) -> None:
    nodes = [node("big", 8), node("small", 1)]
    assert placements(policy, nodes, [pod("p", 1, 1000)], priority=[0, 1]) == expected


@pytest.mark.parametrize("policy", list(PAPER_POLICIES))
def test_memory_and_model_filters(policy: str) -> None:
    nodes = [node("t4", 2, model="T4"), node("tiny-mem", 8, mem=100), node("g2", 8)]
    pods = [pod("needs-g2", 1, 500, spec=("G2",)), pod("no-fit", 8, 1000, spec=("T4",))]
    assert placements(policy, nodes, pods, priority=[0, 1, 2]) == ["g2"]


def test_failed_pods_count_as_arrived_not_allocated() -> None:
    arrivals = Arrivals([pod("a", 1, 1000), pod("b", 2, 1000)], [node("n", 2, cpu=5000)], [0])
    policy = policy_registry()["bestfit"](typical_pods(arrivals.pods), make_stream("go", 1))
    trace = simulate(arrivals, policy)
    assert trace.arrived_milli.tolist() == [1000, 3000]
    assert trace.allocated_milli.tolist() == [1000, 1000]
    assert trace.failed == 1


def _cluster_with(nodes: list[OpenbNode], used: list[tuple[int, PodKind, int]]) -> Cluster:
    cluster = Cluster(Arrivals([], nodes, list(range(len(nodes)))))
    for n, kind, device in used:
        cluster.place(n, kind, 0, device)
    return cluster


SHARE_300 = PodKind(1000, 1000, 1, 300, 127)
WHOLE_1 = PodKind(1000, 1000, 1, 1000, 127)


@pytest.mark.parametrize(
    ("used", "kind", "expected"),
    [
        pytest.param([], WHOLE_1, 25, id="empty 8-GPU node: max(33 - 8, 8)"),
        pytest.param([(0, SHARE_300, 0)], SHARE_300, 93, id="shared GPU with 700 free: 100 - 70/10"),
        pytest.param([(0, SHARE_300, 0)], WHOLE_1, 49, id="partly used node, one whole GPU: 50 - 1"),
    ],
)
def test_packing_scores(used: list[tuple[int, PodKind, int]], kind: PodKind, expected: int) -> None:
    cluster = _cluster_with([node("n", 8)], used)
    scores, _ = PackingPolicy().score(cluster, np.array([0]), kind)
    assert scores.tolist() == [expected]


@pytest.mark.parametrize(
    ("used", "kind", "expected"),
    [
        pytest.param([], SHARE_300, 25, id="no GPU pod on the node: base 0 + 25"),
        pytest.param([(0, SHARE_300, 0)], SHARE_300, 75, id="only share pods: base 0 + 75"),
        pytest.param([(0, SHARE_300, 0)], WHOLE_1, 0, id="different tag only: base 0"),
        pytest.param([(0, SHARE_300, 0), (0, WHOLE_1, 1)], SHARE_300, 4 + 50,
                     id="mixed tags: base floor(25 * 1300 / 8000) + 50"),
    ],
)
def test_clustering_scores(used: list[tuple[int, PodKind, int]], kind: PodKind, expected: int) -> None:
    cluster = _cluster_with([node("n", 8)], used)
    scores, _ = ClusteringPolicy().score(cluster, np.array([0]), kind)
    assert scores.tolist() == [expected]


def test_fgd_prefers_the_gpu_that_leaves_least_fragment() -> None:
    """Typical pods all need 500 milli. Free = [600, 800, 1000]; a 300 pod on GPU 0 leaves 300
    unusable (score 42); on GPU 1 or 2 nothing becomes fragment (50): the lowest such GPU wins."""
    typical = TypicalPods(np.array([1000]), np.array([500]), np.array([1]), np.ones((1, 7), bool), np.array([1.0]))
    used = [(0, PodKind(0, 100, 1, 400, 127), 0), (0, PodKind(0, 100, 1, 200, 127), 1)]
    cluster = _cluster_with([node("n", 3)], used)
    policy = policy_registry()["fgd"](typical, make_stream("go", 1))
    scores, devices = policy.score(cluster, np.array([0]), SHARE_300)
    assert devices.tolist() == [1]
    assert scores.tolist() == [50]
