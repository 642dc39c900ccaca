"""The minruntime plugin: durations, inheritance down the queue tree, lca vs queue resolution,
and elastic victims (shrunk, but never below their minimum while protected)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.reclaim_world import NOW, World, evicted_jobs
from shoal.cycle import open_session
from shoal.framework.config import PluginConfig, SchedulerConfig
from shoal.framework.jobs import Task
from shoal.framework.scenario_victims import RecordedJobs, ScenarioVictims
from shoal.framework.statement import Statement
from shoal.plugins.minruntime import reclaim_start


def tree() -> World:
    """root -> {d1 -> {a, b}, d2 -> {c}}."""
    w = World().node("n0", 8)
    w.queue("d1").queue("d2").queue("a", parent="d1").queue("b", parent="d1").queue("c", parent="d2")
    return w


@pytest.mark.parametrize(("reclaimer", "victim", "start"), [
    pytest.param("a", "b", "b", id="siblings-start-at-the-victim"),
    pytest.param("a", "c", "d2", id="other-department-starts-at-its-top"),
])
def test_lca_start(reclaimer: str, victim: str, start: str) -> None:
    ssn = open_session(tree().snapshot, SchedulerConfig(actions=()))
    assert reclaim_start(ssn.queues[reclaimer], ssn.queues[victim]).name == start


def config(method: str, **defaults: str) -> dict[str, object]:
    args = {"reclaimResolveMethod": method, **defaults}
    base = SchedulerConfig()
    plugins = tuple(PluginConfig(p.name, args if p.name == "minruntime" else dict(p.arguments))
                    for p in base.plugins)
    return {"plugins": plugins}


@pytest.mark.parametrize(("method", "evicted"), [
    # The victim's leaf queue is protected (10 min) but its department is not: `queue` looks
    # at the leaf, `lca` starts at the victim's department (the victim-side child of the root).
    pytest.param("queue", set(), id="queue-method-reads-the-leaf"),
    pytest.param("lca", {"v1", "v2"}, id="lca-method-reads-the-department"),
])
def test_resolve_method(method: str, evicted: set[str]) -> None:
    w = World().node("n0", 2).queue("d1", quota=0).queue("d2", quota=2)
    w.queue("victims", quota=0, parent="d1", reclaim_min_runtime=600.0).queue("mine", quota=2, parent="d2")
    w.job("v1", "victims", nodes=["n0"], started=NOW - 60).job("v2", "victims", nodes=["n0"], started=NOW - 60)
    w.job("p", "mine", gpus=2)
    assert evicted_jobs(w.run("reclaim", **config(method))) == evicted


@pytest.mark.parametrize(("default", "evicted"), [
    pytest.param("0s", {"low"}, id="no-protection"),
    pytest.param("5m", set(), id="default-protects-a-job-started-a-minute-ago"),
])
def test_preempt_default_min_runtime(default: str, evicted: set[str]) -> None:
    w = World().node("n0", 2).queue("q", quota=2)
    w.job("low", "q", nodes=["n0", "n0"], tasks=2, started=NOW - 60).job("p", "q", gpus=2, priority=100)
    got = w.run("preempt", **config("lca", defaultPreemptMinRuntime=default))
    assert evicted_jobs(got) == evicted


def test_protected_elastic_victim_only_loses_pods_above_its_minimum() -> None:
    w = World().node("n0", 4).queue("q0", quota=0).queue("q1", quota=4)
    w.job("elastic", "q0", tasks=4, min_member=2, nodes=["n0"] * 4, started=NOW - 60)
    w.job("p", "q1", gpus=3)
    free = w.run("reclaim", **config("lca", defaultReclaimMinRuntime="0s"))
    assert len(free.decisions.evictions) == 4  # unprotected: at its minimum the gang goes whole
    w2 = World().node("n0", 4).queue("q0", quota=0).queue("q1", quota=4)
    w2.job("elastic", "q0", tasks=4, min_member=2, nodes=["n0"] * 4, started=NOW - 60)
    w2.job("p", "q1", gpus=2)
    kept = w2.run("reclaim", **config("lca", defaultReclaimMinRuntime="1h"))
    assert len(kept.decisions.evictions) == 2  # protected: only the two pods above min
    w3 = World().node("n0", 4).queue("q0", quota=0).queue("q1", quota=4)
    w3.job("elastic", "q0", tasks=4, min_member=2, nodes=["n0"] * 4, started=NOW - 60)
    w3.job("p", "q1", gpus=3)
    assert not w3.run("reclaim", **config("lca", defaultReclaimMinRuntime="1h")).decisions.evictions


# -- the verdicts kept per recorded-victims object (ScenarioVictims.base) ------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.sampled_from(["parent", "added", "extra"])),
                min_size=1, max_size=6))
def test_kept_verdicts_answer_as_every_victim_read(jobs: list[tuple[bool, bool, str]]) -> None:
    """Victim jobs of two pods, each a gang (min 2) or elastic (min 1), one pod evicted or both;
    in the parent's recorded part, the part added to it, or the scenario's other victims. Every
    victim is protected (1 h minimum runtime, started a minute ago): the scenario is refused
    exactly when a job is left below its minimum. The validator given the recorded parts (a child after its
    parent, as the solver gives them) answers as given a plain dict."""
    w = World().node("n0", 16).queue("q0", quota=0).queue("q1", quota=16)
    for i, (gang, _both, _part) in enumerate(jobs):
        w.job(f"v{i}", "q0", tasks=2, min_member=2 if gang else 1, nodes=["n0", "n0"], started=NOW - 60)
    w.job("p", "q1", gpus=2)
    ssn = open_session(w.snapshot, SchedulerConfig(actions=(), **config("lca", defaultReclaimMinRuntime="1h")))
    (valid,) = [v for v in ssn.hooks.reclaim_validators if "scenario_validator" in v.__qualname__]
    stmt = Statement(ssn)
    parts: dict[str, dict[str, list[Task]]] = {"parent": {}, "added": {}, "extra": {}}
    for i, (_gang, both, part) in enumerate(jobs):
        job = ssn.jobs[f"v{i}"]
        lost = job.tasks if both else job.tasks[:1]
        for t in lost:
            stmt.evict(t, "reclaim", "test", "p")
        parts[part][job.uid] = list(lost)
    # A gang always drops below its minimum; an elastic job only when it loses both pods.
    want = not any(gang or both for gang, both, _part in jobs)
    parent = RecordedJobs([t for ts in parts["parent"].values() for t in ts])
    child = parent.extended(parent.tasks + [t for ts in parts["added"].values() for t in ts],
                            [t for ts in parts["added"].values() for t in ts])
    assert child.parent is parent
    preemptor = ssn.jobs["p"]
    for base, extra in ((parent, parts["added"] | parts["extra"]), (child, parts["extra"])):
        victims = ScenarioVictims(base.by_job | extra, base, tuple(extra))
        plain = dict(victims)
        assert valid(ssn, preemptor, preemptor.tasks, plain) is want
        assert valid(ssn, preemptor, preemptor.tasks, victims) is want
        assert valid(ssn, preemptor, preemptor.tasks, victims) is want  # the kept verdict
