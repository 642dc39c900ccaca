"""``kai-spread`` (KAI's spread placement) against ``kai-binpack`` in the FGD replay, on tiny clusters."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.experiments.fgd.cluster import Cluster, PodKind
from shoal.experiments.fgd.kai_spread_policy import ordered_bits
from shoal.experiments.fgd.policies import policy_registry
from shoal.experiments.fgd.runner import simulate
from shoal.experiments.fgd.streams import make_stream
from shoal.experiments.fgd.workload import Arrivals, typical_pods
from shoal.sim.loaders.openb import OpenbNode, OpenbPod


def node(name: str, gpus: int, cpu: int = 96000) -> OpenbNode:
    return OpenbNode(name, cpu, 1 << 20, gpus, "G2")


def gpu_pod(milli: int = 1000, num_gpu: int = 1) -> OpenbPod:
    return OpenbPod("p", 4000, 1024, num_gpu, milli, ())


def cpu_pod(cpu: int) -> OpenbPod:
    return OpenbPod("c", cpu, 1024, 0, 0, ())


def placements(policy: str, nodes: list[OpenbNode], pods: list[OpenbPod]) -> list[tuple[str, int]]:
    """(node, device) of each placed pod, nodes in list order (the first wins ties)."""
    out: list[tuple[str, int]] = []
    original = Cluster.place

    def record(self: Cluster, node: int, kind: PodKind, memory_mib: int, device: int) -> None:
        out.append((self.names[node], device))
        original(self, node, kind, memory_mib, device)

    Cluster.place = record  # type: ignore[method-assign]
    try:
        arrivals = Arrivals(pods, nodes, list(range(len(nodes))))
        simulate(arrivals, policy_registry()[policy](typical_pods(pods), make_stream("go", 1)))
    finally:
        Cluster.place = original  # type: ignore[method-assign]
    return out


CASES = [
    # Whole GPUs: binpack fills a; spread alternates to the node with the larger free share.
    pytest.param([node("a", 4), node("b", 4)], [gpu_pod()] * 3,
                 [("a", 0), ("a", 1), ("a", 2)], [("a", 0), ("b", 0), ("a", 1)], id="whole GPUs"),
    # a has fewer free whole GPUs (binpack's choice) and, after one pod, the smaller free share (1/2 < 8/8).
    pytest.param([node("a", 2), node("b", 8)], [gpu_pod(), gpu_pod()],
                 [("a", 0), ("a", 1)], [("a", 0), ("b", 0)], id="share of free GPUs"),
    # Shared pods: binpack's gpusharingorder keeps a's half-used GPU; spread opens b's whole GPU.
    pytest.param([node("a", 2), node("b", 2)], [gpu_pod(500), gpu_pod(500)],
                 [("a", 0), ("a", 0)], [("a", 0), ("b", 0)], id="shared pods"),
    # Devices on one node: gpupack fills GPU 0; gpuspread takes the whole GPU 1, then the least used.
    pytest.param([node("a", 2)], [gpu_pod(500), gpu_pod(300), gpu_pod(300)],
                 [("a", 0), ("a", 0), ("a", 1)], [("a", 0), ("a", 1), ("a", 1)], id="gpupack vs gpuspread"),
    # CPU-only pods: least free CPU first vs the largest free CPU share.
    pytest.param([node("a", 1, cpu=96000), node("b", 1, cpu=32000)], [cpu_pod(16000)] * 3,
                 [("b", -1), ("b", -1), ("a", -1)], [("a", -1), ("b", -1), ("a", -1)], id="CPU-only pods"),
]


@pytest.mark.parametrize(("nodes", "pods", "binpack", "spread"), CASES)
def test_spread_picks_the_emptiest_where_binpack_picks_the_fullest(
    nodes: list[OpenbNode], pods: list[OpenbPod], binpack: list[tuple[str, int]], spread: list[tuple[str, int]]
) -> None:
    assert placements("kai-binpack", nodes, pods) == binpack
    assert placements("kai-spread", nodes, pods) == spread


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        # The +1000 sends the second half pod to a's shared GPU node; gpuspread still takes a whole GPU.
        pytest.param([gpu_pod(500), gpu_pod(500)], [("a", 0), ("a", 1)], id="shared pods: the bonus wins"),
        pytest.param([gpu_pod(500), gpu_pod(600)], [("a", 0), ("b", 0)], id="no fitting shared GPU: spread"),
        pytest.param([gpu_pod(), gpu_pod()], [("a", 0), ("b", 0)], id="whole GPUs: spread"),
    ],
)
def test_spread_with_gpusharingorder(pods: list[OpenbPod], expected: list[tuple[str, int]]) -> None:
    assert placements("kai-spread-sharing", [node("a", 2), node("b", 2)], pods) == expected


def test_multi_gpu_pod_goes_to_the_emptiest_node_that_fits() -> None:
    nodes = [node("a", 8), node("b", 4), node("c", 4)]
    pods = [gpu_pod(), gpu_pod(1000, 4), gpu_pod(1000, 4)]
    # All start at share 1: the 1-GPU pod takes a (first), a is then 7/8, so the 4-GPU pods go to b, then c.
    assert [n for n, _ in placements("kai-spread", nodes, pods)] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([0.0, 5e-324, 1e-300, 1 / 3, np.nextafter(1 / 3, 1.0), 0.5, 1.0], id="close and tiny"),
        pytest.param([0.0, 1 / 8, 1 / 7, 2 / 8, 2 / 7, 7 / 8, 1.0], id="GPU shares"),
    ],
)
def test_ordered_bits_keep_the_float_order(values: list[float]) -> None:
    keys = ordered_bits(np.array(values))
    assert np.all(np.diff(keys) > 0) and keys[0] == 0


def test_ordered_bits_reject_negative_scores() -> None:
    with pytest.raises(ValueError, match="negative"):
        ordered_bits(np.array([0.5, -0.25]))
