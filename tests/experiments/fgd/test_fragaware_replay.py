"""``fragaware`` and ``kai-binpack`` in the FGD replay, on tiny hand-made clusters."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.experiments.fgd.cluster import Cluster, PodKind
from shoal.experiments.fgd.fragaware_policy import FragAwarePolicy, to_int_scores
from shoal.experiments.fgd.policies import policy_registry
from shoal.experiments.fgd.runner import simulate
from shoal.experiments.fgd.streams import make_stream
from shoal.experiments.fgd.workload import Arrivals, typical_pods
from shoal.policy.fragaware import FragAwareWeights
from shoal.sim.loaders.openb import OpenbNode, OpenbPod


def node(name: str, gpus: int, cpu: int = 96000, model: str = "G2") -> OpenbNode:
    return OpenbNode(name, cpu, 1 << 20, gpus, model)


def pod(name: str, num_gpu: int = 1, milli: int = 1000, cpu: int = 4000, spec: tuple[str, ...] = ()) -> OpenbPod:
    return OpenbPod(name, cpu, 1024, num_gpu, milli if num_gpu else 0, spec)


def placements(policy: str, nodes: list[OpenbNode], pods: list[OpenbPod], mix: list[OpenbPod] | None = None,
               priority: list[int] | None = None) -> list[str]:
    """Node of each placed pod, in order; the typical pods come from ``mix`` (default: ``pods``)."""
    arrivals = Arrivals(pods, nodes, priority or list(range(len(nodes))))
    policy_obj = policy_registry()[policy](typical_pods(mix or pods), make_stream("go", 1))
    return simulate(arrivals, policy_obj).placed_names()


def test_both_policies_are_registered() -> None:
    assert {"fragaware", "kai-binpack"} <= set(policy_registry())


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # a: 8 whole GPUs; b: one GPU half used. A half pod: KAI's gpusharingorder sends it to the
        # shared GPU; fragaware too (it keeps a's whole GPUs for the 8-GPU pods of the mix).
        pytest.param("kai-binpack", ["b", "b"], id="kai-binpack: shared GPU first"),
        pytest.param("fragaware", ["b", "b"], id="fragaware: the half-used GPU keeps the 8-GPU node whole"),
    ],
)
def test_half_pod_goes_to_the_half_used_gpu(policy: str, expected: list[str]) -> None:
    nodes = [node("a", 8), node("b", 2)]
    pods = [pod("first", 1, 500), pod("second", 1, 500)]
    mix = [*pods, pod("eight", 8, 1000), pod("eight2", 8, 1000)]
    assert placements(policy, nodes, pods, mix, priority=[0, 1]) == expected


def test_kai_binpack_prefers_fewest_free_whole_gpus() -> None:
    nodes = [node("big", 8), node("small", 2)]
    assert placements("kai-binpack", nodes, [pod("p")], priority=[0, 1]) == ["small"]


def test_fragaware_keeps_a_model_for_the_pods_that_need_it() -> None:
    # Half the mix may only use T4: an unconstrained pod should go to G2 even though T4 is first.
    nodes = [node("t4", 2, model="T4"), node("g2", 2, model="G2")]
    pods = [pod("free"), pod("t4-only", spec=("T4",))]
    mix = [pod("m1", 2, spec=("T4",)), pod("m2", 1)]
    assert placements("fragaware", nodes, pods, mix, priority=[0, 1]) == ["g2", "t4"]


def test_fragaware_fills_nodes_in_a_stable_order() -> None:
    nodes = [node(f"n{i}", 2) for i in range(4)]
    pods = [pod(f"p{i}") for i in range(4)]
    assert placements("fragaware", nodes, pods, priority=[2, 0, 3, 1]) == ["n1", "n1", "n3", "n3"]


def test_int_scores_keep_the_float_order() -> None:
    raw = np.array([-3.0, -1e-6, 0.0, 1e-6, 2.5])
    assert np.all(np.diff(to_int_scores(raw)) > 0) and to_int_scores(raw).min() >= 0


def test_fragaware_switches_to_churn_weights_on_the_first_departure() -> None:
    policy = FragAwarePolicy(typical_pods([pod("p")]))
    assert policy.on_departure() is True  # scores change: the caller must rescore every node
    assert policy.on_departure() is False  # already switched
    assert FragAwarePolicy(typical_pods([pod("p")]), churn_weights=None).on_departure() is False


@pytest.mark.parametrize(
    ("ss", "third"),
    [
        # Mix sizes 0.3/0.6/0.8 -> gap levels [0, 0.3), [0.3, 0.6), [0.6, 0.8), [0.8, 1). After
        # 0.8 and 0.3 on node a, a holds gaps 0.2 (level 0) and 0.7 (level 2). The 0.6 pod:
        # node-local terms (order, best fit) put it on a's 0.7 GPU, leaving a second 0.1 gap at
        # level 0 (sum of squares +2); a dominant SS weight opens b instead, whose 0.4 gap is
        # the only one at level 1 (+1) and still fits a 0.3 pod.
        pytest.param(0.0, ("a", 1), id="without the SS term: best fit on node a"),
        pytest.param(50.0, ("b", 0), id="dominant SS term: a gap at an empty level on node b"),
    ],
)
def test_sum_of_squares_term_spreads_gaps_over_levels(ss: float, third: tuple[str, int]) -> None:
    out: list[tuple[str, int]] = []
    original = Cluster.place

    def record(self: Cluster, n: int, kind: PodKind, memory: int, device: int) -> None:
        out.append((self.names[n], device))
        original(self, n, kind, memory, device)

    pods = [pod("p0", 1, 800), pod("p1", 1, 300), pod("p2", 1, 600)]
    policy = FragAwarePolicy(typical_pods(pods), FragAwareWeights(ss=ss))
    Cluster.place = record  # type: ignore[method-assign]
    try:
        simulate(Arrivals(pods, [node("a", 2), node("b", 2)], [0, 1]), policy)
    finally:
        Cluster.place = original  # type: ignore[method-assign]
    assert out == [("a", 0), ("a", 1), third]
    assert policy.picks == (ss != 0.0)
