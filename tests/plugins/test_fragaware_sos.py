"""The cluster-wide Sum-of-Squares term in the core: the node-choice hook (`Hooks.score_adjusters`),
the ``fragaware`` plugin's adjuster, and agreement with the FGD replay on small cases."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.actions import allocate
from shoal.cycle import open_session
from shoal.experiments.fgd.fragaware_policy import FragAwarePolicy
from shoal.experiments.fgd.runner import simulate
from shoal.experiments.fgd.workload import Arrivals, typical_pods
from shoal.framework.jobs import Task
from shoal.framework.session import Session
from shoal.model import GpuRequest
from shoal.policy.fragaware import FragAwareWeights, MixEntry, encode_mix, ss_level_counts
from shoal.sim.loaders.openb import OpenbNode, OpenbPod

from .test_fragaware import World, fragaware_config, node

CPU = 4000
# Mix sizes 0.3 / 0.6 / 0.8 -> gap levels [0, 0.3), [0.3, 0.6), [0.6, 0.8), [0.8, 1).
MIX_368 = f"{CPU}/800x1=1;{CPU}/300x1=1;{CPU}/600x1=1"
# openb-like fractions on 6 nodes x 8 GPUs where the default weight (0.4) changes placements.
OPENB_LIKE = [810, 1000, 110, 1000, 500, 650, 810, 230, 1000, 110, 230, 500, 650, 500, 160, 110, 110, 110, 160,
              1000, 160, 810, 1000, 160, 230, 500, 230, 1000, 160, 1000, 1000, 1000, 110, 500, 810, 500, 810, 810,
              810, 110]


def gap_world() -> World:
    """Node a holds a 0.8 and a 0.3 pod (gaps 0.2 at level 0 and 0.7 at level 2), b is empty; a
    0.6 pod is pending. Node-local terms (order, best fit) put it on a's 0.7 GPU, leaving a second
    gap at level 0 (sum of squares +2); the SS term prefers opening b, whose 0.4 gap is alone at
    level 1 (+1) and still fits a 0.3 pod (the replay's test_sum_of_squares_term_spreads_gaps_over_levels)."""
    w = World(node("a", gpus=2, cpu=96_000), node("b", gpus=2, cpu=96_000))
    w.job("r1", GpuRequest(portion_milli=800), node="a", cpu=CPU)
    w.job("r2", GpuRequest(portion_milli=300), node="a", cpu=CPU)
    w.job("six", GpuRequest(portion_milli=600), cpu=CPU)
    return w


@pytest.mark.parametrize(
    ("ss", "expected"),
    [
        pytest.param("0", "a", id="node-local score only: best fit on a"),
        pytest.param("50", "b", id="dominant SS term: the empty gap level, on b"),
        pytest.param("0.4", "a", id="default weight: too small to beat the node order here"),
    ],
)
def test_sum_of_squares_term_changes_the_chosen_node(ss: str, expected: str) -> None:
    assert gap_world().run(fragaware_config({"mix": MIX_368, "ss": ss}))["six"] == expected


# -- agreement with the FGD replay ------------------------------------------------------------


def replay_nodes(sizes: list[int], nodes: int, gpus: int, ss: float) -> list[str]:
    """Node of each placed pod, in arrival order, in the FGD replay (node order n0, n1, ...)."""
    pods = [OpenbPod(f"p{i}", CPU, 1024, 1, m, ()) for i, m in enumerate(sizes)]
    cluster = [OpenbNode(f"n{k}", 96_000, 1 << 20, gpus, "G2") for k in range(nodes)]
    trace = simulate(Arrivals(pods, cluster, list(range(nodes))),
                     FragAwarePolicy(typical_pods(pods), FragAwareWeights(ss=ss)))
    return trace.placed_names()


def core_nodes(sizes: list[int], nodes: int, gpus: int, ss: float) -> list[str]:
    """The same pods, pending in one cycle of the core (one job each, in arrival order), with
    the replay's typical pods as the plugin's mix."""
    pods = [OpenbPod(f"p{i}", CPU, 1024, 1, m, ()) for i, m in enumerate(sizes)]
    t = typical_pods(pods)
    mix = encode_mix([MixEntry(int(c), int(m), int(k), (), float(f))
                      for c, m, k, f in zip(t.cpu_milli, t.milli, t.count, t.freq, strict=True)])
    w = World(*[node(f"n{k}", gpus=gpus, cpu=96_000, model="G2") for k in range(nodes)])
    for i, m in enumerate(sizes):
        w.job(f"p{i:02d}", GpuRequest(portion_milli=m) if m < 1000 else GpuRequest(whole=1), cpu=CPU)
    placed = w.run(fragaware_config({"mix": mix, "ss": repr(ss)}))
    return [placed[f"p{i:02d}"] for i in range(len(sizes)) if f"p{i:02d}" in placed]


@pytest.mark.parametrize(
    ("sizes", "nodes", "gpus", "ss"),
    [
        pytest.param([800, 300, 600], 2, 2, 0.0, id="gap case, no SS"),
        pytest.param([800, 300, 600], 2, 2, 50.0, id="gap case, dominant SS: b opened"),
        pytest.param([800, 300, 600, 300, 800, 600, 300, 1000], 3, 2, 50.0, id="longer, dominant SS"),
        pytest.param([300, 800, 600, 800, 300, 1000, 1000, 300, 1000, 800], 3, 2, 0.4, id="default weight"),
        pytest.param([160, 650, 810, 230, 500, 810, 160, 300, 650, 1000, 230, 810, 500, 160], 4, 4, 0.4,
                     id="default weight, 4x4 GPUs"),
        pytest.param(OPENB_LIKE, 6, 8, 0.4, id="default weight, openb-like fractions, 6x8 GPUs"),
    ],
)
def test_core_and_replay_place_alike(sizes: list[int], nodes: int, gpus: int, ss: float) -> None:
    assert core_nodes(sizes, nodes, gpus, ss) == replay_nodes(sizes, nodes, gpus, ss)


def test_the_cases_exercise_the_term() -> None:
    # Otherwise the agreement above could hold with the term missing from one side.
    assert replay_nodes([800, 300, 600], 2, 2, 50.0) != replay_nodes([800, 300, 600], 2, 2, 0.0)
    long = [800, 300, 600, 300, 800, 600, 300, 1000]
    assert replay_nodes(long, 3, 2, 50.0) != replay_nodes(long, 3, 2, 0.0)
    assert replay_nodes(OPENB_LIKE, 6, 8, 0.4) != replay_nodes(OPENB_LIKE, 6, 8, 0.0)


# -- the incremental level counts and the node-choice hook --------------------------------------


def test_level_counts_follow_every_placement() -> None:
    w = World(*[node(f"n{k}", gpus=4, cpu=96_000) for k in range(4)])
    for i, m in enumerate([160, 650, 810, 230, 500, 810, 160, 300, 650, 230, 810, 500]):
        w.job(f"p{i:02d}", GpuRequest(portion_milli=m), cpu=CPU)
    ssn = open_session(w.snap, fragaware_config({"mix": MIX_368}))
    sos = next(a.__self__ for a in ssn.hooks.score_adjusters if hasattr(a, "__self__"))
    allocate.run(ssn)
    assert len(ssn.decisions.binds) == 12
    devices = sos._devices
    free = devices.free(np.arange(len(ssn.nodes)))  # rebuilds the nodes the last binds moved
    expected = ss_level_counts(free, sos._levels)
    assert devices.level_counts.tolist() == expected.tolist() and expected.sum() > 0


def test_adjusters_apply_on_top_of_cached_scores_and_none_stops_asking() -> None:
    w = World(node("a"), node("b"), node("c"))
    w.job("one", GpuRequest(whole=1))
    w.job("two", GpuRequest(whole=1))
    ssn = open_session(w.snap, fragaware_config({"mix": "2000/1000x1=1", "ss": "0"}))
    calls: list[str] = []

    def to_last(s: Session, task: Task, rows: np.ndarray, base: np.ndarray) -> np.ndarray:
        calls.append(task.pod.name)
        return np.where(rows == rows[-1], base + 100.0, base)

    def never(s: Session, task: Task, rows: np.ndarray, base: np.ndarray) -> np.ndarray | None:
        calls.append("never")
        return None

    ssn.hooks.score_adjusters.append(to_last)
    allocate.run(ssn)
    assert {b.pod: b.node for b in ssn.decisions.binds} == {"one": "c", "two": "c"}
    ssn2 = open_session(w.snap, fragaware_config({"mix": "2000/1000x1=1", "ss": "0"}))
    ssn2.hooks.score_adjusters.append(never)
    calls.clear()
    allocate.run(ssn2)
    assert calls == ["never"]  # same kind of task: asked once
    assert {b.pod: b.node for b in ssn2.decisions.binds} == {"one": "a", "two": "a"}


@pytest.mark.parametrize(
    ("args", "registered"),
    [
        pytest.param({}, 1, id="default weights: the SS adjuster is registered"),
        pytest.param({"ss": "0"}, 0, id="ss 0: node-local score only, node choice untouched"),
        pytest.param({"churn": "1"}, 0, id="churn weights have no SS term"),
    ],
)
def test_adjuster_is_registered_only_with_a_sum_of_squares_weight(args: dict[str, str], registered: int) -> None:
    w = World(node("a"))
    w.job("p", GpuRequest(portion_milli=500))
    ssn = open_session(w.snap, fragaware_config({"mix": MIX_368, **args}))
    # fragaware's adjuster is a bound method; podaffinity's (kube-scheduler preferences) is not.
    assert sum(hasattr(a, "__self__") for a in ssn.hooks.score_adjusters) == registered
