"""kube-scheduler's constraints in the core, from pod and node objects as the API serves them.

Each case builds nodes and pods as JSON, decodes them with the live decoders (`shoal.kai`), opens
a session and asks which nodes the pending pod may use (fit, node-local filters and the pick-time
inter-pod filters), then runs a cycle and checks the chosen node. The expected answers are
kube-scheduler's (worked out from its plugins' source; the e2e parity test asks it directly).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shoal.actions.common.node_choice import dynamic_mask
from shoal.cycle import open_session, run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.framework.fit import fit_masks
from shoal.kai.crds import implicit_podgroup, implicit_uid
from shoal.kai.nodes import node_from
from shoal.kai.pods import placed_pod_from, pod_from
from shoal.model import ClusterSnapshot, PodGroup, Queue
from shoal.plugins.podaffinity import kube_scores

JSON = dict[str, Any]
NS = "team"


def node(name: str, labels: dict[str, str] | None = None, taints: list[JSON] | None = None,
         cpu: str = "8", unschedulable: bool = False, **alloc: str) -> JSON:
    resources = {"cpu": cpu, "memory": "32Gi", "pods": "110", **alloc}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": resources, "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, on: str | None = None, labels: dict[str, str] | None = None, cpu: str = "1",
        ns: str = NS, **spec: Any) -> JSON:
    containers = spec.pop("containers", [{"name": "c", "resources": {"requests": {"cpu": cpu}}}])
    body: JSON = {"schedulerName": "shoal", "containers": containers, **spec}
    if on:
        body["nodeName"] = on
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels or {},
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": body, "status": {"phase": "Running" if on else "Pending"}}


def snapshot(nodes: list[JSON], pods: list[JSON],
             namespaces: dict[str, dict[str, str]] | None = None) -> ClusterSnapshot:
    snap = ClusterSnapshot(now=1e9, nodes=[node_from(n) for n in nodes], queues=[Queue("default-queue")],
                           namespace_labels=namespaces or {})
    other = PodGroup("other", "other", "", "", 1 << 30, False, 0.0, min_member=1)
    snap.podgroups.append(other)
    for p in pods:
        if p["spec"].get("nodeName"):
            snap.pods.append(placed_pod_from(p, "other"))
        else:
            uid = p["metadata"]["uid"]
            pg = implicit_podgroup(p, {}, None)
            pg.queue = "default-queue"
            snap.podgroups.append(pg)
            snap.pods.append(pod_from(p, implicit_uid(uid)))
    return snap


def feasible(snap: ClusterSnapshot, name: str) -> list[str]:
    ssn = open_session(snap, SchedulerConfig())
    task = ssn.tasks[f"uid-{name}"]
    _idle, ok = fit_masks(ssn, task)
    for pred in ssn.hooks.predicates:
        res = pred(ssn, task, None)
        if res is not None:
            ok = ok & res[0]
    dyn = dynamic_mask(ssn, task)
    if dyn is not None:
        ok = ok & dyn
    return [n.name for n, k in zip(ssn.nodes.nodes, ok) if k]


def placed(snap: ClusterSnapshot, name: str) -> str | None:
    result = run_cycle(snap, SchedulerConfig(actions=("allocate",)))
    for b in result.decisions.binds:
        if b.pod == f"uid-{name}":
            return b.node
    return None


ZONES = [node("a1", {"zone": "a", "rank": "3"}), node("a2", {"zone": "a", "rank": "10"}),
         node("b1", {"zone": "b", "rank": "x"}), node("c1", {"zone": "c"})]


def req(*exprs: tuple[str, str, list[str]], fields: list[tuple[str, str, list[str]]] | None = None) -> JSON:
    term: JSON = {"matchExpressions": [{"key": k, "operator": o, "values": v} for k, o, v in exprs]}
    if fields:
        term["matchFields"] = [{"key": k, "operator": o, "values": v} for k, o, v in fields]
    return term


def node_affinity(*terms: JSON) -> JSON:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize("terms, expected", [
    pytest.param([req(("zone", "In", ["a"]))], ["a1", "a2"], id="In"),
    pytest.param([req(("zone", "NotIn", ["a"]))], ["b1", "c1"], id="NotIn matches nodes without the label"),
    pytest.param([req(("rank", "Exists", []))], ["a1", "a2", "b1"], id="Exists"),
    pytest.param([req(("rank", "DoesNotExist", []))], ["c1"], id="DoesNotExist"),
    pytest.param([req(("rank", "Gt", ["5"]))], ["a2"], id="Gt compares integers (10 > 5, not '10' < '5')"),
    pytest.param([req(("rank", "Lt", ["5"]))], ["a1"], id="Lt skips labels that are not integers"),
    pytest.param([req(("zone", "In", ["a"])), req(("zone", "In", ["c"]))], ["a1", "a2", "c1"], id="terms are ORed"),
    pytest.param([req(("zone", "In", ["a"]), ("rank", "Gt", ["5"]))], ["a2"], id="expressions are ANDed"),
    pytest.param([req(fields=[("metadata.name", "In", ["b1"])])], ["b1"], id="matchFields In on the node name"),
    pytest.param([req(("zone", "In", ["a"]), fields=[("metadata.name", "NotIn", ["a1"])])], ["a2"],
                 id="matchFields NotIn with an expression"),
    pytest.param([req(("rank", "Gt", ["x"]))], [], id="Gt with a non-integer value matches nothing"),
])
def test_required_node_affinity(terms: list[JSON], expected: list[str]) -> None:
    snap = snapshot(ZONES, [pod("p", affinity=node_affinity(*terms))])
    assert feasible(snap, "p") == expected


NO_SCHED = {"key": "gpu", "value": "h100", "effect": "NoSchedule"}
NO_EXEC = {"key": "maint", "effect": "NoExecute"}
PREFER = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
TAINTED = [node("t0"), node("t1", taints=[NO_SCHED]), node("t2", taints=[NO_EXEC]), node("t3", taints=[PREFER]),
           node("t4", unschedulable=True)]


@pytest.mark.parametrize("tolerations, expected", [
    pytest.param([], ["t0", "t3"], id="untolerated NoSchedule / NoExecute / cordon keep the pod out"),
    pytest.param([{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}],
                 ["t0", "t1", "t3"], id="Equal with the value and effect"),
    pytest.param([{"key": "gpu", "operator": "Equal", "value": "a100"}], ["t0", "t3"], id="Equal wrong value"),
    pytest.param([{"key": "gpu", "operator": "Exists"}], ["t0", "t1", "t3"], id="Exists any value, any effect"),
    pytest.param([{"key": "maint", "operator": "Exists", "effect": "NoSchedule"}], ["t0", "t3"],
                 id="effect must match"),
    pytest.param([{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
                 ["t0", "t2", "t3"], id="tolerationSeconds does not matter for placement"),
    pytest.param([{"operator": "Exists"}], ["t0", "t1", "t2", "t3", "t4"], id="empty key Exists tolerates all"),
    pytest.param([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}],
                 ["t0", "t3", "t4"], id="tolerating the unschedulable taint allows a cordoned node"),
    pytest.param([{"key": "gpu", "operator": "Gt", "value": "1"}], ["t0", "t3"], id="Gt tolerations are off"),
])
def test_taints_and_tolerations(tolerations: list[JSON], expected: list[str]) -> None:
    snap = snapshot(TAINTED, [pod("p", tolerations=tolerations)])
    assert feasible(snap, "p") == expected


def test_prefer_no_schedule_is_a_preference() -> None:
    snap = snapshot([node("t3", taints=[PREFER]), node("t9")], [pod("p")])
    assert feasible(snap, "p") == ["t3", "t9"]
    assert placed(snap, "p") == "t9"


def test_preferred_node_affinity_weights() -> None:
    pref = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": req(("zone", "In", ["a"]))},
        {"weight": 30, "preference": req(("zone", "In", ["b"]))},
        {"weight": 25, "preference": req(("rank", "Exists", []))}]}}
    snap = snapshot(ZONES, [pod("p", affinity=pref)])
    assert placed(snap, "p") == "b1"  # 30 + 25 beats 10 + 25
    ssn = open_session(snap, SchedulerConfig())
    scores = kube_scores(ssn, ssn.tasks["uid-p"], np.arange(4))
    assert scores["NodeAffinity"].tolist() == [100 * 35 // 55, 100 * 35 // 55, 100, 0]


def term(labels: dict[str, str], key: str = "zone", **extra: Any) -> JSON:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def pod_affinity(required: list[JSON] | None = None, anti: list[JSON] | None = None,
                 preferred: list[tuple[int, JSON]] | None = None) -> JSON:
    out: JSON = {}
    if required:
        out["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": required}
    if anti:
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    if preferred:
        out.setdefault("podAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "podAffinityTerm": t} for w, t in preferred]
    return out


@pytest.mark.parametrize("existing, spec, labels, expected", [
    pytest.param([pod("db", "a1", {"app": "db"})], pod_affinity(required=[term({"app": "db"})]), {},
                 ["a1", "a2"], id="affinity: the zone of a matching pod"),
    pytest.param([], pod_affinity(required=[term({"app": "web"})]), {"app": "web"},
                 ["a1", "a2", "b1", "c1"], id="affinity: first pod of a self-matching group goes anywhere"),
    pytest.param([], pod_affinity(required=[term({"app": "db"})]), {"app": "web"}, [],
                 id="affinity: nothing matches and not self-matching"),
    pytest.param([pod("db", "a1", {"app": "db"}, ns="other")], pod_affinity(required=[term({"app": "db"})]), {},
                 [], id="affinity: a pod of another namespace does not count by default"),
    pytest.param([pod("db", "a1", {"app": "db"}, ns="other")],
                 pod_affinity(required=[term({"app": "db"}, namespaces=["other"])]), {}, ["a1", "a2"],
                 id="affinity: namespaces list"),
    pytest.param([pod("db", "a1", {"app": "db"}, ns="other")],
                 pod_affinity(required=[term({"app": "db"}, namespaceSelector={"matchLabels": {"env": "x"}})]),
                 {}, ["a1", "a2"], id="affinity: namespaceSelector on namespace labels"),
    pytest.param([pod("w", "a1", {"app": "web"})], pod_affinity(anti=[term({"app": "web"})]), {"app": "web"},
                 ["b1", "c1"], id="anti-affinity: not in the zone of a matching pod"),
    pytest.param([pod("w", "a1", {"app": "web"})], pod_affinity(anti=[term({"app": "web"}, "kubernetes.io/hostname")]),
                 {}, ["a2", "b1", "c1"], id="anti-affinity per host"),
    pytest.param([pod("w", "b1", {"app": "web"}, affinity=pod_affinity(anti=[term({"role": "batch"})]))],
                 {}, {"role": "batch"}, ["a1", "a2", "c1"], id="existing pods' anti-affinity keeps us out"),
    pytest.param([pod("w", "b1", {"app": "web"}, affinity=pod_affinity(anti=[term({"role": "batch"})]))],
                 {}, {"role": "other"}, ["a1", "a2", "b1", "c1"], id="existing anti-affinity not matching us"),
    pytest.param([pod("w", "a1", {"app": "web", "v": "1"}), pod("w2", "b1", {"app": "web", "v": "2"})],
                 pod_affinity(anti=[term({"app": "web"}, matchLabelKeys=["v"])]), {"app": "web", "v": "2"},
                 ["a1", "a2", "c1"], id="anti-affinity matchLabelKeys narrows to our version"),
])
def test_inter_pod_affinity(existing: list[JSON], spec: JSON, labels: dict[str, str], expected: list[str]) -> None:
    incoming = pod("p", labels=labels, affinity=spec) if spec else pod("p", labels=labels)
    snap = snapshot(ZONES, [*existing, incoming], {"other": {"env": "x"}})
    assert feasible(snap, "p") == expected


def spread(key: str, skew: int = 1, hard: bool = True, **extra: Any) -> JSON:
    return {"maxSkew": skew, "topologyKey": key, "labelSelector": {"matchLabels": {"app": "s"}},
            "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway", **extra}


@pytest.mark.parametrize("existing_zones, constraint, expected", [
    pytest.param(["a", "a", "b"], spread("zone"), ["c1"], id="skew 1: only the empty zone"),
    pytest.param(["a", "b"], spread("zone", 2), ["a1", "a2", "b1", "c1"], id="skew 2 allows one more"),
    pytest.param(["a"], spread("zone", 1, minDomains=5), ["b1", "c1"],
                 id="minDomains above the domain count: min is 0"),
    pytest.param(["b"], spread("rank"), ["a1", "a2"], id="nodes without the key are out, domains by rank value"),
    pytest.param(["a"], spread("zone", nodeAffinityPolicy="Honor"), ["b1"],
                 id="node affinity policy Honor: c is not a domain of this pod"),
])
def test_topology_spread(existing_zones: list[str], constraint: JSON, expected: list[str]) -> None:
    first = {"a": "a1", "b": "b1", "c": "c1"}
    existing = [pod(f"e{k}", first[z], {"app": "s"}) for k, z in enumerate(existing_zones)]
    aff = node_affinity(req(("zone", "In", ["a", "b"]))) if "nodeAffinityPolicy" in constraint else None
    extra = {"affinity": aff} if aff else {}
    snap = snapshot(ZONES, [*existing, pod("p", labels={"app": "s"}, topologySpreadConstraints=[constraint], **extra)])
    assert feasible(snap, "p") == expected


def test_schedule_anyway_prefers_the_emptier_zone() -> None:
    existing = [pod("e0", "a1", {"app": "s"}), pod("e1", "b1", {"app": "s"}), pod("e2", "b1", {"app": "s"})]
    incoming = pod("p", labels={"app": "s"}, topologySpreadConstraints=[spread("zone", hard=False)])
    snap = snapshot(ZONES[:3], [*existing, incoming])
    assert feasible(snap, "p") == ["a1", "a2", "b1"]
    assert placed(snap, "p") in ("a1", "a2")


def test_host_ports() -> None:
    port = [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    udp = [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]}]
    existing = [pod("e", "a1", containers=port), pod("u", "a2", containers=udp)]
    snap = snapshot(ZONES, [*existing, pod("p", containers=port)])
    assert feasible(snap, "p") == ["a2", "b1", "c1"]


def test_requests_sidecars_init_overhead_and_ephemeral_storage() -> None:
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                               {"name": "init", "resources": {"requests": {"cpu": "4"}}}],
            "overhead": {"cpu": "500m"}}
    # Sidecar 1 + init 4 = 5 CPUs during init (> 2 + 1 running), + 0.5 overhead: 5.5 CPUs.
    nodes = [node("small", cpu="5"), node("big", cpu="6")]
    assert feasible(snapshot(nodes, [pod("p", **spec)]), "p") == ["big"]
    eph = [{"name": "c", "resources": {"requests": {"cpu": "1", "ephemeral-storage": "10Gi"}}}]
    nodes = [node("nodisk"), node("disk", **{"ephemeral-storage": "100Gi"})]
    assert feasible(snapshot(nodes, [pod("p", containers=eph)]), "p") == ["disk"]


def test_pod_limit_counts_other_schedulers_pods() -> None:
    nodes = [node("full", pods="1"), node("free", pods="2")]
    nodes[0]["status"]["allocatable"]["pods"] = "1"
    snap = snapshot(nodes, [pod("e", "full"), pod("p")])
    assert feasible(snap, "p") == ["free"]


def test_a_gang_counts_its_own_pods_for_anti_affinity() -> None:
    """Three pods of one gang with anti-affinity to each other per host: one per node."""
    nodes = [node(f"h{i}") for i in range(3)]
    spec = pod_affinity(anti=[term({"app": "g"}, "kubernetes.io/hostname")])
    pods = [pod(f"g{i}", labels={"app": "g"}, affinity=spec) for i in range(3)]
    for p in pods:
        p["metadata"]["annotations"] = {"pod-group-name": "gang"}
    snap = ClusterSnapshot(now=1e9, nodes=[node_from(n) for n in nodes], queues=[Queue("default-queue")])
    snap.podgroups.append(PodGroup(f"{NS}/gang", "gang", NS, "default-queue", 50, True, 0.0, min_member=3))
    snap.pods.extend(pod_from(p, f"{NS}/gang") for p in pods)
    result = run_cycle(snap, SchedulerConfig(actions=("allocate",)))
    assert sorted(b.node for b in result.decisions.binds) == ["h0", "h1", "h2"]
    pods.append(pod("g3", labels={"app": "g"}, affinity=spec))
    pods[-1]["metadata"]["annotations"] = {"pod-group-name": "gang"}
    snap.pods.append(pod_from(pods[-1], f"{NS}/gang"))
    snap.podgroups[0] = PodGroup(f"{NS}/gang", "gang", NS, "default-queue", 50, True, 0.0, min_member=4)
    assert run_cycle(snap, SchedulerConfig(actions=("allocate",))).decisions.binds == []
