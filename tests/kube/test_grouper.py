"""The pod grouper against a fake API: owner chain, PodGroup create-or-update, pod annotation,
and the fallback to a gang of one when the workload map refuses the pod."""

from __future__ import annotations

from typing import Any

from shoal.kube.cache import ClusterCache
from shoal.kube.grouper import OWNER_CACHE_MIN, PodGrouper, needs_grouping, owner_path
from shoal.workloads.owners import OwnerKey

from .fake_api import FakeApi
from .test_cache import SCHED, pod

JOB_PATH = "/apis/batch/v1/namespaces/ns/jobs/train"
POD_PATH = "/api/v1/namespaces/ns/pods/a"
PODGROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/ns/podgroups"


def owned_pod(owner: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = pod("a")
    obj["metadata"]["ownerReferences"] = [owner or {"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                                    "uid": "job-uid", "controller": True}]
    return obj


def world() -> tuple[FakeApi, ClusterCache, PodGrouper]:
    api = FakeApi()
    api.put(JOB_PATH, {"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": "train", "namespace": "ns", "uid": "job-uid"}, "spec": {}})
    api.put(POD_PATH, owned_pod())
    cache = ClusterCache(SCHED, lambda: 0.0)
    return api, cache, PodGrouper(api, cache)


def test_owner_paths() -> None:
    assert owner_path(OwnerKey("batch/v1", "Job", "train", "ns")) == JOB_PATH
    assert owner_path(OwnerKey("v1", "Pod", "p", "ns")) == "/api/v1/namespaces/ns/pods/p"


def test_only_our_unbound_unannotated_pods_need_a_group() -> None:
    assert needs_grouping(pod("a"), SCHED)
    assert not needs_grouping(pod("a", scheduler="other"), SCHED)
    assert not needs_grouping(pod("a", node_name="n1"), SCHED)
    assert not needs_grouping(pod("a", annotations={"pod-group-name": "pg"}), SCHED)


async def test_a_job_pod_gets_its_podgroup_and_the_annotation() -> None:
    api, _, grouper = world()
    await grouper.group(owned_pod())
    assert [c.path for c in api.sent("GET")] == [JOB_PATH]
    (created,) = api.sent("POST", "/podgroups")
    name = created.body["metadata"]["name"]
    assert name == "pg-a-job-uid" and created.body["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert api.objects[POD_PATH]["metadata"]["annotations"]["pod-group-name"] == name
    assert grouper.grouped == 1


async def test_owners_are_looked_up_once_per_ttl() -> None:
    api, _, grouper = world()
    await grouper.group(owned_pod())
    await grouper.group(owned_pod())
    assert len(api.sent("GET", JOB_PATH)) == 1


async def test_an_existing_podgroup_with_another_spec_is_updated() -> None:
    api, _, grouper = world()
    api.put(f"{PODGROUPS}/pg-a-job-uid", {"metadata": {"name": "pg-a-job-uid", "namespace": "ns"},
                                          "spec": {"minMember": 7}})
    await grouper.group(owned_pod())
    assert len(api.sent("PATCH", "/podgroups/pg-a-job-uid")) == 1
    assert api.objects[f"{PODGROUPS}/pg-a-job-uid"]["spec"]["minMember"] == 1  # a Job's pods need no gang


async def test_a_refused_workload_falls_back_to_a_gang_of_one() -> None:
    api, cache, grouper = world()
    bad = owned_pod({"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid"})
    bad["metadata"]["ownerReferences"].append({"apiVersion": "batch/v1", "kind": "Job", "name": "other",
                                               "uid": "x"})  # two owners, no controller: ambiguous
    await grouper.group(bad)
    assert "uid-a" in cache.ungroupable and not api.sent("POST", "/podgroups")
    (event,) = api.sent("POST", "/events")
    assert event.body["reason"] == "PodGrouperError"


async def test_the_owner_cache_forgets_expired_owners() -> None:
    """Owners (Jobs) come and go for ever: expired entries must not pile up."""
    api, _, grouper = world()
    grouper.owner_ttl = 0.0  # every entry expired as soon as written
    for i in range(5 * OWNER_CACHE_MIN):
        await grouper._owner(OwnerKey("batch/v1", "Job", f"job-{i}", "ns"))
    assert len(grouper._owners) <= OWNER_CACHE_MIN
    assert len(api.sent("GET")) == 5 * OWNER_CACHE_MIN
