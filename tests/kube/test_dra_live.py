"""Live DRA (#17) against the fake API: claims, slices and classes into the snapshot, devices chosen
by CEL selectors, `status.allocation` / `reservedFor` written before the bind, shared claims."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.cycle import run_cycle
from shoal.framework.decisions import Bind
from shoal.kai.dra import CLAIM_FINALIZER, claim_from, pod_claim_names
from shoal.kube.applier import Applier, ApplyStats
from shoal.kube.cache import ClusterCache
from shoal.kube.dra import AllocationError, DraCache, node_selector_matches
from shoal.kube.dra_alloc import DraAllocator

from .fake_api import FakeApi
from .test_cache import SCHED, node, pod, queue

DRIVER = "gpu.example.com"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"


def gpu_slice(node_name: str, memory: str, n: int = 2) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": "A100"}},
                "capacity": {"memory": {"value": memory}}} for i in range(n)]
    return {"metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name, "pool": {"name": node_name, "generation": 1},
                     "devices": devices}}


def claim(name: str, selectors: tuple[str, ...] = (), count: int = 1, labels: dict[str, str] | None = None,
          **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com", "count": count, **extra}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    # A claim not made from the pod's template is shared: it carries the job's queue label (KAI's rule).
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1",
                         "labels": {"kai.scheduler/queue": "q"} if labels is None else labels},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def dra_pod(name: str, claim_name: str) -> dict[str, Any]:
    obj = pod(name, gpus=0)
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return obj


def world(*claims: dict[str, Any]) -> tuple[FakeApi, ClusterCache, DraCache, Applier]:
    api = FakeApi()
    cache = ClusterCache(SCHED, lambda: 1000.0)
    cache.on_queue("ADDED", None, queue("q"))
    dra = DraCache(on_change=cache._touch)
    for n, mem in (("n1", "40Gi"), ("n2", "80Gi")):
        cache.on_node("ADDED", None, node(n, gpus=0))
        dra.on_resource_slice("ADDED", None, gpu_slice(n, mem))
    dra.on_device_class("ADDED", None, {"metadata": {"name": "gpu.example.com"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    for c in claims:
        api.put(f"{CLAIMS}/{c['metadata']['name']}", c)
        dra.on_resource_claim("ADDED", None, api.objects[f"{CLAIMS}/{c['metadata']['name']}"])
    applier = Applier(api, cache, SCHED)
    applier.dra = DraAllocator(api, dra, lambda n: {})
    return api, cache, dra, applier


def test_a_template_claim_is_named_by_the_pod_status_once_made() -> None:
    obj = pod("p")
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                                     {"name": "shared", "resourceClaimName": "team"}]
    assert pod_claim_names(obj)[1] == "team" and "not created yet" in pod_claim_names(obj)[0]
    obj["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-x7"}]
    assert pod_claim_names(obj) == ("p-gpu-x7", "team")


def test_a_cel_selector_on_memory_picks_the_node_with_big_gpus() -> None:
    big = claim("big", ('device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) >= 0',))
    _, cache, dra, _ = world(big)
    cache.on_pod("ADDED", None, dra_pod("p", "big"))
    snap = cache.snapshot()
    dra.fill(snap)
    assert snap.resource_claims[("ns", "big")].eligible == ("n2/gpu-0", "n2/gpu-1")
    assert {n.name: n.allocatable["nvidia.com/gpu"] for n in snap.nodes} == {"n1": 2, "n2": 2}
    assert next(p for p in snap.pods if p.name == "p").dra_gpus == 1
    (b,) = run_cycle(snap).decisions.binds
    assert b.node == "n2"


def test_an_unsatisfiable_claim_stays_pending_with_a_message() -> None:
    huge = claim("huge", ('device.capacity["gpu.example.com"].memory >= quantity("200Gi")',))
    _, cache, dra, _ = world(huge)
    cache.on_pod("ADDED", None, dra_pod("p", "huge"))
    snap = cache.snapshot()
    dra.fill(snap)
    d = run_cycle(snap).decisions
    assert not d.binds
    text = " ".join(m for ex in d.explanations.values() for m in ex.messages)
    assert "resource claim ns/huge cannot be satisfied: 0 devices in the cluster match its requests, 1 wanted" in text


async def test_allocation_and_reservation_are_written_before_the_bind() -> None:
    api, cache, _, applier = world(claim("c1"), claim("c2"))
    for name, c in (("a", "c1"), ("b", "c2")):
        cache.on_pod("ADDED", None, dra_pod(name, c))
    b1, b2 = (Bind(f"uid-{n}", n, "ns", f"pod:uid-{n}", "n1") for n in ("a", "b"))
    await applier.apply_placements([b1, b2], [], ApplyStats())
    kinds = [(c.method, c.path.rsplit("/", 1)[-1]) for c in api.calls]
    assert kinds.index(("PATCH", "status")) < kinds.index(("POST", "binding"))
    devices = set()
    for name in ("c1", "c2"):
        obj = api.objects[f"{CLAIMS}/{name}"]
        assert CLAIM_FINALIZER in obj["metadata"]["finalizers"]
        (res,) = obj["status"]["allocation"]["devices"]["results"]
        devices.add(res["device"])
        assert res["pool"] == "n1" and res["driver"] == DRIVER
        terms = obj["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert terms[0]["matchFields"][0]["values"] == ["n1"]
    assert devices == {"gpu-0", "gpu-1"}  # two claims never get one device
    assert api.objects[f"{CLAIMS}/c1"]["status"]["reservedFor"] == [{"resource": "pods", "name": "a", "uid": "uid-a"}]


async def test_a_shared_claim_is_reserved_for_each_pod_and_allocated_once() -> None:
    api, _, dra, _ = world(claim("team", labels={"kai.scheduler/queue": "q"}))
    alloc = DraAllocator(api, dra, lambda n: {})
    for n in ("a", "b"):
        await alloc.prepare(Bind(f"uid-{n}", n, "ns", "ns/pg", "n2"), ("team",))
    obj = api.objects[f"{CLAIMS}/team"]
    assert [r["name"] for r in obj["status"]["reservedFor"]] == ["a", "b"]
    assert len(obj["status"]["allocation"]["devices"]["results"]) == 1
    assert len(api.sent("PATCH", "/status")) == 2


async def test_a_restarted_scheduler_never_gives_an_allocated_device_again() -> None:
    api, _, dra, _ = world(claim("c1", count=2))
    await DraAllocator(api, dra, lambda n: {}).prepare(Bind("uid-a", "a", "ns", "pod:a", "n1"), ("c1",))
    fresh = DraCache()  # a new process lists what the first one wrote
    for o in (gpu_slice("n1", "40Gi"), gpu_slice("n2", "80Gi")):
        fresh.on_resource_slice("ADDED", None, o)
    fresh.on_device_class("ADDED", None, {"metadata": {"name": "gpu.example.com"}, "spec": {}})
    fresh.on_resource_claim("ADDED", None, api.objects[f"{CLAIMS}/c1"])
    fresh.on_resource_claim("ADDED", None, claim("c2"))
    with pytest.raises(AllocationError, match="0 free matching devices"):
        fresh.choose(claim_from(claim("c2")), "n1", {})
    results, _, _ = fresh.choose(claim_from(claim("c2")), "n2", {})
    assert results[0]["pool"] == "n2"


def test_all_mode_admin_access_and_network_attached_devices() -> None:
    dra = DraCache()
    dra.on_device_class("ADDED", None, {"metadata": {"name": "gpu.example.com"}, "spec": {}})
    dra.on_resource_slice("ADDED", None, gpu_slice("n1", "40Gi", n=3))
    net = gpu_slice("x", "1Gi", n=1)
    del net["spec"]["nodeName"]
    net["metadata"]["name"], net["spec"]["pool"]["name"] = "rack", "rack"
    net["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    dra.on_resource_slice("ADDED", None, net)
    every, _, _ = dra.choose(claim_from(claim("all", allocationMode="All")), "n1", {})
    assert len(every) == 3
    results, selector, _ = dra.choose(claim_from(claim("c", count=4)), "n1", {"rack": "r1"})
    assert {r["pool"] for r in results} == {"n1", "rack"}
    assert selector is not None and selector["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]
    with pytest.raises(AllocationError):
        dra.choose(claim_from(claim("c", count=4)), "n1", {"rack": "r2"})
    assert node_selector_matches(net["spec"]["nodeSelector"], "n9", {"rack": "r1"})
    admin = claim_from(claim("adm", adminAccess=True))
    assert admin.to_model(None).count == 0


async def test_a_claim_allocated_on_another_node_refuses_the_bind() -> None:
    api, _, dra, _ = world(claim("team"))
    alloc = DraAllocator(api, dra, lambda n: {})
    await alloc.prepare(Bind("uid-a", "a", "ns", "ns/pg", "n1"), ("team",))
    with pytest.raises(AllocationError, match="allocated for other nodes"):
        await alloc.prepare(Bind("uid-b", "b", "ns", "ns/pg", "n2"), ("team",))
    with pytest.raises(AllocationError, match="allocated for other nodes"):  # even a pod reserved already
        await alloc.prepare(Bind("uid-a", "a", "ns", "ns/pg", "n2"), ("team",))


async def test_class_and_claim_configs_are_copied_into_the_allocation() -> None:
    c = claim("cfg")
    c["spec"]["devices"]["config"] = [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {"b": 2}}}]
    api, _, dra, _ = world(c)
    dra.on_device_class("MODIFIED", None, {"metadata": {"name": "gpu.example.com"}, "spec": {
        "config": [{"opaque": {"driver": DRIVER, "parameters": {"a": 1}}}]}})
    await DraAllocator(api, dra, lambda n: {}).prepare(Bind("uid-a", "a", "ns", "pod:a", "n1"), ("cfg",))
    assert api.objects[f"{CLAIMS}/cfg"]["status"]["allocation"]["devices"]["config"] == [
        {"source": "FromClass", "requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {"a": 1}}},
        {"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {"b": 2}}}]


def template_pod(name: str, template: str) -> dict[str, Any]:
    obj = pod(name, gpus=0)
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return obj


def test_a_pod_waits_for_its_template_claim_saying_so_then_binds_once_it_is_made() -> None:
    _, cache, dra, _ = world()
    dra.on_resource_claim_template("ADDED", None, {"metadata": {"name": "two", "namespace": "ns"}, "spec": {
        "spec": claim("x", count=2)["spec"]}})
    cache.on_pod("ADDED", None, template_pod("p", "two"))
    cache.on_pod("ADDED", None, template_pod("q", "nope"))
    snap = cache.snapshot()
    dra.fill(snap)
    assert {p.name: p.dra_gpus for p in snap.pods} == {"p": 2, "q": 0}  # counted from the template
    d = run_cycle(snap).decisions
    assert not d.binds
    text = {ex_key: " ".join(ex.messages) for ex_key, ex in d.explanations.items()}
    assert any("waiting for the resource claim of pod claim 'gpu' to be made from template ns/two" in m
               for m in text.values()), text
    assert any("resource claim template ns/nope (pod claim 'gpu') not found" in m for m in text.values()), text

    # The resource-claim controller makes p's claim from the template and names it in p's status.
    made = claim("p-gpu-abc12", count=2, labels={})
    made["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}]
    dra.on_resource_claim("ADDED", None, made)
    obj = template_pod("p", "two")
    obj["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-abc12"}]
    cache.on_pod("MODIFIED", None, obj)
    snap = cache.snapshot()
    dra.fill(snap)
    assert [(b.name, b.node) for b in run_cycle(snap).decisions.binds] in ([("p", "n1")], [("p", "n2")])
    dra.on_resource_claim_template("DELETED", None, {"metadata": {"name": "two", "namespace": "ns"}})
    assert not dra.templates


async def test_a_failed_bind_unreserves_and_deallocates_its_claims() -> None:
    api, cache, dra, applier = world(claim("c1"), claim("c2"))
    cache.on_pod("ADDED", None, dra_pod("a", "c1"))
    api.fail("POST", "/binding", 500)
    stats = ApplyStats()
    await applier.apply_placements([Bind("uid-a", "a", "ns", "pod:uid-a", "n1")], [], stats)
    assert stats.bind_failed == 1
    kinds = [(c.method, c.path.rsplit("/", 1)[-1]) for c in api.calls if "/binding" in c.path or "claims" in c.path]
    # finalizer, allocation + reservation, the failed binding, then un-reserve and the finalizer removed
    assert kinds == [("PATCH", "c1"), ("PATCH", "status"), ("POST", "binding"), ("PATCH", "status"), ("PATCH", "c1")]
    obj = api.objects[f"{CLAIMS}/c1"]
    assert "allocation" not in obj["status"] and "reservedFor" not in obj["status"]
    assert CLAIM_FINALIZER not in (obj["metadata"].get("finalizers") or [])
    snap = cache.snapshot()
    dra.fill(snap)  # the cache took the answers: the next cycle sees the claim free, any node allowed
    assert snap.resource_claims[("ns", "c1")].allocated == () and snap.resource_claims[("ns", "c1")].reserved_for == 0
    assert run_cycle(snap).decisions.binds

    # A pod with two claims whose second cannot be allocated: the first is undone too.
    bad = dra_pod("b", "c2")
    bad["spec"]["resourceClaims"].insert(0, {"name": "one", "resourceClaimName": "c1"})
    cache.on_pod("ADDED", None, bad)
    api.fail("PATCH", "c2/status", 409)
    await applier.apply_placements([Bind("uid-b", "b", "ns", "pod:uid-b", "n2")], [], stats)
    assert stats.bind_failed == 2 and not api.sent("POST", "/binding")[1:]
    assert "allocation" not in api.objects[f"{CLAIMS}/c1"]["status"]
    assert not dra.claims[("ns", "c1")].allocated and not dra.claims[("ns", "c2")].allocated


async def test_a_failed_bind_keeps_a_shared_claim_for_its_other_pods_and_a_conflict_keeps_all() -> None:
    api, cache, _, applier = world(claim("team"))
    for n in ("a", "b", "c"):
        cache.on_pod("ADDED", None, dra_pod(n, "team"))
    stats = ApplyStats()
    await applier.apply_placements([Bind("uid-a", "a", "ns", "ns/pg", "n1")], [], stats)
    api.fail("POST", "/binding", 500)
    await applier.apply_placements([Bind("uid-b", "b", "ns", "ns/pg", "n1")], [], stats)
    obj = api.objects[f"{CLAIMS}/team"]
    assert [r["name"] for r in obj["status"]["reservedFor"]] == ["a"]  # b dropped, a kept
    assert len(obj["status"]["allocation"]["devices"]["results"]) == 1
    assert CLAIM_FINALIZER in obj["metadata"]["finalizers"]
    # 409 on the binding: the pod is bound already (an answer lost); its reservation stays.
    api.fail("POST", "/binding", 409)
    await applier.apply_placements([Bind("uid-c", "c", "ns", "ns/pg", "n1")], [], stats)
    assert stats.bind_failed == 2 and stats.bound == 1
    assert [r["name"] for r in api.objects[f"{CLAIMS}/team"]["status"]["reservedFor"]] == ["a", "c"]


async def test_a_claim_only_a_network_attached_device_satisfies_binds_where_it_reaches() -> None:
    huge = claim("huge", ('device.capacity["gpu.example.com"].memory >= quantity("200Gi")',))
    api, cache, dra, applier = world(huge)
    labelled = node("n2", gpus=0)
    labelled["metadata"]["labels"] = {"rack": "r1"}
    cache.on_node("MODIFIED", None, labelled)
    applier.dra = DraAllocator(api, dra, lambda n: dict(cache.nodes[n].labels))
    net = gpu_slice("x", "256Gi", n=1)
    del net["spec"]["nodeName"]
    net["metadata"]["name"], net["spec"]["pool"]["name"] = "rack", "rack"
    net["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    dra.on_resource_slice("ADDED", None, net)
    cache.on_pod("ADDED", None, dra_pod("p", "huge"))
    snap = cache.snapshot()
    dra.fill(snap)
    model = snap.resource_claims[("ns", "huge")]
    assert model.eligible == ("rack/gpu-0",) and model.network and model.gpus == 0
    assert next(p for p in snap.pods if p.name == "p").dra_gpus == 0  # not a GPU of the node
    assert next(sl for sl in snap.resource_slices if sl.name == "rack").reach == ("n2",)
    (b,) = run_cycle(snap).decisions.binds
    assert b.node == "n2"
    cache.assume(b.pod, b.node, b.gpu_groups)
    await applier.apply_placements([b], [], ApplyStats())
    alloc = api.objects[f"{CLAIMS}/huge"]["status"]["allocation"]
    assert alloc["devices"]["results"][0]["pool"] == "rack"
    assert alloc["nodeSelector"] == net["spec"]["nodeSelector"]
