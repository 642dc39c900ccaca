"""Random and malformed Kubernetes objects through the live decoding and a cycle (#19).

Hypothesis mutates realistic pods, PodGroups, Queues, Topologies and nodes (any field of spec and
status replaced by an arbitrary JSON value or removed; labels, annotations and taints with odd
values; the metadata the API server itself guarantees left well-typed) and feeds them through the
informers' event path, the cache, a default cycle and the applier's reports. Properties: no
exception escapes any of them; a healthy pod beside the garbage (a healthy node in reach) is still bound;
every refused object is reported exactly once, even over two cycles.
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import Iterator
from functools import partial
from typing import Any

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from shoal.cycle import run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.kube.applier import Applier
from shoal.kube.cache import ClusterCache
from shoal.kube.client import NODES, PODGROUPS, PODS, QUEUES, TOPOLOGIES, Resource
from shoal.kube.informer import Informer
from shoal.kube.metrics import SchedulerMetrics

from .fake_api import FakeApi
from .test_cache import SCHED, node, pod, queue

ODD_STRINGS = ["", "-1", "0", "1e400", "NaN", "1.5", "abc", "1Ki", "-5Gi", "99999999999999999999Gi", "0.001",
               "1m", "true", "0.333", "2", "100", "\x00", "🙂"]
LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                 st.sampled_from(ODD_STRINGS), st.text(max_size=6))
VALUE = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["name", "key", "value", "effect", "operator", "values", "quota", "limit", "a"]),
    inner, max_size=3), max_leaves=6)
STR_MAP = st.dictionaries(st.sampled_from([
    "kai.scheduler/queue", "pod-group-name", "gpu-fraction", "gpu-memory", "gpu-fraction-num-devices",
    "kai.scheduler/subgroup-name", "kai.scheduler/preemptibility", "priorityClassName", "nvidia.com/gpu.memory",
    "nvidia.com/gpu.count", "nvidia.com/mig.strategy", "runai-gpu-group", "zone", "x"]),
    st.sampled_from(ODD_STRINGS) | st.text(max_size=6), max_size=4)


def _templates() -> list[tuple[Resource, dict[str, Any]]]:
    """One well-formed object of each kind, with the fields the decoders read."""
    gang = pod("m-pod", annotations={"pod-group-name": "m-pg", "gpu-fraction": "0.5"}, queue="m-q")
    gang["spec"].update({"priorityClassName": "train", "nodeSelector": {"zone": "a"},
                         "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                         "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                             "nodeSelectorTerms": [{"matchExpressions": [
                                 {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
                         "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                        "whenUnsatisfiable": "DoNotSchedule"}],
                         "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}],
                         "overhead": {"cpu": "100m"}})
    running = pod("m-run", node_name="m-node", queue="m-q")
    pg = {"metadata": {"name": "m-pg", "namespace": "ns", "uid": "uid-m-pg"},
          "spec": {"minMember": 1, "queue": "m-q", "priorityClassName": "train", "schedulingBackoff": -1,
                   "topologyConstraint": {"topology": "m-topo", "requiredTopologyLevel": "zone"},
                   "subGroups": [{"name": "a", "minMember": 1}]}}
    q = queue("m-q", parent="m-root", quota=2, limit=4)
    q["spec"]["resources"].update({"cpu": {"quota": 8, "limit": -1, "overQuotaWeight": 1}})
    q["spec"].update({"priority": 100, "preemptMinRuntime": "1m"})
    topo = {"metadata": {"name": "m-topo", "uid": "uid-topo"},
            "spec": {"levels": [{"nodeLabel": "zone"}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    n = node("m-node", gpus=4)
    n["metadata"]["labels"] = {"zone": "a", "nvidia.com/gpu.memory": "40960"}
    n["spec"] = {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}], "unschedulable": False}
    return [(PODS, gang), (PODS, running), (PODGROUPS, pg), (QUEUES, q), (TOPOLOGIES, topo), (NODES, n)]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path below spec and status (the API server guarantees the metadata's shape)."""
    if isinstance(obj, dict):
        items: Any = obj.items()
    elif isinstance(obj, list):
        items = enumerate(obj)
    else:
        return
    for k, v in items:
        if not prefix and k not in ("spec", "status"):
            continue
        yield (*prefix, k)
        yield from _paths(v, (*prefix, k))


def _mutate(obj: dict[str, Any], data: st.DataObject, n: int) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    m = obj["metadata"]
    m["name"] = f"{m['name']}-{n}"
    if "uid" in m:
        m["uid"] = f"{m['uid']}-{n}"
    for _ in range(data.draw(st.integers(1, 3))):
        paths = list(_paths(obj))
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        parent = obj
        for k in path[:-1]:
            parent = parent[k]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(VALUE)
    if data.draw(st.booleans()):
        m["labels"] = {**(m.get("labels") or {}), **data.draw(STR_MAP)}
    if data.draw(st.booleans()):
        m["annotations"] = {**(m.get("annotations") or {}), **data.draw(STR_MAP)}
    return obj


def _informers(cache: ClusterCache) -> dict[str, Informer]:
    kinds = {"pods": (cache.on_pod, "Pod"), "podgroups": (cache.on_podgroup, "PodGroup"),
             "queues": (cache.on_queue, "Queue"), "topologies": (cache.on_topology, "Topology"),
             "nodes": (cache.on_node, "Node")}
    api = FakeApi()
    return {plural: Informer(api, res, handler, on_error=partial(cache.handler_failed, kind))
            for plural, (handler, kind), res in ((p, kinds[p], r) for p, r in (
                ("pods", PODS), ("podgroups", PODGROUPS), ("queues", QUEUES), ("topologies", TOPOLOGIES),
                ("nodes", NODES)))}


def _healthy(cache: ClusterCache, informers: dict[str, Informer]) -> None:
    informers["queues"].apply({"type": "ADDED", "object": queue("good-q")})
    informers["nodes"].apply({"type": "ADDED", "object": node("good-node", gpus=8)})
    informers["pods"].apply({"type": "ADDED", "object": pod("good-pod", queue="good-q")})


@settings(max_examples=40, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_garbage_never_escapes_and_each_refusal_is_reported_once(data: st.DataObject) -> None:
    cache = ClusterCache(SCHED, lambda: 1000.0)
    informers = _informers(cache)
    _healthy(cache, informers)
    for n in range(data.draw(st.integers(1, 5))):
        for res, template in _templates():
            verb = data.draw(st.sampled_from(["ADDED", "MODIFIED"]))
            informers[res.plural].apply({"type": verb, "object": _mutate(template, data, n)})
    snapshot = cache.snapshot()
    event(f"problems: {min(len(cache.problems), 3)}")
    result = run_cycle(snapshot, SchedulerConfig())
    d = result.decisions
    assert "uid-good-pod" in {b.pod for b in d.binds}  # on good-node or a mutant that is still a node
    assert not any(f.job == "pod:uid-good-pod" for f in d.faults)

    api = FakeApi()
    metrics = SchedulerMetrics()
    applier = Applier(api, cache, SCHED, metrics)
    for p in cache.problems.values():  # the objects exist, so pod condition patches land
        if p.kind == "Pod":
            api.put(f"/api/v1/namespaces/{p.namespace}/pods/{p.name}", {"metadata": {"name": p.name}})
    asyncio.run(applier.apply_reports(d, _stats()))
    asyncio.run(applier.apply_reports(d, _stats()))  # a second cycle with the same world
    reported = Counter((c.body["involvedObject"]["kind"], c.body["involvedObject"]["name"])
                       for c in api.sent("POST", "/events")
                       if c.body["reason"] in ("InvalidSpec", "FailedScheduling")
                       and "is invalid and is not scheduled" in c.body["message"])
    assert reported == Counter((p.kind, p.name) for p in cache.problems.values())


def _stats() -> Any:
    from shoal.kube.applier import ApplyStats
    return ApplyStats()
