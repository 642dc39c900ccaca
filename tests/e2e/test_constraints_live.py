"""`shoal run` honours topology and kube-scheduler constraints on live pods (issue #16).

Topology: a Topology object and rack labels on kwok nodes; a gang with a required rack lands in
one rack (or waits when no rack can hold it), a gang with a preferred rack falls back to several.
Constraints: a gang with per-host anti-affinity against itself takes one node per pod, a pod
spreads away from the zone other schedulers' pods fill, a tainted node is used only by the pod
that tolerates it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from .cluster import KEnv
from .scheduler_fixtures import create, ensure_queue, pod_manifest, pod_state, shoal_runner, wait_until  # noqa: F401

pytestmark = pytest.mark.e2e


def _running(kenv: KEnv, name: str) -> str | None:
    node, phase, _ = pod_state(kenv.client, name, kenv.namespace)
    return node if node and phase == "Running" else None


def _gang(kenv: KEnv, scheduler: str, queue: str, name: str, size: int,
          topology: dict[str, str] | None = None, labels: dict[str, str] | None = None,
          spec: dict[str, Any] | None = None) -> list[str]:
    pg_spec: dict[str, Any] = {"minMember": size, "queue": queue}
    if topology:
        pg_spec["topologyConstraint"] = topology
    create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                  "metadata": {"name": name}, "spec": pg_spec})
    names = []
    for i in range(size):
        m = pod_manifest(f"{name}-{i}", scheduler, gpus=1, queue=queue, annotations={"pod-group-name": name},
                         labels=labels)
        m["spec"].update(spec or {})
        create(kenv, m)
        names.append(m["metadata"]["name"])
    return names


def _all_running(kenv: KEnv, pods: list[str], timeout: float = 40) -> dict[str, str]:
    return {p: wait_until(lambda p=p: _running(kenv, p), timeout, f"{p} Running") for p in pods}


def test_topology_required_rack_and_preferred_fallback(kenv: KEnv, shoal_runner: Any) -> None:
    topo = f"racks-{uuid.uuid4().hex[:6]}"
    create(kenv, {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": topo},
                  "spec": {"levels": [{"nodeLabel": "e2e.shoal.dev/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}})
    rack_of = {}
    for rack in ("r1", "r2"):
        for n in kenv.add_gpu_nodes(2, gpus=4, labels={"e2e.shoal.dev/rack": rack}):
            rack_of[n] = rack
    kenv.wait_nodes_ready(list(rack_of))
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner()
    try:
        required = {"topology": topo, "requiredTopologyLevel": "e2e.shoal.dev/rack"}
        preferred = {"topology": topo, "preferredTopologyLevel": "e2e.shoal.dev/rack"}
        a = _gang(kenv, sched.scheduler_name, queue, "a", 6, required)
        placed = _all_running(kenv, a)
        assert len({rack_of[n] for n in placed.values()}) == 1, placed  # 6 of one rack's 8 GPUs
        c = _gang(kenv, sched.scheduler_name, queue, "c", 9, required)
        wait_until(lambda: all((st := pod_state(kenv.client, p, kenv.namespace)[2]) is not None
                               and st.reason == "Unschedulable" for p in c), 30, "required-rack gang of 9 explained")
        b = _gang(kenv, sched.scheduler_name, queue, "b", 9, preferred)
        placed_b = _all_running(kenv, b)
        assert Counter(rack_of[n] for n in placed_b.values()).most_common()[0][1] == 8, placed_b  # one rack first
        assert all(pod_state(kenv.client, p, kenv.namespace)[0] is None for p in c), "no rack holds 9: c waits"
    except AssertionError:
        print(sched.tail())
        raise


def test_anti_affinity_spread_and_taints_live(kenv: KEnv, shoal_runner: Any) -> None:
    zone_of = {}
    for zone in ("za", "zb"):
        for n in kenv.add_gpu_nodes(2, gpus=2, labels={"e2e.shoal.dev/zone": zone}):
            zone_of[n] = zone
    tainted = kenv.add_gpu_nodes(1, gpus=8, labels={"e2e.shoal.dev/zone": "zt"})[0]
    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    kenv.client.patch(Node, tainted, {"spec": {"taints": [taint]}})
    kenv.wait_nodes_ready([*zone_of, tainted])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    # Another scheduler's pods (labelled app=web) fill zone za.
    for k, n in enumerate(n for n, z in zone_of.items() if z == "za"):
        other = pod_manifest(f"other-{k}", "someone-else", queue=queue, labels={"app": "web"}, node=n)
        create(kenv, other)
    sched = shoal_runner()
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "g"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    gang = _gang(kenv, sched.scheduler_name, queue, "g", 4, labels={"app": "g"}, spec=anti)
    placed = _all_running(kenv, gang)
    assert len(set(placed.values())) == 4 and tainted not in placed.values(), placed
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "e2e.shoal.dev/zone",
                                             "whenUnsatisfiable": "DoNotSchedule", "nodeAffinityPolicy": "Ignore",
                                             "labelSelector": {"matchLabels": {"app": "web"}}}],
              "nodeSelector": {"e2e.shoal.dev/zone": "za"}}
    web = pod_manifest("web", sched.scheduler_name, queue=queue, labels={"app": "web"})
    web["spec"].update(spread)
    create(kenv, web)
    wait_until(lambda: (c := pod_state(kenv.client, "web", kenv.namespace)[2]) is not None
               and c.reason == "Unschedulable", 30, "za holds 2 web pods, zb none: skew would be 3 > 1")
    tolerant = pod_manifest("tolerant", sched.scheduler_name, gpus=8, queue=queue)
    tolerant["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    create(kenv, tolerant)
    assert wait_until(lambda: _running(kenv, "tolerant"), 30, "tolerant Running") == tainted
    assert kenv.client.get(Pod, "web", namespace=kenv.namespace).spec.nodeName is None


def test_podgroup_mark_unschedulable_and_scheduling_backoff(kenv: KEnv, shoal_runner: Any) -> None:
    """markUnschedulable: false -> events but no PodScheduled=False on the pods; schedulingBackoff: 1 ->
    a gang that failed once is not tried again until its scheduling condition is cleared (KAI)."""
    from .scheduler_fixtures import PodGroupRes, events_for

    nodes = kenv.add_gpu_nodes(1, gpus=1)
    kenv.wait_nodes_ready(nodes)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner()
    for name, extra in (("quiet", {"markUnschedulable": False}), ("once", {"schedulingBackoff": 1}),
                        ("again", {})):
        create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": name},
                      "spec": {"minMember": 2, "queue": queue, **extra}})
        for i in range(2):
            create(kenv, pod_manifest(f"{name}-{i}", sched.scheduler_name, gpus=1, queue=queue,
                                      annotations={"pod-group-name": name}))
    wait_until(lambda: events_for(kenv.client, "quiet-0", kenv.namespace, "FailedScheduling"), 30,
               "FailedScheduling event on a markUnschedulable=false pod")
    wait_until(lambda: (c := pod_state(kenv.client, "again-0", kenv.namespace)[2]) is not None
               and c.reason == "Unschedulable", 30, "the default gang's pods marked Unschedulable")
    assert pod_state(kenv.client, "quiet-0", kenv.namespace)[2] is None, "markUnschedulable=false: no condition"
    wait_until(lambda: (kenv.client.get(PodGroupRes, "once", namespace=kenv.namespace).get("status") or {})
               .get("schedulingConditions"), 30, "the backoff gang's scheduling condition")
    kenv.client.delete(PodGroupRes, "quiet", namespace=kenv.namespace)
    for i in range(2):
        kenv.client.delete(Pod, f"quiet-{i}", namespace=kenv.namespace, grace_period=0)
    more = kenv.add_gpu_nodes(3, gpus=1)  # room for both gangs now
    kenv.wait_nodes_ready(more)
    _all_running(kenv, ["again-0", "again-1"])
    assert all(pod_state(kenv.client, f"once-{i}", kenv.namespace)[0] is None for i in range(2)), \
        "schedulingBackoff=1: the gang that failed is not tried again"
    kenv.client.patch(PodGroupRes.Status, "once", {"status": {"schedulingConditions": None}},
                      namespace=kenv.namespace, patch_type=PatchType.MERGE)
    _all_running(kenv, ["once-0", "once-1"])


def test_podgroup_min_subgroup_live(kenv: KEnv, shoal_runner: Any) -> None:
    """minSubGroup 2 of 3 replicas of 2 pods on 4 one-GPU nodes: two replicas run, the third waits."""
    nodes = kenv.add_gpu_nodes(4, gpus=1)
    kenv.wait_nodes_ready(nodes)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner()
    replicas = ["p0", "p1", "p2"]
    create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "inf"},
                  "spec": {"queue": queue, "minSubGroup": 2,
                           "subGroups": [{"name": r, "minMember": 2} for r in replicas]}})
    for r in replicas:
        for i in range(2):
            create(kenv, pod_manifest(f"{r}-{i}", sched.scheduler_name, gpus=1, queue=queue,
                                      annotations={"pod-group-name": "inf"},
                                      labels={"kai.scheduler/subgroup-name": r}))
    pods = [f"{r}-{i}" for r in replicas for i in range(2)]
    bound = wait_until(lambda: (b := [p for p in pods if _running(kenv, p)]) and len(b) == 4 and b, 40,
                       "two whole replicas Running")
    assert {p.split("-")[0] for p in bound} in ({"p0", "p1"}, {"p0", "p2"}, {"p1", "p2"}), bound
