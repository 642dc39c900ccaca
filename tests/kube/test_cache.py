"""The cache: informer events -> snapshot; other schedulers' pods, assumed binds, invalid objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shoal.cycle import run_cycle
from shoal.kube.cache import ClusterCache
from shoal.kube.client import PODS
from shoal.kube.informer import Gone, Informer
from shoal.kube.other_pods import OTHER_JOB
from shoal.model.status import PodStatus

SCHED = "kai-scheduler"


def node(name: str, gpus: int = 2) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": str(gpus), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, gpus: int = 1, scheduler: str = SCHED, node_name: str | None = None, rv: str = "1",
        annotations: dict[str, str] | None = None, queue: str = "q") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv,
                         "labels": {"kai.scheduler/queue": queue}, "annotations": annotations or {}},
            "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


def queue(name: str, parent: str = "", **gpu: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"gpu": {"quota": -1, "limit": -1, **gpu}}}
    if parent:
        spec["parentQueue"] = parent
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": spec}


@pytest.fixture
def cache() -> ClusterCache:
    c = ClusterCache(SCHED, lambda: 1000.0)
    c.on_queue("ADDED", None, queue("q"))
    c.on_node("ADDED", None, node("n1"))
    return c


def test_pod_without_podgroup_is_its_own_gang_in_its_queue(cache: ClusterCache) -> None:
    cache.on_pod("ADDED", None, pod("a"))
    snap = cache.snapshot()
    assert [(p.uid, p.job) for p in snap.pods] == [("uid-a", "pod:uid-a")]
    assert [(g.uid, g.queue, g.min_member) for g in snap.podgroups] == [("pod:uid-a", "q", 1)]
    d = run_cycle(snap).decisions
    assert [(b.pod, b.node) for b in d.binds] == [("uid-a", "n1")]


def test_pod_naming_a_podgroup_joins_it_by_namespace_and_name(cache: ClusterCache) -> None:
    cache.on_pod("ADDED", None, pod("a", annotations={"pod-group-name": "pg"}))
    cache.on_podgroup("ADDED", None, {"metadata": {"name": "pg", "namespace": "ns", "uid": "x"},
                                      "spec": {"minMember": 2, "queue": "q"}})
    snap = cache.snapshot()
    assert [p.job for p in snap.pods] == ["ns/pg"] and [g.uid for g in snap.podgroups] == ["ns/pg"]
    d = run_cycle(snap).decisions
    assert not d.binds and d.explanations["ns/pg"].reasons  # one pod of a gang of two: waits, explained


def test_other_schedulers_pods_use_node_capacity_but_are_never_ours(cache: ClusterCache) -> None:
    cache.on_pod("ADDED", None, pod("foreign", gpus=2, scheduler="default-scheduler", node_name="n1"))
    cache.on_pod("ADDED", None, pod("pending-foreign", scheduler="default-scheduler"))
    cache.on_pod("ADDED", None, pod("ours"))
    snap = cache.snapshot()
    assert snap.other_used == {"n1": {"cpu": 0, "memory": 0, "nvidia.com/gpu": 2}}
    assert OTHER_JOB in {g.uid for g in snap.podgroups}
    d = run_cycle(snap).decisions
    assert not d.binds and not d.evictions
    assert "uid-ours" not in cache.assumed and "pod:uid-ours" in d.explanations
    cache.on_pod("DELETED", pod("foreign", gpus=2, scheduler="default-scheduler", node_name="n1"), None)
    assert [b.pod for b in run_cycle(cache.snapshot()).decisions.binds] == ["uid-ours"]


def test_assumed_bind_holds_the_gpu_until_confirmed_or_forgotten(cache: ClusterCache) -> None:
    for name in ("a", "b", "c"):
        cache.on_pod("ADDED", None, pod(name))
    d = run_cycle(cache.snapshot()).decisions
    assert len(d.binds) == 2  # two GPUs
    for b in d.binds:
        cache.assume(b.pod, b.node, b.gpu_groups)
    again = run_cycle(cache.snapshot()).decisions
    assert not again.binds, "a GPU was promised twice"
    first = d.binds[0].pod
    cache.forget(first)
    assert len(run_cycle(cache.snapshot()).decisions.binds) == 1  # the forgotten GPU is free again
    # The watch confirms the other bind: the assumption is replaced by the real pod.
    other = d.binds[1]
    name = other.pod.removeprefix("uid-")
    cache.on_pod("MODIFIED", pod(name), pod(name, node_name=other.node, rv="2"))
    assert other.pod not in cache.assumed
    assert next(p for p in cache.snapshot().pods if p.uid == other.pod).status == PodStatus.RUNNING


def test_assumption_expires(cache: ClusterCache) -> None:
    now = [1000.0]
    cache.clock = lambda: now[0]
    cache.on_pod("ADDED", None, pod("a"))
    cache.assume("uid-a", "n1", ())
    assert cache.snapshot().pods[0].status == PodStatus.BINDING
    now[0] += 31
    assert cache.snapshot().pods[0].status == PodStatus.PENDING


def test_bad_pod_is_a_problem_and_others_still_schedule(cache: ClusterCache) -> None:
    cache.on_pod("ADDED", None, pod("bad", gpus=0, annotations={"gpu-fraction": "abc"}))
    cache.on_pod("ADDED", None, pod("good"))
    assert [p.message for p in cache.problems.values()] == ["annotation gpu-fraction='abc': not a number"]
    assert [b.pod for b in run_cycle(cache.snapshot()).decisions.binds] == ["uid-good"]
    fixed = pod("bad", gpus=0, annotations={"gpu-fraction": "0.5"}, rv="2")
    cache.on_pod("MODIFIED", None, fixed)
    assert not cache.problems


def test_invalid_queue_is_left_out_and_reported(cache: ClusterCache) -> None:
    cache.on_queue("ADDED", None, queue("neg", quota=-0.5))
    assert "neg" not in {q.name for q in cache.snapshot().queues}
    assert cache.problems[("Queue", "neg")].message.startswith("spec.resources.gpu.quota: -0.5")
    cache.on_pod("ADDED", None, pod("a", queue="neg"))
    ex = run_cycle(cache.snapshot()).decisions.explanations["pod:uid-a"]
    assert "QueueDoesNotExist" in ex.reasons


def test_invalid_podgroup_is_kept_as_an_invalid_gang(cache: ClusterCache) -> None:
    cache.on_podgroup("ADDED", None, {"metadata": {"name": "pg", "namespace": "ns", "uid": "x"},
                                      "spec": {"minMember": -3, "queue": "q"}})
    cache.on_pod("ADDED", None, pod("a", annotations={"pod-group-name": "pg"}))
    ex = run_cycle(cache.snapshot()).decisions.explanations["ns/pg"]
    assert "InvalidPodGroup" in ex.reasons and any("minMember" in m for m in ex.messages)


def test_node_heartbeat_does_not_wake_the_scheduler(cache: ClusterCache) -> None:
    cache.changed.clear()
    beat = copy.deepcopy(node("n1"))
    beat["metadata"]["resourceVersion"] = "2"
    cache.on_node("MODIFIED", node("n1"), beat)
    assert not cache.changed.is_set()
    cordoned = copy.deepcopy(beat)
    cordoned["spec"] = {"unschedulable": True}
    cache.on_node("MODIFIED", beat, cordoned)
    assert cache.changed.is_set()


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def __call__(self, kind: str, old: Any, new: Any) -> None:
        self.events.append((kind, (new or old)["metadata"]["name"]))


def test_informer_watch_events_bookmarks_and_410() -> None:
    rec = Recorder()
    inf = Informer(None, PODS, rec)  # type: ignore[arg-type]  # no client needed to apply events
    inf.apply({"type": "ADDED", "object": pod("a", rv="5")})
    inf.apply({"type": "MODIFIED", "object": pod("a", rv="6")})
    inf.apply({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}})
    assert inf.resource_version == "9" and rec.events == [("ADDED", "a"), ("MODIFIED", "a")]
    inf.apply({"type": "DELETED", "object": pod("a", rv="10")})
    assert rec.events[-1] == ("DELETED", "a") and not inf.store
    with pytest.raises(Gone):
        inf.apply({"type": "ERROR", "object": {"code": 410, "reason": "Expired"}})


def test_informer_relist_diffs_against_the_store() -> None:
    rec = Recorder()
    inf = Informer(None, PODS, rec)  # type: ignore[arg-type]
    for name in ("kept", "changed", "gone"):
        inf.apply({"type": "ADDED", "object": pod(name)})
    rec.events.clear()
    inf._replace({"ns/kept": pod("kept"), "ns/changed": pod("changed", rv="2"), "ns/new": pod("new")})
    assert sorted(rec.events) == [("ADDED", "new"), ("DELETED", "gone"), ("MODIFIED", "changed")]


def test_with_the_grouper_pending_pods_wait_for_their_podgroup(cache: ClusterCache) -> None:
    cache.require_podgroup = True
    cache.on_pod("ADDED", None, pod("a"))
    cache.on_pod("ADDED", None, pod("bound-before", node_name="n1"))
    assert list(cache.held) == ["uid-a"] and [p.uid for p in cache.snapshot().pods] == ["uid-bound-before"]
    grouped = pod("a", rv="2", annotations={"pod-group-name": "pg-a"})
    cache.on_pod("MODIFIED", pod("a"), grouped)
    assert not cache.held and cache.pods["uid-a"].job == "ns/pg-a"
    cache.on_pod("ADDED", None, pod("odd"))
    cache.mark_ungroupable("uid-odd")
    assert cache.pods["uid-odd"].job == "pod:uid-odd"  # falls back to a gang of one


def test_status_only_updates_are_not_re_derived(cache: ClusterCache) -> None:
    running = pod("a", node_name="n1")
    cache.on_pod("ADDED", None, running)
    before = cache.pods["uid-a"]
    cache.changed.clear()
    noisy = copy.deepcopy(running)
    noisy["metadata"]["resourceVersion"] = "2"
    noisy["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    noisy["status"]["podIP"] = "10.0.0.1"
    cache.on_pod("MODIFIED", running, noisy)
    assert cache.pods["uid-a"] is before and not cache.changed.is_set()
    done = copy.deepcopy(noisy)
    done["status"]["phase"] = "Succeeded"
    cache.on_pod("MODIFIED", noisy, done)
    assert cache.pods["uid-a"].status == PodStatus.SUCCEEDED and cache.changed.is_set()


def test_bound_pod_that_turns_invalid_still_holds_its_gpus(cache: ClusterCache) -> None:
    bound = pod("a", gpus=2, node_name="n1")
    cache.on_pod("ADDED", None, bound)
    edited = copy.deepcopy(bound)
    edited["metadata"]["annotations"] = {"gpu-memory": "lots"}
    edited["metadata"]["resourceVersion"] = "2"
    cache.on_pod("MODIFIED", bound, edited)
    assert ("Pod", "uid-a") in cache.problems and "uid-a" not in cache.pods
    cache.on_pod("ADDED", None, pod("b"))
    assert not run_cycle(cache.snapshot()).decisions.binds  # both GPUs of n1 are still taken


def test_last_node_deleted_is_an_ordinary_cycle(cache: ClusterCache) -> None:
    """Every node gone, a pod still bound to one and one pending: the service's cycle neither
    crashes nor evicts, and the pending gang is told why (issue #12)."""
    cache.on_pod("ADDED", None, pod("running", node_name="n1"))
    cache.on_pod("ADDED", None, pod("waiting"))
    cache.on_node("DELETED", node("n1"), None)
    d = run_cycle(cache.snapshot()).decisions
    assert not d.binds and not d.evictions
    assert any("no nodes in the cluster" in m for m in d.explanations["pod:uid-waiting"].messages)
