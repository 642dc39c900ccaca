"""Helpers for the DRA e2e tests: the test plays a DRA driver (ResourceSlices on kwok nodes, a
DeviceClass) and makes pods that use ResourceClaims or ResourceClaimTemplates."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from .cluster import KEnv
from .scheduler_fixtures import create, pod_manifest

DeviceClass = create_global_resource("resource.k8s.io", "v1", "DeviceClass", "deviceclasses")
ResourceSlice = create_global_resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices")
ResourceClaim = create_namespaced_resource("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims")
ResourceClaimTemplate = create_namespaced_resource("resource.k8s.io", "v1", "ResourceClaimTemplate",
                                                   "resourceclaimtemplates")
FINALIZER = "resource.kubernetes.io/delete-protection"


def publish(kenv: KEnv, driver: str, node: str, memory: str, n: int = 1) -> str:
    """A ResourceSlice of `n` GPUs (`gpu-0`…) with `memory` each on `node`; returns its name."""
    name = f"{node}-{driver}"
    kenv.client.create(ResourceSlice(metadata={"name": name}, spec={
        "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "H100"}},
                     "capacity": {"memory": {"value": memory}}} for i in range(n)]}))
    return name


@contextmanager
def gpu_driver(kenv: KEnv, nodes: dict[str, tuple[str, int]]) -> Iterator[str]:
    """A DeviceClass named after a fresh driver and its slices (node -> (memory, GPUs)); yields the
    driver (= class) name; deletes the cluster-scoped objects afterwards."""
    driver = f"gpu-{kenv.node_prefix[-6:]}.e2e.shoal.dev"
    kenv.client.create(DeviceClass(metadata={"name": driver}, spec={
        "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}))
    slices = [publish(kenv, driver, node, memory, n) for node, (memory, n) in nodes.items()]
    try:
        yield driver
    finally:
        for name in slices:
            kenv.client.delete(ResourceSlice, name)
        kenv.client.delete(DeviceClass, driver)


def request(driver: str, *selectors: str, count: int = 1) -> dict[str, Any]:
    """A claim spec's `devices` with one request `gpu` of `count` devices of the class."""
    exactly: dict[str, Any] = {"deviceClassName": driver, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"requests": [{"name": "gpu", "exactly": exactly}]}


def template(kenv: KEnv, name: str, devices: dict[str, Any]) -> None:
    create(kenv, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                  "spec": {"spec": {"devices": devices}}})


def dra_pod(kenv: KEnv, name: str, scheduler: str, queue: str, *, template: str = "", claim: str = "",
            group: str = "") -> None:
    """A pod whose container uses one claim `gpu`: made from `template`, or the shared `claim`."""
    m = pod_manifest(name, scheduler, queue=queue, annotations={"pod-group-name": group} if group else None)
    source = {"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim}
    m["spec"]["resourceClaims"] = [{"name": "gpu", **source}]
    m["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    create(kenv, m)


def pod_group(kenv: KEnv, name: str, queue: str, min_member: int) -> None:
    create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": name},
                  "spec": {"minMember": min_member, "queue": queue}})


def claims_by_pod(kenv: KEnv) -> dict[str, Any]:
    """Claims made from templates, by the pod they were made for."""
    out = {}
    for c in kenv.client.list(ResourceClaim, namespace=kenv.namespace):
        owner = next((o for o in c["metadata"].get("ownerReferences") or [] if o["kind"] == "Pod"), None)
        if owner is not None:
            out[owner["name"]] = c
    return out


def devices_of(claim: Any) -> list[tuple[str, str]]:
    """(pool, device) of each allocation result of the claim (none if not allocated)."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [(r["pool"], r["device"]) for r in (alloc.get("devices") or {}).get("results") or []]
