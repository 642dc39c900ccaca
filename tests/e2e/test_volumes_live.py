"""`shoal run` binds volumes as kube-scheduler's VolumeBinding does (issue #16; kubernetes#86262).

With the real kube-controller-manager's PV controller: a claim of a `WaitForFirstConsumer` class
is bound to the static local PV whose node affinity fits the node shoal picks (shoal pre-binds
the PV, the controller binds the claim); a dynamically provisioned claim gets the
`volume.kubernetes.io/selected-node` annotation before its pod is bound (this test plays the
external provisioner); a claim of an `Immediate` class keeps its pod waiting until bound.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from lightkube import ApiError, codecs
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim
from lightkube.resources.storage_v1 import StorageClass

from .cluster import KEnv
from .scheduler_fixtures import create, ensure_queue, pod_manifest, pod_state, shoal_runner, wait_until  # noqa: F401

pytestmark = pytest.mark.e2e
SELECTED = "volume.kubernetes.io/selected-node"


def _storage_class(kenv: KEnv, name: str, provisioner: str, mode: str, zones: list[str] | None = None) -> None:
    sc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                          "provisioner": provisioner, "volumeBindingMode": mode}
    if zones:
        sc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "e2e.shoal.dev/zone", "values": zones}]}]
    kenv.client.create(codecs.from_dict(sc))


def _pv(kenv: KEnv, name: str, sc: str, node: str | None, claim: str | None = None) -> None:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                            "storageClassName": sc, "persistentVolumeReclaimPolicy": "Retain",
                            "local": {"path": "/mnt/disk"}}
    if node:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
    else:
        spec.pop("local")
        spec["hostPath"] = {"path": "/tmp/x"}
    if claim:
        spec["claimRef"] = {"namespace": kenv.namespace, "name": claim}
    kenv.client.create(codecs.from_dict({"apiVersion": "v1", "kind": "PersistentVolume",
                                          "metadata": {"name": name}, "spec": spec}))


def _pvc(kenv: KEnv, name: str, sc: str, size: str = "1Gi") -> None:
    create(kenv, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                  "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                           "resources": {"requests": {"storage": size}}}})


def _pod(kenv: KEnv, name: str, scheduler: str, queue: str, claim: str) -> None:
    m = pod_manifest(name, scheduler, queue=queue)
    m["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    create(kenv, m)


def _phase(kenv: KEnv, claim: str) -> str | None:
    pvc = kenv.client.get(PersistentVolumeClaim, claim, namespace=kenv.namespace)
    return pvc.status.phase if pvc.status else None


def _waiting(kenv: KEnv, pod: str) -> bool:
    node, _, cond = pod_state(kenv.client, pod, kenv.namespace)
    return node is None and cond is not None and cond.reason == "Unschedulable"


def test_volumes_static_dynamic_and_immediate(kenv: KEnv, shoal_runner: Any) -> None:
    s = kenv.node_prefix[-6:]
    nodes = kenv.add_gpu_nodes(2, gpus=1, labels={"e2e.shoal.dev/zone": "za"})
    nodes += kenv.add_gpu_nodes(2, gpus=1, labels={"e2e.shoal.dev/zone": "zb"})
    kenv.wait_nodes_ready(nodes)
    queue = f"q-{s}"
    ensure_queue(kenv.client, queue)
    local, fake, immediate = f"local-{s}", f"fake-{s}", f"imm-{s}"
    _storage_class(kenv, local, "kubernetes.io/no-provisioner", "WaitForFirstConsumer")
    _storage_class(kenv, fake, "e2e.shoal.dev/fake", "WaitForFirstConsumer", zones=["zb"])
    _storage_class(kenv, immediate, "kubernetes.io/no-provisioner", "Immediate")
    pvs = [f"pv-{s}-local", f"pv-{s}-dyn", f"pv-{s}-imm"]
    try:
        sched = shoal_runner()
        # Static: the only local PV (1 GiB) is on nodes[2]; a 2 GiB claim has no PV and no provisioner.
        _pv(kenv, pvs[0], local, nodes[2])
        _pvc(kenv, "static", local)
        _pod(kenv, "static", sched.scheduler_name, queue, "static")
        _pvc(kenv, "nopv", local, "2Gi")
        _pod(kenv, "nopv", sched.scheduler_name, queue, "nopv")
        assert wait_until(lambda: pod_state(kenv.client, "static", kenv.namespace)[0], 30, "static bound") == nodes[2]
        wait_until(lambda: _phase(kenv, "static") == "Bound", 30, "the PV controller binds the claim")
        assert kenv.client.get(PersistentVolumeClaim, "static", namespace=kenv.namespace).spec.volumeName == pvs[0]
        wait_until(lambda: _waiting(kenv, "nopv"), 30, "the claim without a PV keeps its pod waiting")
        # Dynamic: selected-node set before the pod is bound, within the class's allowed zone.
        _pvc(kenv, "dyn", fake)
        _pod(kenv, "dyn", sched.scheduler_name, queue, "dyn")
        node = wait_until(lambda: pod_state(kenv.client, "dyn", kenv.namespace)[0], 30, "dyn bound")
        assert node in nodes[2:], node
        claim = kenv.client.get(PersistentVolumeClaim, "dyn", namespace=kenv.namespace)
        assert claim.metadata.annotations[SELECTED] == node
        _pv(kenv, pvs[1], fake, node, claim="dyn")  # the provisioner's part
        wait_until(lambda: _phase(kenv, "dyn") == "Bound", 30, "provisioned claim Bound")
        # Immediate: the pod waits until the PV controller binds its claim.
        _pvc(kenv, "imm", immediate)
        _pod(kenv, "imm", sched.scheduler_name, queue, "imm")
        wait_until(lambda: _waiting(kenv, "imm"), 30, "an unbound Immediate claim keeps its pod waiting")
        _pv(kenv, pvs[2], immediate, None)
        wait_until(lambda: _phase(kenv, "imm") == "Bound", 30, "the PV controller binds the Immediate claim")
        wait_until(lambda: pod_state(kenv.client, "imm", kenv.namespace)[0], 30, "imm bound once its claim is")
    except AssertionError:
        print(sched.tail())
        raise
    finally:
        for name in pvs:
            with contextlib.suppress(ApiError):
                kenv.client.delete(PersistentVolume, name)
        for name in (local, fake, immediate):
            kenv.client.delete(StorageClass, name)
