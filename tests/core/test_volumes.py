"""Persistent volume claims in the core (kube-scheduler's VolumeBinding): which nodes a pod's
claims allow, and which PV each bind decision takes."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.cycle import run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.kai.volumes import pv_from, pvc_from, storage_class_from

from .test_kube_constraints import feasible, node, pod, snapshot

NODES = [node("n0", {"zone": "a"}), node("n1", {"zone": "a"}), node("n2", {"zone": "b"})]


def pv(name: str, sc: str, on: str | None, size: str = "1Gi", claim: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": sc}
    if on:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [on]}]}]}}
    if claim:
        spec["claimRef"] = {"namespace": "team", "name": claim}
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": "Bound" if claim else "Available"}}


def pvc(name: str, sc: str, volume: str = "", size: str = "1Gi") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team"},
            "spec": {"storageClassName": sc, "accessModes": ["ReadWriteOnce"], "volumeName": volume,
                     "resources": {"requests": {"storage": size}}}}


CLASSES = [{"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"},
           {"metadata": {"name": "zonal"}, "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}]},
           {"metadata": {"name": "now"}, "provisioner": "csi.example.com", "volumeBindingMode": "Immediate"}]


def world(pvs: list[dict[str, Any]], pvcs: list[dict[str, Any]], claims: dict[str, str]) -> Any:
    pods = [pod(name, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": c}}]) for name, c in claims.items()]
    snap = snapshot(NODES, pods)
    snap.volumes = {p["metadata"]["name"]: pv_from(p) for p in pvs}
    snap.claims = {("team", c["metadata"]["name"]): pvc_from(c) for c in pvcs}
    snap.storage_classes = {c["metadata"]["name"]: storage_class_from(c) for c in CLASSES}
    return snap


@pytest.mark.parametrize("pvs, claim, expected", [
    pytest.param([pv("v1", "local", "n1")], pvc("c", "local"), ["n1"], id="static local PV: its node"),
    pytest.param([pv("v1", "local", "n1", "512Mi")], pvc("c", "local"), [], id="too small a PV does not fit"),
    pytest.param([pv("v1", "other", "n1")], pvc("c", "local"), [], id="another class's PV does not fit"),
    pytest.param([pv("v1", "local", "n1", claim="x")], pvc("c", "local"), [], id="a PV bound to another claim"),
    pytest.param([], pvc("c", "zonal"), ["n2"], id="dynamic: the class's allowed topologies"),
    pytest.param([pv("v1", "zonal", "n0")], pvc("c", "zonal"), ["n0", "n2"], id="static or dynamic"),
    pytest.param([pv("v1", "local", "n2", claim="c")], pvc("c", "local", volume="v1"), ["n2"],
                 id="bound claim: its PV's node affinity"),
    pytest.param([], pvc("c", "now"), [], id="unbound Immediate claim: wait for the PV controller"),
    pytest.param([], pvc("other", "local"), [], id="missing claim"),
])
def test_claims_constrain_nodes(pvs: list[dict[str, Any]], claim: dict[str, Any], expected: list[str]) -> None:
    assert feasible(world(pvs, [claim], {"p": "c"}), "p") == expected


def test_two_pods_never_count_on_one_pv() -> None:
    snap = world([pv("v1", "local", "n1"), pv("v0", "local", "n0", "2Gi")], [pvc("c1", "local"), pvc("c2", "local")],
                 {"p1": "c1", "p2": "c2"})
    binds = run_cycle(snap, SchedulerConfig(actions=("allocate",))).decisions.binds
    got = sorted((b.node, b.volumes[0][1]) for b in binds)
    assert got == [("n0", "v0"), ("n1", "v1")]  # each pod takes the PV of its own node
    snap = world([pv("v1", "local", "n1")], [pvc("c1", "local"), pvc("c2", "local")], {"p1": "c1", "p2": "c2"})
    assert len(run_cycle(snap, SchedulerConfig(actions=("allocate",))).decisions.binds) == 1


def test_dynamic_claim_binds_with_provisioning() -> None:
    snap = world([], [pvc("c", "zonal")], {"p": "c"})
    binds = run_cycle(snap, SchedulerConfig(actions=("allocate",))).decisions.binds
    assert [(b.node, b.volumes) for b in binds] == [("n2", (("c", ""),))]
