"""The ``fragaware`` plugin end to end through ``run_cycle``; its mix from the argument or the snapshot."""

from __future__ import annotations

import pytest

from shoal.cycle import CycleResult, run_cycle
from shoal.framework.config import DEFAULT_PLUGINS, PluginConfig, SchedulerConfig
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
from shoal.policy.fragaware import MixEntry, MixFormatError

MODEL = "nvidia.com/gpu.product"
GIB = 1024**3


def fragaware_config(args: dict[str, str] | None = None) -> SchedulerConfig:
    """KAI's default plugins with ``nodeplacement`` replaced by ``fragaware`` and without
    ``gpusharingorder`` (its +1000 for any partly used GPU would override the fragment score)."""
    plugins = []
    for name, a in DEFAULT_PLUGINS:
        if name == "nodeplacement":
            plugins.append(PluginConfig("fragaware", dict(args or {})))
        elif name != "gpusharingorder":
            plugins.append(PluginConfig(name, dict(a)))
    return SchedulerConfig(actions=("allocate",), plugins=tuple(plugins))


def node(name: str, gpus: int = 4, cpu: int = 32_000, model: str = "A100", **labels: str) -> Node:
    return Node(name, {"cpu": cpu, "memory": 512 * GIB, "nvidia.com/gpu": gpus, "pods": 110},
                labels={MODEL: model, "nvidia.com/gpu.count": str(gpus), **labels})


class World:
    def __init__(self, *nodes: Node) -> None:
        self.snap = ClusterSnapshot(now=1000.0, nodes=list(nodes), queues=[Queue("q")])

    def job(self, name: str, gpu: GpuRequest, n: int = 1, *, node: str | None = None, cpu: int = 2000,
            selector: dict[str, str] | None = None, topology: TopologyConstraint | None = None) -> None:
        self.snap.podgroups.append(PodGroup(name, name, "ns", "q", 50, True, float(len(self.snap.podgroups)),
                                            min_member=n, topology=topology))
        status = PodStatus.RUNNING if node else PodStatus.PENDING
        for i in range(n):
            uid = f"{name}-{i}" if n > 1 else name
            self.snap.pods.append(Pod(uid, uid, "ns", name, status, cpu, GIB, gpu, node=node,
                                      node_selector=dict(selector or {})))

    def run(self, config: SchedulerConfig) -> dict[str, str]:
        result: CycleResult = run_cycle(self.snap, config)
        return {b.pod: b.node for b in result.decisions.binds}


HALVES_AND_QUADS = "2000/500x1=1;2000/1000x4=1"


@pytest.mark.parametrize(
    ("mix", "expected"),
    [
        pytest.param(HALVES_AND_QUADS, "b", id="the half-used GPU on b: a keeps four whole GPUs for quads"),
        pytest.param(None, "b", id="no mix argument: the snapshot's pods are the mix"),
    ],
)
def test_fractional_pod_keeps_whole_nodes_free(mix: str | None, expected: str) -> None:
    w = World(node("a"), node("b"), node("c"))
    w.job("running", GpuRequest(portion_milli=500), node="b")
    w.job("quad", GpuRequest(whole=4), node="c")  # c is full; the quad puts whole-node pods in the mix
    w.job("half", GpuRequest(portion_milli=500))
    assert w.run(fragaware_config({"mix": mix} if mix else {}))["half"] == expected


def test_cpu_only_pod_goes_where_no_gpu_is_left() -> None:
    # CPU on a node with free GPUs is what GPU pods need; on the full node it strands nothing.
    w = World(node("a"), node("b"))
    w.job("full", GpuRequest(whole=4), node="b")
    w.job("cpu", GpuRequest(), cpu=28_000)  # on a it would leave 4,000 CPU: too little for the mix
    assert w.run(fragaware_config({"mix": "8000/1000x1=1"}))["cpu"] == "b"


def test_model_constraint_is_respected_and_scored() -> None:
    # T4-only pods are in the mix: a model-agnostic pod should use the A100 node and keep the T4 free.
    w = World(node("t4", model="T4"), node("x", model="A100"))
    w.job("any", GpuRequest(whole=1))
    w.job("t4-only", GpuRequest(whole=1), selector={MODEL: "T4"})
    placed = w.run(fragaware_config({"mix": "2000/1000x4@T4=1;2000/1000x1=1"}))
    assert placed == {"any": "x", "t4-only": "t4"}


def test_gang_is_placed_whole_and_packed() -> None:
    w = World(node("a"), node("b"), node("c"))
    w.job("gang", GpuRequest(whole=2), n=4)
    placed = w.run(fragaware_config({"mix": "2000/1000x4=1"}))
    assert len(placed) == 4 and sorted(placed.values()) == ["a", "a", "b", "b"]  # two pods fill a node


def test_topology_required_domain_still_holds() -> None:
    zone = "zone"
    w = World(node("a", **{zone: "z1"}), node("b", **{zone: "z2"}), node("c", **{zone: "z2"}))
    w.snap.topologies.append(Topology("t", (zone,)))
    w.job("running", GpuRequest(whole=3), node="a")  # a is the best fit, but outside z2 once b is used
    w.job("gang", GpuRequest(whole=1), n=3, topology=TopologyConstraint("t", required_level=zone))
    placed = w.run(fragaware_config({"mix": "2000/1000x1=1"}))
    zones = {p: {"a": "z1", "b": "z2", "c": "z2"}[n] for p, n in placed.items()}
    assert len(placed) == 3 and len(set(zones.values())) == 1


def test_default_config_does_not_use_fragaware() -> None:
    assert not SchedulerConfig().has_plugin("fragaware")


def test_bad_mix_argument_fails_the_session() -> None:
    w = World(node("a"))
    w.job("p", GpuRequest(whole=1))
    with pytest.raises(MixFormatError):
        w.run(fragaware_config({"mix": "garbage"}))


# -- the mix and churn from the snapshot (what the adapters learn, shoal.history) -----------------
@pytest.mark.parametrize(
    ("mix", "expected"),
    [
        pytest.param([MixEntry(2000, 1000, 4, ("T4",), 1.0), MixEntry(2000, 1000, 1, (), 1.0)], "x",
                     id="the snapshot's mix (T4-only pods in it) wins over the argument"),
        pytest.param([], "t4", id="no mix learned yet: the argument's (no T4-only pods)"),
    ],
)
def test_the_snapshot_mix_comes_first(mix: list[MixEntry], expected: str) -> None:
    w = World(node("t4", model="T4"), node("x", model="A100"))
    w.job("any", GpuRequest(whole=1))
    w.snap.pod_mix = mix
    assert w.run(fragaware_config({"mix": "2000/1000x1=1"}))["any"] == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({}, "a", id="default weights: the node order (a first)"),
        pytest.param({"churn": "1"}, "b", id="churn: used nodes first, weak order"),
        pytest.param({"churn": "1", "used": "0", "order": "2"}, "a", id="explicit weights override churn's"),
    ],
)
def test_churn_argument_selects_the_churn_weights(args: dict[str, str], expected: str) -> None:
    # b has a GPU in use by a whole-GPU pod; a is idle and first in node order. Fragment is equal.
    w = World(node("a"), node("b"))
    w.job("running", GpuRequest(whole=1), node="b")
    w.job("new", GpuRequest(whole=1))
    assert w.run(fragaware_config({"mix": "2000/1000x1=1", **args}))["new"] == expected


def test_pods_departed_selects_the_churn_weights() -> None:
    w = World(node("a"), node("b"))
    w.job("running", GpuRequest(whole=1), node="b")
    w.job("new", GpuRequest(whole=1))
    w.snap.pods_departed = True
    assert w.run(fragaware_config({"mix": "2000/1000x1=1"}))["new"] == "b"
