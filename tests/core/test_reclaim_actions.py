"""Table tests of the eviction actions on small hand-built clusters (whole GPUs)."""

from __future__ import annotations

import pytest

from .reclaim_world import NOW, World, evicted_jobs, statuses


def two_queues() -> World:
    """4 GPUs on one node, all used by q0 (quota 0); q1 has quota 4 and one pending 2-GPU job."""
    w = World().node("n0", 4).queue("q0", quota=0).queue("q1", quota=4)
    for name in "abcd":
        w.job(name, "q0", nodes=["n0"])
    return w


@pytest.mark.parametrize(("world", "actions", "evicted", "preemptor", "want"), [
    pytest.param(two_queues().job("p", "q1", gpus=2), ("reclaim",), {"c", "d"}, "p-0", "Pipelined",
                 id="reclaim-takes-newest-victims-of-over-share-queue"),
    pytest.param(two_queues().job("p", "q1", gpus=5), ("reclaim",), set(), "p-0", "Pending",
                 id="reclaim-nothing-when-the-job-cannot-fit-anyway"),
    pytest.param(World().node("n0", 2).queue("q0", quota=1).queue("q1", quota=1)
                 .job("a", "q0", nodes=["n0"]).job("b", "q1", nodes=["n0"]).job("p", "q1"),
                 ("reclaim",), set(), "p-0", "Pending", id="no-reclaim-from-queue-within-its-share"),
    pytest.param(World().node("n0", 2).queue("q0", quota=0).queue("q1", quota=2)
                 .job("a", "q0", nodes=["n0", "n0"], tasks=2, priority=100).job("p", "q1", gpus=2),
                 ("reclaim",), set(), "p-0", "Pending", id="non-preemptible-job-is-never-a-victim"),
    pytest.param(World().node("n0", 2).queue("q0", quota=2)
                 .job("low", "q0", nodes=["n0", "n0"], tasks=2, priority=50).job("p", "q0", gpus=2, priority=100),
                 ("preempt",), {"low"}, "p-0", "Pipelined", id="preempt-lower-priority-whole-gang"),
    pytest.param(World().node("n0", 2).queue("q0", quota=2)
                 .job("same", "q0", nodes=["n0", "n0"], tasks=2, priority=100).job("p", "q0", gpus=2, priority=100),
                 ("preempt",), set(), "p-0", "Pending", id="preempt-never-equal-priority"),
    pytest.param(World().node("n0", 2).queue("q0", quota=2).queue("q1", quota=2)
                 .job("other", "q1", nodes=["n0", "n0"], tasks=2).job("p", "q0", gpus=2, priority=100),
                 ("preempt",), set(), "p-0", "Pending", id="preempt-stays-inside-the-queue"),
    pytest.param(World().node("n0", 2).queue("q0", quota=1)
                 .job("low", "q0", nodes=["n0", "n0"], tasks=2).job("p", "q0", gpus=2, priority=100),
                 ("preempt",), set(), "p-0", "Pending", id="non-preemptible-preemptor-only-within-quota"),
    pytest.param(World().node("n0", 2).node("n1", 2).queue("q0", quota=4)
                 .job("a", "q0", nodes=["n0"]).job("b", "q0", nodes=["n1"]).job("p", "q0", gpus=2),
                 ("consolidation",), {"b"}, "p-0", "Pipelined", id="consolidation-moves-the-newest-pod"),
    pytest.param(World().node("n0", 2).node("n1", 2).queue("q0", quota=4)
                 .job("a", "q0", nodes=["n0"]).job("b", "q0", nodes=["n1"]).job("p", "q0", gpus=2),
                 ("consolidation",), set(), "p-0", "Pending", id="consolidation-off-with-zero-preemptees"),
    pytest.param(World().node("n0", 2).node("n1", 2).queue("q0", quota=4)
                 .job("a", "q0", nodes=["n0", "n1"], tasks=2).job("b", "q0", nodes=["n0", "n1"], tasks=2)
                 .job("p", "q0", gpus=2),
                 ("consolidation",), set(), "p-0", "Pending", id="consolidation-never-kills"),
])
def test_actions(world: World, actions: tuple[str, ...], evicted: set[str], preemptor: str, want: str,
                 request: pytest.FixtureRequest) -> None:
    extra = {"max_consolidation_preemptees": 0} if "zero-preemptees" in request.node.name else {}
    result = world.run(*actions, **extra)
    assert evicted_jobs(result) == evicted
    assert statuses(result)[preemptor] == want
    if "consolidation" in actions:
        assert all(result.session.tasks[e.pod].status.title == "Pipelined" for e in result.decisions.evictions)


def test_moved_victim_is_evicted_from_its_old_node_and_pipelined_to_the_new() -> None:
    w = (World().node("n0", 2).node("n1", 2).queue("q0", quota=4)
         .job("a", "q0", nodes=["n0"]).job("b", "q0", nodes=["n1"]).job("p", "q0", gpus=2))
    d = w.run("consolidation").decisions
    assert [(e.pod, e.node) for e in d.evictions] == [("b-0", "n1")]
    assert sorted((p.pod, p.node) for p in d.pipelines) == [("b-0", "n0"), ("p-0", "n1")]


@pytest.mark.parametrize(("stale_for", "grace", "evicted"), [
    pytest.param(None, 0.0, True, id="stale-now-grace-zero"),
    pytest.param(None, 60.0, False, id="stale-now-grace-60"),
    pytest.param(120.0, 60.0, True, id="stale-long-ago"),
    pytest.param(120.0, -1.0, False, id="negative-grace-never-evicts"),
])
def test_stale_gang_eviction(stale_for: float | None, grace: float, evicted: bool) -> None:
    w = World().node("n0", 4).queue("q0").job("g", "q0", tasks=2, nodes=["n0", "n0"])
    w.snapshot.pods[1].status = type(w.snapshot.pods[1].status).PENDING
    w.snapshot.pods[1].node = None
    if stale_for is not None:
        w.snapshot.podgroups[0].stale_since = NOW - stale_for
    result = w.run("stalegangeviction", staleness_grace_seconds=grace)
    assert (evicted_jobs(result) == {"g"}) is evicted
    # A gang found stale now gets its stale-since time; an older one keeps it.
    assert result.decisions.stale_since == ({"g": NOW} if stale_for is None else {})


def test_healthy_gang_clears_its_stale_time() -> None:
    w = World().node("n0", 4).queue("q0").job("g", "q0", tasks=2, nodes=["n0", "n0"])
    w.snapshot.podgroups[0].stale_since = NOW - 10
    result = w.run("stalegangeviction", staleness_grace_seconds=0.0)
    assert result.decisions.stale_since == {"g": None}
    assert not result.decisions.evictions


@pytest.mark.parametrize(("queue_runtime", "started_ago", "evicted"), [
    pytest.param(None, 10.0, {"c", "d"}, id="no-min-runtime"),
    pytest.param(600.0, 10.0, set(), id="protected-for-ten-minutes"),
    pytest.param(600.0, 3600.0, {"c", "d"}, id="protection-over"),
])
def test_reclaim_min_runtime(queue_runtime: float | None, started_ago: float, evicted: set[str]) -> None:
    w = World().node("n0", 4).queue("dep", quota=0, reclaim_min_runtime=queue_runtime)
    w.queue("q0", quota=0, parent="dep").queue("q1", quota=4)
    for name in "abcd":
        w.job(name, "q0", nodes=["n0"], started=NOW - started_ago)
    w.job("p", "q1", gpus=2)
    assert evicted_jobs(w.run("reclaim")) == evicted


def test_reclaim_across_a_three_level_tree() -> None:
    """root departments -> teams -> leaf queues: the starved leaf under one department takes GPUs
    back from a leaf two levels down in the other department, which is above its share."""
    w = World().node("n0", 4)
    w.queue("d1", quota=2).queue("d2", quota=2)
    w.queue("t1", quota=2, parent="d1").queue("t2", quota=2, parent="d2")
    w.queue("a", quota=2, parent="t1").queue("b", quota=2, parent="t2")
    for name in "wxyz":
        w.job(name, "b", nodes=["n0"])
    w.job("p", "a", gpus=2)
    result = w.run("reclaim")
    assert evicted_jobs(result) == {"y", "z"}
    assert statuses(result)["p-0"] == "Pipelined"
