"""`shoal run` allocates DRA devices as kube-scheduler's DynamicResources plugin does (issue #17).

The test plays a DRA driver: it publishes a ResourceSlice per kwok node (one GPU each, 40 GiB and
80 GiB) and a DeviceClass. Pods ask for a GPU through a ResourceClaimTemplate with a CEL selector on
memory; the real kube-controller-manager's resource-claim controller makes their claims. shoal
writes `status.allocation` and `status.reservedFor` before the bind; a gang of two pods that cannot
both get the one big GPU stays pending with nothing allocated.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.core_v1 import Pod

from .cluster import KEnv
from .scheduler_fixtures import (  # noqa: F401
    PodGroupRes,
    create,
    ensure_queue,
    pod_manifest,
    pod_state,
    shoal_runner,
    wait_until,
)

pytestmark = pytest.mark.e2e
DeviceClass = create_global_resource("resource.k8s.io", "v1", "DeviceClass", "deviceclasses")
ResourceSlice = create_global_resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices")
ResourceClaim = create_namespaced_resource("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims")
ResourceClaimTemplate = create_namespaced_resource("resource.k8s.io", "v1", "ResourceClaimTemplate",
                                                   "resourceclaimtemplates")
BIG = 'device.capacity[device.driver].memory.compareTo(quantity("80Gi")) >= 0'


def _publish(kenv: KEnv, driver: str, node: str, memory: str) -> str:
    name = f"{node}-{driver}"
    kenv.client.create(ResourceSlice(metadata={"name": name}, spec={
        "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "H100"}},
                     "capacity": {"memory": {"value": memory}}}]}))
    return name


def _dra_pod(kenv: KEnv, name: str, scheduler: str, queue: str, template: str, group: str = "") -> None:
    m = pod_manifest(name, scheduler, queue=queue, annotations={"pod-group-name": group} if group else None)
    m["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    m["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    create(kenv, m)


def _claims(kenv: KEnv) -> dict[str, Any]:
    """Claims by the pod they were made for."""
    out = {}
    for c in kenv.client.list(ResourceClaim, namespace=kenv.namespace):
        owner = next(o for o in c["metadata"].get("ownerReferences") or [] if o["kind"] == "Pod")
        out[owner["name"]] = c
    return out


def test_dra_claim_allocated_before_bind_and_gang_that_cannot_fit_waits(kenv: KEnv, shoal_runner: Any) -> None:
    s = kenv.node_prefix[-6:]
    small, big = kenv.add_gpu_nodes(2, gpus=0)
    kenv.wait_nodes_ready([small, big])
    driver, queue = f"gpu-{s}.e2e.shoal.dev", f"q-{s}"
    ensure_queue(kenv.client, queue)
    kenv.client.create(DeviceClass(metadata={"name": driver}, spec={
        "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}))
    slices = [_publish(kenv, driver, small, "40Gi"), _publish(kenv, driver, big, "80Gi")]
    create(kenv, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "big"},
                  "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                      "deviceClassName": driver, "selectors": [{"cel": {"expression": BIG}}]}}]}}}})
    try:
        sched = shoal_runner()
        _dra_pod(kenv, "solo", sched.scheduler_name, queue, "big")
        try:
            wait_until(lambda: pod_state(kenv.client, "solo", kenv.namespace)[0], 60, "solo bound")
        except AssertionError as e:
            raise AssertionError(f"{e}\nclaims: {_claims(kenv)}\npod: {pod_state(kenv.client, 'solo', kenv.namespace)}"
                                 f"\nshoal log:\n{sched.tail()}") from None
        assert pod_state(kenv.client, "solo", kenv.namespace)[0] == big
        claim = _claims(kenv)["solo"]
        pod_uid = kenv.client.get(Pod, "solo", namespace=kenv.namespace).metadata.uid
        status = claim["status"]
        assert status["allocation"]["devices"]["results"] == [
            {"request": "gpu", "driver": driver, "pool": big, "device": "gpu-0"}]
        assert status["allocation"]["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [big]}]}]}
        assert status["reservedFor"] == [{"resource": "pods", "name": "solo", "uid": pod_uid}]
        assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]

        # Two pods of one gang, each needing an 80 GiB GPU: one exists (and solo holds it).
        create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pair"},
                      "spec": {"minMember": 2, "queue": queue}})
        for i in range(2):
            _dra_pod(kenv, f"pair-{i}", sched.scheduler_name, queue, "big", group="pair")

        def waiting() -> bool:
            conds = [pod_state(kenv.client, f"pair-{i}", kenv.namespace)[2] for i in range(2)]
            return all(c is not None and c.reason == "Unschedulable" for c in conds)
        wait_until(waiting, 60, "the gang reported unschedulable")
        kenv.client.delete(Pod, "solo", namespace=kenv.namespace, grace_period=0)
        wait_until(lambda: "solo" not in _claims(kenv), 60, "solo's claim released and deleted")
        # The big GPU is free now, but the gang still needs two: it waits (a few cycles of 0.5 s) with
        # nothing allocated for it.
        time.sleep(3)
        assert waiting()
        message = pod_state(kenv.client, "pair-0", kenv.namespace)[2].message
        assert "DRA devices matching" in message, message
        claims = _claims(kenv)
        assert sorted(claims) == ["pair-0", "pair-1"]
        assert all(not (c.get("status") or {}).get("allocation") for c in claims.values()), claims
        assert all(pod_state(kenv.client, f"pair-{i}", kenv.namespace)[0] is None for i in range(2))
    finally:
        for name in slices:
            kenv.client.delete(ResourceSlice, name)
        kenv.client.delete(DeviceClass, driver)
