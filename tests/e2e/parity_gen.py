"""Random clusters and pods for the kube-scheduler parity test (seeded, valid for the API server).

A *world* (named by a prefix, e.g. `par3`) is a set of kwok nodes (labels: hostname, zone,
rack, an integer `rank`, GPU type; taints of every effect; cordons; varied allocatable, sometimes
a tiny pod limit or no ephemeral storage) with pods already bound to them (labels, required and
preferred inter-pod terms, host ports) in two labelled namespaces. A *case* is one pending pod
using the constraints kube-scheduler honours: nodeSelector, required / preferred node affinity
with every operator and matchFields, tolerations, required / preferred pod (anti-)affinity with
namespaces, namespaceSelector and matchLabelKeys, topology spread (both kinds, minDomains,
inclusion policies, matchLabelKeys), host ports, init containers and sidecars, ephemeral storage.
"""

from __future__ import annotations

import random
from typing import Any

JSON = dict[str, Any]
ZONES = ["za", "zb", "zc"]
RACKS = ["r0", "r1", "r2", "r3"]
APPS = ["web", "db", "cache"]
TIERS = ["fe", "be"]
KEYS = ["zone", "rack", "kubernetes.io/hostname"]
TAINT_KEYS = ["dedicated", "spot", "maint"]
EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def namespaces(world: str) -> dict[str, dict[str, str]]:
    return {f"{world}-a": {"env": "prod", "shoal.dev/e2e": "true"},
            f"{world}-b": {"env": "dev", "shoal.dev/e2e": "true"}}


def world_nodes(rng: random.Random, world: str) -> list[JSON]:
    out = []
    for i in range(rng.randint(6, 11)):
        name = f"{world}-n{i}"
        labels = {"kubernetes.io/hostname": name, "type": "kwok"}
        if rng.random() < 0.9:
            labels["zone"] = rng.choice(ZONES)
        if rng.random() < 0.8:
            labels["rack"] = rng.choice(RACKS)
        labels["rank"] = rng.choice([str(rng.randint(0, 20)), str(rng.randint(0, 20)), "x"])
        if rng.random() < 0.5:
            labels["gpu"] = rng.choice(["a100", "h100"])
        taints = []
        if rng.random() < 0.3:
            taints.append({"key": rng.choice(TAINT_KEYS), "value": rng.choice(["a", "b", ""]),
                           "effect": rng.choice(EFFECTS)})
        alloc = {"cpu": rng.choice(["2", "4", "8"]), "memory": rng.choice(["4Gi", "8Gi", "16Gi"]),
                 "pods": "3" if rng.random() < 0.1 else "110"}
        if rng.random() < 0.7:
            alloc["ephemeral-storage"] = "20Gi"
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
                    "spec": {"taints": taints, "unschedulable": rng.random() < 0.08},
                    "status": {"allocatable": alloc, "capacity": dict(alloc)}})
    return out


def _labels(rng: random.Random) -> dict[str, str]:
    labels = {"app": rng.choice(APPS)}
    if rng.random() < 0.6:
        labels["tier"] = rng.choice(TIERS)
    if rng.random() < 0.3:
        labels["v"] = rng.choice(["1", "2"])
    return labels


def _selector(rng: random.Random) -> JSON:
    roll = rng.random()
    if roll < 0.6:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    if roll < 0.8:
        return {"matchExpressions": [{"key": "app", "operator": rng.choice(["In", "NotIn"]),
                                      "values": rng.sample(APPS, rng.randint(1, 2))}]}
    if roll < 0.9:
        return {"matchExpressions": [{"key": "tier", "operator": rng.choice(["Exists", "DoesNotExist"])}]}
    return {"matchLabels": {"app": rng.choice(APPS), "tier": rng.choice(TIERS)}}


def _pod_term(rng: random.Random, world: str, own: bool = False) -> JSON:
    term: JSON = {"labelSelector": _selector(rng), "topologyKey": rng.choice(KEYS)}
    roll = rng.random()
    if roll < 0.15:
        term["namespaces"] = rng.sample(sorted(namespaces(world)), rng.randint(1, 2))
    elif roll < 0.3:
        term["namespaceSelector"] = rng.choice([{}, {"matchLabels": {"env": rng.choice(["prod", "dev"])}}])
    if own and rng.random() < 0.15:
        term["matchLabelKeys"] = ["v"]
    return term


def _affinity_block(rng: random.Random, world: str, p_req: float, p_anti: float, p_pref: float,
                    own: bool = False) -> JSON:
    aff: JSON = {}
    if rng.random() < p_req:
        aff.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
            _pod_term(rng, world, own) for _ in range(rng.randint(1, 2))]
    if rng.random() < p_anti:
        aff.setdefault("podAntiAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
            _pod_term(rng, world, own)]
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < p_pref:
            aff.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _pod_term(rng, world, own)}
                for _ in range(rng.randint(1, 2))]
    return aff


def _container(rng: random.Random, cpu_max: int = 1500, ports: bool = False) -> JSON:
    requests = {"cpu": f"{rng.randint(1, cpu_max // 100) * 100}m", "memory": f"{rng.choice([256, 512, 1024, 2048])}Mi"}
    c: JSON = {"name": "c", "image": "x", "resources": {"requests": requests}}
    if ports:
        c["ports"] = [{"containerPort": 80, "hostPort": rng.choice([8080, 9090]),
                       "protocol": rng.choice(["TCP", "TCP", "UDP"])}]
    return c


def existing_pods(rng: random.Random, world: str, nodes: list[JSON]) -> list[JSON]:
    out = []
    for n in nodes:
        for k in range(rng.randint(0, 2)):
            spec: JSON = {"schedulerName": "parity-nobody", "nodeName": n["metadata"]["name"],
                          "containers": [_container(rng, 800, ports=rng.random() < 0.1)]}
            aff = _affinity_block(rng, world, 0.1, 0.15, 0.15)
            if aff:
                spec["affinity"] = aff
            out.append({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{n['metadata']['name']}-e{k}",
                                     "namespace": rng.choice(sorted(namespaces(world))), "labels": _labels(rng)},
                        "spec": spec})
    return out


def _node_term(rng: random.Random, nodes: list[JSON]) -> JSON:
    exprs = []
    for _ in range(rng.randint(1, 2)):
        key = rng.choice(["zone", "rack", "rank", "gpu"])
        if key == "rank":
            op = rng.choice(["Gt", "Lt", "Exists", "In"])
            values = [str(rng.randint(0, 20))] if op in ("Gt", "Lt", "In") else []
        else:
            op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
            pool = {"zone": ZONES, "rack": RACKS, "gpu": ["a100", "h100"]}[key]
            values = rng.sample(pool, rng.randint(1, 2)) if op in ("In", "NotIn") else []
        exprs.append({"key": key, "operator": op, "values": values})
    term: JSON = {"matchExpressions": exprs}
    if rng.random() < 0.12:
        name = rng.choice(nodes)["metadata"]["name"]
        term["matchFields"] = [{"key": "metadata.name", "operator": rng.choice(["In", "NotIn"]), "values": [name]}]
    return term


def _tolerations(rng: random.Random) -> list[JSON]:
    out = []
    for _ in range(rng.randint(1, 2)):
        roll = rng.random()
        if roll < 0.1:
            out.append({"operator": "Exists"})
            continue
        tol: JSON = {"key": rng.choice([*TAINT_KEYS, "node.kubernetes.io/unschedulable"])}
        if roll < 0.55:
            tol["operator"] = "Exists"
        else:
            tol["operator"] = "Equal"
            tol["value"] = rng.choice(["a", "b", ""])
        if rng.random() < 0.6:
            tol["effect"] = rng.choice(EFFECTS)
            if tol["effect"] == "NoExecute" and rng.random() < 0.5:
                tol["tolerationSeconds"] = 30
        out.append(tol)
    return out


def _spread(rng: random.Random) -> list[JSON]:
    out = []
    for key in rng.sample(KEYS, rng.randint(1, 2)):
        hard = rng.random() < 0.5
        c: JSON = {"maxSkew": rng.randint(1, 2), "topologyKey": key,
                   "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
                   "labelSelector": _selector(rng)}
        if hard and rng.random() < 0.25:
            c["minDomains"] = rng.randint(1, 4)
        if rng.random() < 0.2:
            c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.2:
            c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.15:
            c["matchLabelKeys"] = ["v"]
        out.append(c)
    return out


def case_pod(rng: random.Random, world: str, nodes: list[JSON], name: str) -> JSON:
    """A pending pod (no scheduler name: the caller sets it) with random constraints."""
    spec: JSON = {"containers": [_container(rng, 2500, ports=rng.random() < 0.1)]}
    if rng.random() < 0.1:
        spec["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "1Gi"
    if rng.random() < 0.12:
        init = _container(rng, 3000)
        init["name"] = "init"
        spec["initContainers"] = [init]
        if rng.random() < 0.5:
            side = _container(rng, 800)
            side["name"], side["restartPolicy"] = "side", "Always"
            spec["initContainers"].insert(0, side)
    if rng.random() < 0.12:
        spec["nodeSelector"] = {"zone": rng.choice(ZONES)}
    node_aff: JSON = {}
    if rng.random() < 0.3:
        node_aff["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [_node_term(rng, nodes) for _ in range(rng.randint(1, 2))]}
    if rng.random() < 0.3:
        node_aff["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randint(1, 100), "preference": _node_term(rng, nodes)} for _ in range(rng.randint(1, 3))]
    aff = _affinity_block(rng, world, 0.15, 0.2, 0.2, own=True)
    if node_aff:
        aff["nodeAffinity"] = node_aff
    if aff:
        spec["affinity"] = aff
    if rng.random() < 0.45:
        spec["tolerations"] = _tolerations(rng)
    if rng.random() < 0.3:
        spec["topologySpreadConstraints"] = _spread(rng)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": rng.choice(sorted(namespaces(world))), "labels": _labels(rng)},
            "spec": spec}
