"""A cluster without nodes is an ordinary cycle: nothing placed, every pending gang told why.

Regression (issue #12): allocate crashed (`argmax of an empty sequence` in node choice), so the
live service failed every cycle and pending pods got no explanation. Pods still running on nodes
that left the snapshot (deleted, pods not yet collected) are never victims: the victim solver
crashed on them (node index -1) in consolidation and reclaim.
"""

from __future__ import annotations

import pytest

from shoal.framework.config import DEFAULT_ACTIONS, DEFAULT_PLUGINS, PluginConfig
from shoal.framework.decisions import NO_NODES
from shoal.model import GpuRequest, Topology
from shoal.model.constraints import (
    LabelSelector,
    NodeAffinity,
    NodeSelectorTerm,
    PodAffinity,
    PodAffinityTerm,
    Requirement,
    SpreadConstraint,
)
from shoal.model.dra import QUEUE_LABEL, ResourceClaim
from shoal.model.status import PodStatus
from shoal.model.topology import TopologyConstraint

from .reclaim_world import World

PLUGINS = tuple(PluginConfig(n, dict(a)) for n, a in DEFAULT_PLUGINS)


def _pending_world() -> World:
    """Queues with limits, and pending gangs of every kind: whole GPUs, CPU only, fraction, GPU
    memory, MIG, required and preferred topology, a DRA claim; one gang runs on a vanished node."""
    w = World().queue("a", quota=4, limit=2).queue("b", quota=4)
    w.job("gang", "b", gpus=1, tasks=2).job("cpu", "b", gpus=0)
    w.job("frac", "b", gpus=0).snapshot.pods[-1].gpu = GpuRequest(portion_milli=500)
    w.job("mem", "b", gpus=0).snapshot.pods[-1].gpu = GpuRequest(memory_mib=1000)
    w.job("mig", "b", gpus=0).snapshot.pods[-1].mig = {"nvidia.com/mig-1g.10gb": 1}
    w.snapshot.topologies.append(Topology("t", ("zone", "rack")))
    w.job("required", "b", tasks=2).snapshot.podgroups[-1].topology = TopologyConstraint("t", "rack")
    w.job("preferred", "b", tasks=2).snapshot.podgroups[-1].topology = TopologyConstraint("t", "", "rack")
    w.job("over-limit", "a", gpus=3)
    w.job("dra", "b", gpus=0)
    w.snapshot.resource_claims[("ns", "c")] = ResourceClaim("c", "ns", "nvidia.com/gpu", 1, {QUEUE_LABEL: "b"})
    w.snapshot.pods[-1].resource_claims, w.snapshot.pods[-1].dra_gpus = ("c",), 1
    # kube-scheduler constraints: pod affinity and anti-affinity, topology spread, node affinity
    app = LabelSelector((Requirement("app", "In", ("x",)),))
    term = PodAffinityTerm(app, "zone")
    w.job("affine", "b", gpus=0, tasks=2)
    for pod in w.snapshot.pods[-2:]:
        pod.labels = {"app": "x"}
        pod.pod_affinity = PodAffinity(required=(term,), preferred_anti=((10, term),))
        pod.spread = (SpreadConstraint(1, "zone", True, app), SpreadConstraint(1, "rack", False, app))
        pod.node_affinity = NodeAffinity(preferred=((5, NodeSelectorTerm((Requirement("zone", "In", ("z1",)),))),))
    # an elastic gang with one pod left on a node that is gone, one pod pending; a stale gang there
    w.job("orphan", "a", tasks=2, nodes=["gone", "gone"], min_member=1)
    w.snapshot.pods[-1].status, w.snapshot.pods[-1].node = PodStatus.PENDING, None
    w.job("stale", "a", tasks=2, nodes=["gone", "gone"], min_member=3)
    return w


CASES = [pytest.param((a,), (), id=a) for a in DEFAULT_ACTIONS] + [
    pytest.param(DEFAULT_ACTIONS, (), id="default-cycle"),
    pytest.param(DEFAULT_ACTIONS, ("fragaware",), id="default-cycle-fragaware"),
    pytest.param(DEFAULT_ACTIONS, ("gpuspread",), id="default-cycle-gpuspread"),
]


@pytest.mark.parametrize(("actions", "extra"), CASES)
def test_no_nodes_is_an_ordinary_cycle(actions: tuple[str, ...], extra: tuple[str, ...]) -> None:
    w = _pending_world()
    result = w.run(*actions, plugins=PLUGINS + tuple(PluginConfig(p) for p in extra))
    d = result.decisions
    assert d.binds == [] and d.pipelines == [] and d.evictions == []
    pending = {pg.uid for pg in w.snapshot.podgroups if pg.uid != "stale"}
    assert set(d.explanations) >= pending
    for uid in pending:
        assert any(NO_NODES in m for m in d.explanations[uid].messages), (uid, d.explanations[uid])


def test_allocate_explains_each_pod_once() -> None:
    d = World().queue("q").job("g", "q", tasks=2).run("allocate").decisions
    assert d.explanations["g"].messages == [
        f"pod g-0: no node fits ({NO_NODES})",
        "Resources were found for 0 pods while 2 are required for gang scheduling"]


@pytest.mark.parametrize("action", ["consolidation", "reclaim", "preempt"])
def test_pods_on_a_vanished_node_are_never_victims(action: str) -> None:
    """The only running pod is on a node missing from the snapshot (the real node is free)."""
    w = World().node("n0", 1).queue("a", quota=4).queue("b", quota=4)
    w.job("orphan", "b", nodes=["gone"], started=0.0)
    w.job("p", "b" if action == "preempt" else "a", priority=100 if action == "preempt" else 50)
    d = w.run(action).decisions
    assert d.evictions == []
