"""Device choice for claims with `firstAvailable` alternatives and `matchAttribute` constraints
(#17), in the adapter (`DraCache.choose`, the allocation written before the bind) and in the core's
view (`ResourceClaim.nodes`: where the claim can be met at all)."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.cycle import run_cycle
from shoal.framework.decisions import Bind
from shoal.kai.dra import claim_from
from shoal.kube.cache import ClusterCache
from shoal.kube.dra import AllocationError, DraCache
from shoal.kube.dra_alloc import DraAllocator
from shoal.model.node import Node
from shoal.model.snapshot import ClusterSnapshot

from .fake_api import FakeApi
from .test_cache import SCHED, node, queue
from .test_dra_live import CLAIMS, DRIVER, dra_pod

BIG = 'device.capacity["gpu.example.com"].memory >= quantity("80Gi")'


def slice_of(node_name: str, *devices: tuple[str, str]) -> dict[str, Any]:
    """A slice of `node_name` with devices (model, memory) named gpu-0…; `numa` is the index's parity."""
    return {"metadata": {"name": f"{node_name}-gpus"}, "spec": {
        "driver": DRIVER, "nodeName": node_name, "pool": {"name": node_name, "generation": 1},
        "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": m}, "numa": {"int": i % 2}},
                     "capacity": {"memory": {"value": mem}}} for i, (m, mem) in enumerate(devices)]}}


def claim_obj(name: str, requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None
              ) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1",
                         "labels": {"kai.scheduler/queue": "q"}}, "spec": {"devices": devices}}


def exactly(name: str, count: int = 1, *selectors: str) -> dict[str, Any]:
    ex: dict[str, Any] = {"deviceClassName": DRIVER, "count": count}
    if selectors:
        ex["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": ex}


def cache_with(*slices: dict[str, Any]) -> DraCache:
    dra = DraCache()
    dra.on_device_class("ADDED", None, {"metadata": {"name": DRIVER}, "spec": {"config": [
        {"opaque": {"driver": DRIVER, "parameters": {"a": 1}}}]}})
    for sl in slices:
        dra.on_resource_slice("ADDED", None, sl)
    return dra


def test_first_available_takes_the_first_alternative_the_node_can_meet() -> None:
    dra = cache_with(slice_of("n1", ("A100", "40Gi"), ("A100", "40Gi")), slice_of("n2", ("H100", "80Gi")))
    c = claim_from(claim_obj("c", [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": DRIVER, "selectors": [{"cel": {"expression": BIG}}]},
        {"name": "two-small", "deviceClassName": DRIVER, "count": 2}]}]))
    results, _, chosen = dra.choose(c, "n2", {})
    assert [(r["request"], r["pool"], r["device"]) for r in results] == [("gpu/big", "n2", "gpu-0")]
    results, _, chosen = dra.choose(c, "n1", {})
    assert [(r["request"], r["device"]) for r in results] == [("gpu/two-small", "gpu-0"), ("gpu/two-small", "gpu-1")]
    assert [r.name for r in chosen] == ["gpu/two-small"]
    assert c.to_model(None).count == 1  # the core counts the fewest devices an alternative takes
    with pytest.raises(AllocationError, match=r"request gpu/big .* 0 free matching devices for n3"):
        dra.choose(c, "n3", {})


async def test_the_allocation_of_a_subrequest_names_it_in_results_and_class_config() -> None:
    api = FakeApi()
    dra = cache_with(slice_of("n1", ("A100", "40Gi")))
    obj = claim_obj("c", [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": DRIVER, "selectors": [{"cel": {"expression": BIG}}]},
        {"name": "small", "deviceClassName": DRIVER}]}])
    api.put(f"{CLAIMS}/c", obj)
    dra.on_resource_claim("ADDED", None, api.objects[f"{CLAIMS}/c"])
    await DraAllocator(api, dra, lambda n: {}).prepare(Bind("uid-a", "a", "ns", "pod:a", "n1"), ("c",))
    alloc = api.objects[f"{CLAIMS}/c"]["status"]["allocation"]["devices"]
    assert alloc["results"] == [{"request": "gpu/small", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]
    assert alloc["config"] == [{"source": "FromClass", "requests": ["gpu/small"],
                                "opaque": {"driver": DRIVER, "parameters": {"a": 1}}}]


def test_match_attribute_keeps_a_request_on_devices_with_one_value() -> None:
    # n1: numa 0 and 1; n2: gpu-0 and gpu-2 on numa 0 (gpu-1 on numa 1).
    dra = cache_with(slice_of("n1", ("A100", "40Gi"), ("A100", "40Gi")),
                     slice_of("n2", ("A100", "40Gi"), ("A100", "40Gi"), ("A100", "40Gi")))
    c = claim_from(claim_obj("c", [exactly("gpu", 2)], [{"matchAttribute": f"{DRIVER}/numa"}]))
    with pytest.raises(AllocationError, match=r"share gpu\.example\.com/numa"):
        dra.choose(c, "n1", {})
    results, _, _ = dra.choose(c, "n2", {})
    assert [r["device"] for r in results] == ["gpu-0", "gpu-2"]


def test_match_attribute_across_requests_backtracks_to_a_value_both_can_share() -> None:
    """One X100 and three Y100: `a` (one device) alone would take the X100, which leaves `b` (two of the
    same model) nothing; the search goes back and gives both Y100s."""
    dra = cache_with(slice_of("n1", ("X100", "40Gi"), ("Y100", "40Gi"), ("Y100", "40Gi"), ("Y100", "40Gi")))
    c = claim_from(claim_obj("c", [exactly("a"), exactly("b", 2)],
                             [{"requests": ["a", "b"], "matchAttribute": "model"}]))
    results, _, _ = dra.choose(c, "n1", {})
    assert [(r["request"], r["device"]) for r in results] == [("a", "gpu-1"), ("b", "gpu-2"), ("b", "gpu-3")]
    c3 = claim_from(claim_obj("c3", [exactly("a", 2), exactly("b", 2)], [{"matchAttribute": "model"}]))
    with pytest.raises(AllocationError, match="matchAttribute"):
        dra.choose(c3, "n1", {})  # four of one model: none


def test_the_core_places_a_constrained_claim_only_where_it_can_be_met() -> None:
    cache = ClusterCache(SCHED, lambda: 1000.0)
    cache.on_queue("ADDED", None, queue("q"))
    dra = cache_with(slice_of("n1", ("A100", "40Gi"), ("A100", "40Gi")),
                     slice_of("n2", ("A100", "40Gi"), ("A100", "40Gi"), ("A100", "40Gi")))
    for n in ("n1", "n2"):
        cache.on_node("ADDED", None, node(n, gpus=0))
    dra.on_resource_claim("ADDED", None, claim_obj("c", [exactly("gpu", 2)], [{"matchAttribute": "numa"}]))
    dra.on_resource_claim("ADDED", None, claim_obj("never", [exactly("gpu", 3)], [{"matchAttribute": "numa"}]))
    cache.on_pod("ADDED", None, dra_pod("p", "c"))
    cache.on_pod("ADDED", None, dra_pod("q", "never"))
    snap = cache.snapshot()
    dra.fill(snap)
    assert snap.resource_claims[("ns", "c")].nodes == ("n2",)
    assert snap.resource_claims[("ns", "never")].nodes == ()
    d = run_cycle(snap).decisions
    assert [(b.name, b.node) for b in d.binds] == [("p", "n2")]  # n1 has two free devices, on two NUMA nodes
    text = " ".join(m for ex in d.explanations.values() for m in ex.messages)
    assert "resource claim ns/never cannot be satisfied on any node" in text


def test_a_claim_of_a_gpu_and_a_nic_counts_only_the_gpus_as_gpus() -> None:
    nic = {"name": "nic", "exactly": {"deviceClassName": "nic.example.com"}}
    mixed = claim_from(claim_obj("m", [exactly("gpu", 2), nic])).to_model(None)
    assert (mixed.count, mixed.gpus) == (3, 2)
    nic_first = claim_from(claim_obj("n", [nic, exactly("gpu", 2)])).to_model(None)
    assert (nic_first.count, nic_first.gpus) == (3, 2)
    plain = claim_from(claim_obj("p", [exactly("a", 2), exactly("b")])).to_model(None)
    assert (plain.count, plain.gpus, plain.gpu_count) == (3, 3, None)


def test_distinct_attribute_gives_each_device_its_own_value_across_requests() -> None:
    # n1: gpu-0 (numa 0), gpu-1 (numa 1), gpu-2 (numa 0), gpu-3 (numa 1)
    dra = cache_with(slice_of("n1", *[("A100", "40Gi")] * 4))
    two = claim_from(claim_obj("c", [exactly("gpu", 2)], [{"distinctAttribute": "numa"}]))
    results, _, _ = dra.choose(two, "n1", {})
    assert [r["device"] for r in results] == ["gpu-0", "gpu-1"]
    across = claim_from(claim_obj("x", [exactly("a"), exactly("b")], [{"requests": ["a", "b"], "distinctAttribute":
                                                                       f"{DRIVER}/numa"}]))
    results, _, _ = dra.choose(across, "n1", {})
    assert [(r["request"], r["device"]) for r in results] == [("a", "gpu-0"), ("b", "gpu-1")]
    three = claim_from(claim_obj("t", [exactly("gpu", 3)], [{"distinctAttribute": "numa"}]))
    with pytest.raises(AllocationError, match=r"have distinct numa \(distinctAttribute\)"):
        dra.choose(three, "n1", {})  # two NUMA nodes only
    assert claim_from(claim_obj("u", [exactly("a")], [{"requests": ["a"]}])).unsupported


def test_a_tainted_device_serves_only_requests_that_tolerate_its_taint() -> None:
    sl = slice_of("n1", ("A100", "40Gi"), ("A100", "40Gi"))
    sl["spec"]["devices"][0]["taints"] = [{"key": "health", "value": "degraded", "effect": "NoSchedule"}]
    sl["spec"]["devices"][1]["taints"] = [{"key": "note", "value": "x", "effect": "None"}]  # not a blocking effect
    dra = cache_with(sl)
    plain = claim_from(claim_obj("p", [exactly("gpu", 2)]))
    with pytest.raises(AllocationError, match="1 free matching devices for n1, 2 wanted"):
        dra.choose(plain, "n1", {})
    assert dra.eligible(plain) == ("n1/gpu-1",)
    for toleration in ({"key": "health", "operator": "Exists"}, {"key": "health", "value": "degraded"},
                       {"operator": "Exists", "effect": "NoSchedule"}):
        req = exactly("gpu", 2)
        req["exactly"]["tolerations"] = [toleration]
        results, _, _ = dra.choose(claim_from(claim_obj("t", [req])), "n1", {})
        assert [r["device"] for r in results] == ["gpu-0", "gpu-1"], toleration
    for wrong in ({"key": "health", "value": "ok"}, {"key": "health", "operator": "Exists", "effect": "NoExecute"}):
        req = exactly("gpu", 2)
        req["exactly"]["tolerations"] = [wrong]
        with pytest.raises(AllocationError):
            dra.choose(claim_from(claim_obj("w", [req])), "n1", {})


@pytest.mark.parametrize(("expr", "want"), [
    ('device.attributes["gpu.example.com"].driverVersion.compareTo(semver("550.0.0")) >= 0', ["n1/gpu-0"]),
    ('device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("550.54.15"))', ["n1/gpu-1"]),
    ('device.attributes["gpu.example.com"].driverVersion == semver("550.54.15")', ["n1/gpu-0"]),
    ('device.attributes["gpu.example.com"].driverVersion.major() == 535', ["n1/gpu-1"]),
    ('semver("1.0.0-rc.2").isLessThan(semver("1.0.0")) && semver("1.0.0-rc.2").isGreaterThan(semver("1.0.0-rc.10"))'
     ' == false && semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))', ["n1/gpu-0", "n1/gpu-1"]),
    ('isSemver("1.2") || device.attributes["gpu.example.com"].driverVersion.compareTo(semver("x")) == 0', []),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("30Gi"))', ["n1/gpu-0", "n1/gpu-1"]),
])
def test_semantic_versions_in_cel_selectors(expr: str, want: list[str]) -> None:
    sl = slice_of("n1", ("A100", "40Gi"), ("A100", "40Gi"))
    sl["spec"]["devices"][0]["attributes"]["driverVersion"] = {"version": "550.54.15"}
    sl["spec"]["devices"][1]["attributes"]["driverVersion"] = {"version": "535.104.5"}
    dra = cache_with(sl)
    assert list(dra.eligible(claim_from(claim_obj("c", [exactly("gpu", 1, expr)])))) == want


def partitioned(node_name: str) -> list[dict[str, Any]]:
    """One 40 GiB GPU of `node_name` as three devices sharing its counter set: whole, half-0, half-1."""
    def uses(gib: int) -> list[dict[str, Any]]:
        return [{"counterSet": "gpu-0", "counters": {"memory": {"value": f"{gib}Gi"}}}]
    pool = {"name": node_name, "generation": 1, "resourceSliceCount": 2}
    return [{"metadata": {"name": f"{node_name}-counters"}, "spec": {
                "driver": DRIVER, "nodeName": node_name, "pool": pool,
                "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}},
            {"metadata": {"name": f"{node_name}-parts"}, "spec": {
                "driver": DRIVER, "nodeName": node_name, "pool": pool, "devices": [
                    {"name": name, "attributes": {"size": {"string": size}}, "consumesCounters": uses(gib)}
                    for name, size, gib in (("whole", "whole", 40), ("half-0", "half", 20), ("half-1", "half", 20))]}}]


def allocated(dra: DraCache, name: str, *devices: str) -> None:
    obj = claim_obj(name, [exactly("gpu", len(devices))])
    obj["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": d} for d in devices]}}}
    dra.on_resource_claim("ADDED", None, obj)


def test_partitions_of_one_device_are_never_allocated_beyond_its_shared_counters() -> None:
    dra = cache_with(*partitioned("n1"))
    halves = claim_from(claim_obj("h", [exactly("gpu", 2, 'device.attributes["gpu.example.com"].size == "half"')]))
    results, _, _ = dra.choose(halves, "n1", {})
    assert [r["device"] for r in results] == ["half-0", "half-1"]
    anything = claim_from(claim_obj("a", [exactly("gpu", 2)]))
    with pytest.raises(AllocationError, match="shared counters of the free matching devices on n1 are used up"):
        dra.choose(anything, "n1", {})  # the whole GPU, then no room for a half
    allocated(dra, "w", "whole")
    one_half = claim_from(claim_obj("o", [exactly("gpu", 1, 'device.attributes["gpu.example.com"].size == "half"')]))
    with pytest.raises(AllocationError, match="used up"):
        dra.choose(one_half, "n1", {})
    # The core sees no partition the whole GPU's allocation leaves no room for.
    snap = ClusterSnapshot(now=0.0)
    dra.fill(snap)
    assert {sl.name: sl.devices for sl in snap.resource_slices} == {"n1-counters": (), "n1-parts": ("whole",)}
    dra.on_resource_claim("DELETED", None, claim_obj("w", []))
    allocated(dra, "x", "half-0")
    results, _, _ = dra.choose(one_half, "n1", {})
    assert [r["device"] for r in results] == ["half-1"]


def test_a_device_consuming_a_counter_set_its_pool_lacks_is_never_allocated() -> None:
    _, parts = partitioned("n1")
    dra = cache_with(parts)  # the counter sets' slice not published (yet)
    with pytest.raises(AllocationError, match="used up"):
        dra.choose(claim_from(claim_obj("a", [exactly("gpu")])), "n1", {})


def test_each_cel_expression_is_evaluated_once_per_device_until_its_slice_changes() -> None:
    dra = cache_with(slice_of("n1", ("A100", "40Gi"), ("H100", "80Gi")), slice_of("n2", ("A100", "40Gi")))
    calls: list[tuple[str, ...]] = []
    real = dra.selectors.match

    def counting(exprs: tuple[str, ...], driver: str, dev: Any) -> bool:
        calls.append(exprs)
        return real(exprs, driver, dev)
    dra.selectors.match = counting  # type: ignore[method-assign]
    for i in range(20):  # claims from one template
        dra.on_resource_claim("ADDED", None, claim_obj(f"c{i}", [exactly("gpu", 1, BIG)]))
    snap = ClusterSnapshot(now=0.0)
    dra.fill(snap)
    assert len(calls) == 3  # the request's expression on three devices (the class has none)
    assert snap.resource_claims[("ns", "c7")].eligible == ("n1/gpu-1",)
    dra.on_resource_slice("MODIFIED", None, slice_of("n2", ("H100", "80Gi")))
    dra.fill(ClusterSnapshot(now=0.0))
    assert len(calls) == 4  # only the replaced slice's device again


def test_per_device_node_selection_places_each_device_where_it_says() -> None:
    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    obj = {"metadata": {"name": "mixed"}, "spec": {
        "driver": DRIVER, "pool": {"name": "mixed", "generation": 1}, "perDeviceNodeSelection": True, "devices": [
            {"name": "local", "nodeName": "n1", "capacity": {"memory": {"value": "40Gi"}}},
            {"name": "racked", "nodeSelector": rack, "capacity": {"memory": {"value": "80Gi"}}},
            {"name": "anywhere", "allNodes": True, "capacity": {"memory": {"value": "80Gi"}}}]}}
    dra = cache_with(obj)
    assert sorted(dra.slices) == ["mixed/anywhere", "mixed/local", "mixed/racked"]
    big = claim_from(claim_obj("b", [exactly("gpu", 2, BIG)]))
    results, selector, _ = dra.choose(big, "n2", {"rack": "r1"})
    assert [r["device"] for r in results] == ["racked", "anywhere"] and selector == rack
    with pytest.raises(AllocationError, match="1 free matching devices for n1, 2 wanted"):
        dra.choose(big, "n1", {})
    snap = ClusterSnapshot(now=0.0, nodes=[Node("n1", {}), Node("n2", {}, labels={"rack": "r1"})])
    dra.fill(snap)
    assert {sl.name: (sl.node, sl.reach) for sl in snap.resource_slices} == {
        "mixed/local": ("n1", None), "mixed/racked": ("", ("n2",)), "mixed/anywhere": ("", ("n1", "n2"))}
    dra.on_resource_slice("DELETED", None, obj)
    assert not dra.slices
