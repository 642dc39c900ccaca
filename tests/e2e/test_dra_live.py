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
from lightkube.resources.core_v1 import Pod

from .cluster import KEnv
from .dra_fixtures import (
    ResourceSlice,
    claims_by_pod,
    devices_of,
    dra_pod,
    gpu_driver,
    pod_group,
    request,
    template,
)
from .scheduler_fixtures import (  # noqa: F401
    ensure_queue,
    pod_state,
    shoal_runner,
    wait_until,
)

pytestmark = pytest.mark.e2e
BIG = 'device.capacity[device.driver].memory.compareTo(quantity("80Gi")) >= 0'
HUGE = 'device.capacity[device.driver].memory.compareTo(quantity("100Gi")) >= 0'


def test_dra_claim_allocated_before_bind_and_gang_that_cannot_fit_waits(kenv: KEnv, shoal_runner: Any) -> None:
    small, big = kenv.add_gpu_nodes(2, gpus=0)
    kenv.wait_nodes_ready([small, big])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    with gpu_driver(kenv, {small: ("40Gi", 1), big: ("80Gi", 1)}) as driver:
        template(kenv, "big", request(driver, BIG))
        sched = shoal_runner()
        dra_pod(kenv, "solo", sched.scheduler_name, queue, template="big")
        try:
            wait_until(lambda: pod_state(kenv.client, "solo", kenv.namespace)[0], 60, "solo bound")
        except AssertionError as e:
            state = pod_state(kenv.client, "solo", kenv.namespace)
            raise AssertionError(f"{e}\nclaims: {claims_by_pod(kenv)}\npod: {state}\nlog:\n{sched.tail()}") from None
        assert pod_state(kenv.client, "solo", kenv.namespace)[0] == big
        claim = claims_by_pod(kenv)["solo"]
        pod_uid = kenv.client.get(Pod, "solo", namespace=kenv.namespace).metadata.uid
        status = claim["status"]
        assert status["allocation"]["devices"]["results"] == [
            {"request": "gpu", "driver": driver, "pool": big, "device": "gpu-0"}]
        assert status["allocation"]["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [big]}]}]}
        assert status["reservedFor"] == [{"resource": "pods", "name": "solo", "uid": pod_uid}]
        assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]

        # Two pods of one gang, each needing an 80 GiB GPU: one exists (and solo holds it).
        pod_group(kenv, "pair", queue, 2)
        for i in range(2):
            dra_pod(kenv, f"pair-{i}", sched.scheduler_name, queue, template="big", group="pair")

        def waiting() -> bool:
            conds = [pod_state(kenv.client, f"pair-{i}", kenv.namespace)[2] for i in range(2)]
            return all(c is not None and c.reason == "Unschedulable" for c in conds)
        wait_until(waiting, 60, "the gang reported unschedulable")
        kenv.client.delete(Pod, "solo", namespace=kenv.namespace, grace_period=0)
        wait_until(lambda: "solo" not in claims_by_pod(kenv), 60, "solo's claim released and deleted")
        # The big GPU is free now, but the gang still needs two: it waits (a few cycles of 0.5 s) with
        # nothing allocated for it.
        time.sleep(3)
        assert waiting()
        message = pod_state(kenv.client, "pair-0", kenv.namespace)[2].message
        assert "DRA devices matching" in message, message
        claims = claims_by_pod(kenv)
        assert sorted(claims) == ["pair-0", "pair-1"]
        assert all(not (c.get("status") or {}).get("allocation") for c in claims.values()), claims
        assert all(pod_state(kenv.client, f"pair-{i}", kenv.namespace)[0] is None for i in range(2))


def test_a_pod_whose_template_does_not_exist_yet_waits_saying_so_then_binds(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=0)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    with gpu_driver(kenv, {node: ("80Gi", 1)}) as driver:
        sched = shoal_runner()
        dra_pod(kenv, "early", sched.scheduler_name, queue, template="later")

        def said(text: str) -> Any:
            cond = pod_state(kenv.client, "early", kenv.namespace)[2]
            return cond if cond is not None and cond.status == "False" and text in (cond.message or "") else None
        try:
            wait_until(lambda: said(f"resource claim template {kenv.namespace}/later (pod claim 'gpu') not found"),
                       60, "the pod reported waiting for its template")
        except AssertionError as e:
            raise AssertionError(f"{e}\nlog:\n{sched.tail()}") from None
        assert pod_state(kenv.client, "early", kenv.namespace)[0] is None
        template(kenv, "later", request(driver))
        # The resource-claim controller retries the pod (with back-off) and makes its claim; shoal binds it.
        wait_until(lambda: pod_state(kenv.client, "early", kenv.namespace)[0] == node, 90, "the pod bound")
        assert devices_of(claims_by_pod(kenv)["early"]) == [(node, "gpu-0")]


@pytest.mark.parametrize("per_device", [False, True], ids=["slice-selector", "per-device-selector"])
def test_a_claim_only_a_network_attached_device_satisfies_binds_where_it_reaches(
        kenv: KEnv, shoal_runner: Any, per_device: bool) -> None:
    rack = f"r-{kenv.node_prefix[-6:]}"
    (plain,) = kenv.add_gpu_nodes(1, gpus=0)
    (racked,) = kenv.add_gpu_nodes(1, gpus=0, labels={"e2e.shoal.dev/rack": rack})
    kenv.wait_nodes_ready([plain, racked])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    selector = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "e2e.shoal.dev/rack", "operator": "In", "values": [rack]}]}]}
    with gpu_driver(kenv, {plain: ("80Gi", 1)}) as driver:  # the plain node's own GPU is too small
        device: dict[str, Any] = {"name": "pooled-0", "capacity": {"memory": {"value": "192Gi"}}}
        where = {"perDeviceNodeSelection": True} if per_device else {"nodeSelector": selector}
        if per_device:
            device["nodeSelector"] = selector
        kenv.client.create(ResourceSlice(metadata={"name": rack}, spec={
            "driver": driver, **where, "pool": {"name": rack, "generation": 1, "resourceSliceCount": 1},
            "devices": [device]}))
        try:
            template(kenv, "huge", request(driver, HUGE))
            sched = shoal_runner()
            dra_pod(kenv, "far", sched.scheduler_name, queue, template="huge")
            try:
                wait_until(lambda: pod_state(kenv.client, "far", kenv.namespace)[0], 60, "the pod bound")
            except AssertionError as e:
                raise AssertionError(f"{e}\nclaims: {claims_by_pod(kenv)}\nlog:\n{sched.tail()}") from None
            assert pod_state(kenv.client, "far", kenv.namespace)[0] == racked
            alloc = claims_by_pod(kenv)["far"]["status"]["allocation"]
            assert devices_of(claims_by_pod(kenv)["far"]) == [(rack, "pooled-0")]
            assert alloc["nodeSelector"] == selector
        finally:
            kenv.client.delete(ResourceSlice, rack)
