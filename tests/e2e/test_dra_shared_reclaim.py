"""DRA in `shoal run` (#17), beyond one pod and one claim: a ResourceClaim shared by the pods of a
gang, quota reclaim that frees DRA GPUs, and a claim no device can satisfy.

The test is the DRA driver (slices on kwok nodes); the real kube-controller-manager's
resource-claim controller makes template claims and releases claims whose pods are gone.
"""

from __future__ import annotations

from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod

from .cluster import KEnv
from .dra_fixtures import (
    FINALIZER,
    ResourceClaim,
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
    create,
    ensure_queue,
    events_for,
    pod_state,
    shoal_runner,
    wait_until,
)

pytestmark = pytest.mark.e2e
HUGE = 'device.capacity[device.driver].memory.isGreaterThan(quantity("100Gi"))'


def _uid(kenv: KEnv, name: str) -> str:
    return str(kenv.client.get(Pod, name, namespace=kenv.namespace).metadata.uid)


def _team(kenv: KEnv) -> Any:
    return kenv.client.get(ResourceClaim, "team", namespace=kenv.namespace)


def test_a_claim_shared_by_a_gang_is_allocated_once_and_released_after_the_last_pod(
        kenv: KEnv, shoal_runner: Any) -> None:
    nodes = kenv.add_gpu_nodes(2, gpus=0)
    kenv.wait_nodes_ready(nodes)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    with gpu_driver(kenv, {n: ("80Gi", 2) for n in nodes}) as driver:
        # A shared GPU claim carries the job's queue (KAI's rule for claims not made from a template).
        create(kenv, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": "team", "labels": {"kai.scheduler/queue": queue}},
                      "spec": {"devices": request(driver)}})
        sched = shoal_runner()
        pod_group(kenv, "crew", queue, 2)
        for i in range(2):
            dra_pod(kenv, f"crew-{i}", sched.scheduler_name, queue, claim="team", group="crew")
        try:
            wait_until(lambda: all(pod_state(kenv.client, f"crew-{i}", kenv.namespace)[0] for i in range(2)),
                       60, "the gang bound")
        except AssertionError as e:
            raise AssertionError(f"{e}\nclaim: {_team(kenv)}\nshoal log:\n{sched.tail()}") from None
        where = {pod_state(kenv.client, f"crew-{i}", kenv.namespace)[0] for i in range(2)}
        status = _team(kenv)["status"]
        ((pool, _),) = devices_of(_team(kenv))  # one device, allocated once for both pods
        assert where == {pool}, (where, status)
        assert status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [pool]
        assert sorted(r["uid"] for r in status["reservedFor"]) == sorted(_uid(kenv, f"crew-{i}") for i in range(2))
        assert FINALIZER in _team(kenv)["metadata"]["finalizers"]

        last = _uid(kenv, "crew-1")
        kenv.client.delete(Pod, "crew-0", namespace=kenv.namespace, grace_period=0)
        wait_until(lambda: [r["uid"] for r in _team(kenv)["status"].get("reservedFor") or []] == [last], 60,
                   "crew-0 dropped from reservedFor")
        assert devices_of(_team(kenv)) == [(pool, devices_of(_team(kenv))[0][1])]  # still allocated
        kenv.client.delete(Pod, "crew-1", namespace=kenv.namespace, grace_period=0)
        wait_until(lambda: not devices_of(_team(kenv)) and FINALIZER not in (
            _team(kenv)["metadata"].get("finalizers") or []), 60, "the claim deallocated after the last pod")
        assert not _team(kenv)["status"].get("reservedFor")


def test_reclaim_frees_dra_gpus_for_the_queue_under_its_quota(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=0)
    kenv.wait_nodes_ready([node])
    suffix = kenv.node_prefix[-6:]
    greedy, starved = f"greedy-{suffix}", f"starved-{suffix}"
    for q in (greedy, starved):
        ensure_queue(kenv.client, q, gpu_quota=2)
    with gpu_driver(kenv, {node: ("80Gi", 4)}) as driver:
        template(kenv, "one", request(driver))
        sched = shoal_runner()
        hogs = [f"hog-{i}" for i in range(4)]
        for name in hogs:
            dra_pod(kenv, name, sched.scheduler_name, greedy, template="one")
        wait_until(lambda: all(pod_state(kenv.client, n, kenv.namespace)[1] == "Running" for n in hogs), 60,
                   "the greedy queue holding all 4 DRA GPUs")
        held = {n: devices_of(c) for n, c in claims_by_pod(kenv).items()}
        assert sorted(d for ds in held.values() for d in ds) == [(node, f"gpu-{i}") for i in range(4)], held
        for i in range(2):
            dra_pod(kenv, f"fair-{i}", sched.scheduler_name, starved, template="one")
        try:
            wait_until(lambda: all(pod_state(kenv.client, f"fair-{i}", kenv.namespace)[1] == "Running"
                                   for i in range(2)), 90, "the starved queue's pods Running after reclaim")
        except AssertionError as e:
            raise AssertionError(f"{e}\nclaims: {claims_by_pod(kenv)}\nshoal log:\n{sched.tail()}") from None
        left = sorted(p.metadata.name for p in kenv.client.list(Pod, namespace=kenv.namespace)
                      if p.metadata.name.startswith("hog-"))
        assert len(left) == 2, left  # the greedy queue keeps its quota
        claims = claims_by_pod(kenv)
        assert sorted(claims) == sorted([*left, "fair-0", "fair-1"])  # the victims' claims went with them
        devices = [d for c in claims.values() for d in devices_of(c)]
        assert len(devices) == 4 and len(set(devices)) == 4, claims  # each claim its own device, none twice
        assert all(devices_of(claims[f"fair-{i}"]) for i in range(2))


def test_a_claim_no_device_satisfies_leaves_the_pod_pending_saying_which_and_why(
        kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=0)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    with gpu_driver(kenv, {node: ("80Gi", 2)}) as driver:
        template(kenv, "huge", request(driver, HUGE))
        sched = shoal_runner()
        dra_pod(kenv, "greedy", sched.scheduler_name, queue, template="huge")

        def unschedulable() -> Any:
            cond = pod_state(kenv.client, "greedy", kenv.namespace)[2]
            return cond if cond is not None and cond.status == "False" and cond.reason == "Unschedulable" else None
        cond = wait_until(unschedulable, 60, "PodScheduled=False")
        claim = claims_by_pod(kenv)["greedy"]["metadata"]["name"]
        assert f"resource claim {kenv.namespace}/{claim}" in cond.message, cond.message
        assert "0 devices in the cluster match its requests, 1 wanted" in cond.message, cond.message
        assert pod_state(kenv.client, "greedy", kenv.namespace)[0] is None
        assert not devices_of(claims_by_pod(kenv)["greedy"])


def test_first_available_and_constraints_are_allocated_as_the_api_server_accepts(
        kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=0)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    with gpu_driver(kenv, {}) as driver:
        # gpu-0, gpu-2, gpu-4 on NUMA node 0, gpu-1, gpu-3 on 1; none big enough for the preferred alternative
        kenv.client.create(ResourceSlice(metadata={"name": f"{node}-numa"}, spec={
            "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}", "attributes": {"numa": {"int": i % 2}},
                         "capacity": {"memory": {"value": "40Gi"}}} for i in range(5)]}))
        try:
            template(kenv, "pair", {
                "requests": [{"name": "gpu", "firstAvailable": [
                    {"name": "huge", "deviceClassName": driver, "selectors": [{"cel": {"expression": HUGE}}]},
                    {"name": "two", "deviceClassName": driver, "count": 2}]}],
                "constraints": [{"matchAttribute": f"{driver}/numa"}]})
            template(kenv, "spread", {**request(driver, count=2), "constraints": [
                {"requests": ["gpu"], "distinctAttribute": f"{driver}/numa"}]})
            sched = shoal_runner()
            dra_pod(kenv, "numa", sched.scheduler_name, queue, template="pair")
            try:
                wait_until(lambda: pod_state(kenv.client, "numa", kenv.namespace)[0], 60, "the pod bound")
            except AssertionError as e:
                raise AssertionError(f"{e}\nclaims: {claims_by_pod(kenv)}\nlog:\n{sched.tail()}") from None
            results = claims_by_pod(kenv)["numa"]["status"]["allocation"]["devices"]["results"]
            assert [(r["request"], r["device"]) for r in results] == [("gpu/two", "gpu-0"), ("gpu/two", "gpu-2")]
            # Two devices on different NUMA nodes among gpu-1 (1), gpu-3 (1) and gpu-4 (0).
            dra_pod(kenv, "apart", sched.scheduler_name, queue, template="spread")
            wait_until(lambda: pod_state(kenv.client, "apart", kenv.namespace)[0], 60, "the second pod bound")
            assert devices_of(claims_by_pod(kenv)["apart"]) == [(node, "gpu-1"), (node, "gpu-4")]
        finally:
            kenv.client.delete(ResourceSlice, f"{node}-numa")


def test_a_tainted_device_is_given_only_to_a_claim_that_tolerates_it(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=0)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    with gpu_driver(kenv, {}) as driver:
        kenv.client.create(ResourceSlice(metadata={"name": f"{node}-tainted"}, spec={
            "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "taints": [{"key": "health", "value": "degraded", "effect": "NoSchedule"}]},
                        {"name": "gpu-1"}]}))
        try:
            assert kenv.client.get(ResourceSlice, f"{node}-tainted")["spec"]["devices"][0].get("taints"), \
                "the API server dropped device taints (DRADeviceTaints off)"
            template(kenv, "plain", request(driver))
            tolerant = request(driver)
            tolerant["requests"][0]["exactly"]["tolerations"] = [{"key": "health", "operator": "Exists"}]
            template(kenv, "tolerant", tolerant)
            sched = shoal_runner()
            dra_pod(kenv, "careful", sched.scheduler_name, queue, template="plain")
            wait_until(lambda: pod_state(kenv.client, "careful", kenv.namespace)[0], 60, "the plain pod bound")
            assert devices_of(claims_by_pod(kenv)["careful"]) == [(node, "gpu-1")]
            dra_pod(kenv, "brave", sched.scheduler_name, queue, template="tolerant")
            wait_until(lambda: pod_state(kenv.client, "brave", kenv.namespace)[0], 60, "the tolerant pod bound")
            assert devices_of(claims_by_pod(kenv)["brave"]) == [(node, "gpu-0")]
        finally:
            kenv.client.delete(ResourceSlice, f"{node}-tainted")


def test_partitions_of_a_gpu_wait_until_the_whole_gpu_is_released(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=0)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
    slices = {f"{node}-counters": {"sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]},
              f"{node}-parts": {"devices": [
                  {"name": name, "attributes": {"size": {"string": size}},
                   "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": f"{gib}Gi"}}}]}
                  for name, size, gib in (("whole", "whole", 40), ("half-0", "half", 20), ("half-1", "half", 20))]}}
    with gpu_driver(kenv, {}) as driver:
        for name, spec in slices.items():
            kenv.client.create(ResourceSlice(metadata={"name": name}, spec={
                "driver": driver, "nodeName": node, "pool": pool, **spec}))
        try:
            for size in ("whole", "half"):
                template(kenv, size, request(driver, f'device.attributes[device.driver].size == "{size}"'))
            sched = shoal_runner()
            dra_pod(kenv, "big", sched.scheduler_name, queue, template="whole")
            wait_until(lambda: pod_state(kenv.client, "big", kenv.namespace)[0], 60, "the whole-GPU pod bound")
            dra_pod(kenv, "small", sched.scheduler_name, queue, template="half")

            def unschedulable() -> Any:
                cond = pod_state(kenv.client, "small", kenv.namespace)[2]
                return cond if cond is not None and cond.reason == "Unschedulable" else None
            cond = wait_until(unschedulable, 60, "the half-GPU pod reported unschedulable")
            assert "DRA devices" in cond.message, cond.message
            assert not devices_of(claims_by_pod(kenv)["small"])
            kenv.client.delete(Pod, "big", namespace=kenv.namespace, grace_period=0)
            wait_until(lambda: pod_state(kenv.client, "small", kenv.namespace)[0] == node, 90,
                       "the half-GPU pod bound once the whole GPU is released")
            assert devices_of(claims_by_pod(kenv)["small"]) == [(node, "half-0")]
            assert not [e for e in events_for(kenv.client, "small", kenv.namespace, "FailedBinding")]
        finally:
            for name in slices:
                kenv.client.delete(ResourceSlice, name)
