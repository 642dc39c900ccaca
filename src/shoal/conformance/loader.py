"""Scenario YAML (schema: data/conformance/README.md) -> ClusterSnapshot + SchedulerConfig.

Reproduces the facts of KAI's test fakes the README lists: creation times from `derived`,
default gang = all tasks, CPU in cores, memory in bytes, GPU fractions as annotations, running
shared pods without groups on fresh devices, last start time one minute ago for allocated jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shoal.framework.config import PluginConfig, SchedulerConfig
from shoal.kai.units import (
    GPU_MEMORY_FLOOR_MIB,
    fraction_request,
    gpu_fraction_milli,
    node_gpu_memory_mib,
    preemptibility,
    queue_amount,
)
from shoal.model import (
    ClusterSnapshot,
    GpuRequest,
    Node,
    Pod,
    PodGroup,
    PodSetSpec,
    PodStatus,
    Queue,
    QueueResource,
    SubGroupSetSpec,
    Topology,
    TopologyConstraint,
)
from shoal.model.constraints import (
    LabelSelector,
    NodeAffinity,
    NodeSelectorTerm,
    PodAffinity,
    PodAffinityTerm,
    Requirement,
)
from shoal.model.dra import ResourceClaim, ResourceSlice, pod_dra_gpus
from shoal.model.resources import GPU
from shoal.model.status import ALLOCATED

NOW = 1_700_000_000.0
MINUTE = 60.0


class ScenarioError(ValueError):
    """A scenario file that cannot be read; the message names the file and field."""


@dataclass(slots=True)
class Scenario:
    id: str
    kind: str
    actions: list[str]
    data: dict[str, Any]
    path: str = ""
    #: Why the scenario cannot run yet (a feature not built), or "".
    unsupported: str = ""
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)


def _constraint(raw: dict[str, Any] | None) -> TopologyConstraint | None:
    if not raw:
        return None
    return TopologyConstraint(raw.get("topology", ""), raw.get("required_level", "") or "",
                              raw.get("preferred_level", "") or "")


def build_config(sc: Scenario) -> SchedulerConfig:
    derived = sc.data.get("derived") or {}
    plugins = tuple(PluginConfig(p["name"], {k: str(v) for k, v in (p.get("arguments") or {}).items()})
                    for p in derived.get("plugins") or [])
    opts = sc.data.get("options") or {}
    return SchedulerConfig(
        actions=tuple(sc.actions),
        plugins=plugins,
        staleness_grace_seconds=float(opts.get("global_default_staleness_grace_period_seconds", 0) or 0),
        max_consolidation_preemptees=-1,
        allow_consolidating_reclaim=True,
    )


def build_snapshot(sc: Scenario, jobs_state: list[dict[str, Any]] | None = None) -> ClusterSnapshot:
    """The snapshot of the scenario; `jobs_state` overrides the jobs' task states (full_cycle)."""
    d = sc.data
    derived = d.get("derived") or {}
    snap = ClusterSnapshot(now=NOW)
    for name, nd in (derived.get("nodes") or {}).items():
        snap.nodes.append(_node(name, nd, _raw_node(d, name)))
    for q in derived.get("queue_hierarchy") or []:
        snap.queues.append(_queue(q))
    for t in d.get("topologies") or []:
        levels = tuple(lv["nodeLabel"] for lv in (t.get("spec") or {}).get("levels") or [])
        snap.topologies.append(Topology(t["metadata"]["name"], levels))
    for raw in jobs_state if jobs_state is not None else d.get("jobs") or []:
        pg, pods = _job(raw, (derived.get("jobs") or {}).get(raw["name"]) or {})
        snap.podgroups.append(pg)
        snap.pods.extend(pods)
    if d.get("dra"):
        _apply_dra(d["dra"], jobs_state if jobs_state is not None else d.get("jobs") or [], snap)
    return snap


def _apply_dra(dra: dict[str, Any], jobs: list[dict[str, Any]], snap: ClusterSnapshot) -> None:
    """DRA objects of the scenario (README §3 `dra`): claims and slices (devices "0".., pool = the
    node); every slice device is also a GPU of its node (the fake's driver is nvidia.com/gpu); pods
    get their claim names and claimed GPUs."""
    for c in dra.get("resource_claims") or []:
        status = c.get("claim_status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        claim = ResourceClaim(
            name=c["name"], namespace=c.get("namespace", "") or "", device_class=c.get("device_class_name", ""),
            count=int(c.get("count", 1) or 1), labels={k: str(v) for k, v in (c.get("labels") or {}).items()},
            reserved_for=len(status.get("reservedFor") or []),
            allocated=tuple(f"{r.get('pool', '')}/{r.get('device', '')}" for r in results))
        snap.resource_claims[(claim.namespace, claim.name)] = claim
    nodes = {n.name: n for n in snap.nodes}
    for sl in dra.get("resource_slices") or []:
        name, count = sl.get("node_name", ""), int(sl.get("count", 0) or 0)
        snap.resource_slices.append(ResourceSlice(str(sl.get("name", "")), name, GPU,
                                                  tuple(str(k) for k in range(count)), pool=name))
        node = nodes.get(name)
        if node is not None:
            node.allocatable[GPU] = node.allocatable.get(GPU, 0) + count
    names: dict[str, tuple[str, ...]] = {}
    for raw in jobs:
        for i, t in enumerate(raw.get("tasks") or []):
            if t.get("resource_claim_names"):
                names[t.get("name") or f"{raw['name']}-{i}"] = tuple(t["resource_claim_names"])
    for pod in snap.pods:
        claims = names.get(pod.uid)
        if claims:
            pod.resource_claims = claims
            pod.dra_gpus = pod_dra_gpus(pod.namespace, claims, snap.resource_claims)


def _raw_node(d: dict[str, Any], name: str) -> dict[str, Any]:
    for n in d.get("nodes") or []:
        if n.get("name") == name:
            return dict(n)
    return {}


def _node(name: str, nd: dict[str, Any], raw: dict[str, Any]) -> Node:
    alloc = nd.get("allocatable") or {}
    allocatable: dict[str, int] = {
        "cpu": int(alloc.get("milli_cpu", 0)),
        "memory": int(alloc.get("memory", 0)),
        "nvidia.com/gpu": int(alloc.get("gpus", 0)),
        "pods": int(alloc.get("pods", 110)),
    }
    for res, count in (alloc.get("mig") or {}).items():
        allocatable[res] = int(count)
    labels = {k: str(v) for k, v in (nd.get("labels") or {}).items()}
    strategy = labels.get("nvidia.com/mig.strategy") or "none"
    return Node(
        name=name,
        allocatable=allocatable,
        labels=labels,
        gpu_memory_mib=node_gpu_memory_mib(int(nd.get("gpu_memory", GPU_MEMORY_FLOOR_MIB))),
        gpu_memory_synced=bool(raw.get("gpu_memory_synced", True)),
        mig_strategy=strategy,
        mig_enabled=labels.get("node-role.kubernetes.io/mig-enabled") == "true",
    )


def _queue(q: dict[str, Any]) -> Queue:
    res = q.get("resources")

    def rr(name: str) -> QueueResource:
        if res is None:
            return QueueResource(0, 0, 0.0)
        r = res.get(name) or {}

        def conv(v: Any) -> int:
            return queue_amount(float(v if v is not None else -1), name)
        return QueueResource(conv(r.get("quota", -1)), conv(r.get("limit", -1)),
                             float(r.get("over_quota_weight", 1)))

    return Queue(
        name=q["name"],
        parent=q.get("parent_queue") or "",
        priority=100 if q.get("priority") is None else int(q["priority"]),
        creation=NOW + float(q.get("creation_offset_minutes", 0)) * MINUTE,
        gpu=rr("gpu"),
        cpu=rr("cpu"),
        memory=rr("memory"),
    )


def _gpu_request(req: dict[str, Any], override: int | None) -> GpuRequest:
    if override is not None:
        return GpuRequest(whole=int(override))
    mem = int(req.get("gpu_memory", 0) or 0)
    devices = int(req.get("gpu_fraction_devices", 1) or 1)
    if req.get("gpu_fraction") and not mem:
        return fraction_request(float(req["gpu_fraction"]), devices, "task_request.gpu_fraction")
    if req.get("gpu_fraction"):
        # KAI's test fakes may set the fraction and the memory side by side, unchecked.
        portion = gpu_fraction_milli(float(req["gpu_fraction"]))
        return GpuRequest(portion_milli=portion, devices=devices, memory_mib=mem)
    if mem:
        return GpuRequest(memory_mib=mem, devices=devices)
    return GpuRequest(whole=int(req.get("gpus", 0) or 0))


def _job(raw: dict[str, Any], dj: dict[str, Any]) -> tuple[PodGroup, list[Pod]]:
    name = raw["name"]
    tasks = raw.get("tasks") or []
    pod_sets = [PodSetSpec(ps["name"], int(ps.get("min_available", 1)), ps.get("parent", "") or "",
                           _constraint(ps.get("topology_constraint")))
                for ps in dj.get("pod_sets") or []]
    sub_sets: list[SubGroupSetSpec] = []
    root = raw.get("root_sub_group_set")
    root_topology = None
    if root:
        root_topology = _constraint(root.get("topology_constraint"))
        pod_sets = _tree_pod_sets(root, "", pod_sets, sub_sets)
    priority = int(raw.get("priority", 0))
    pg = PodGroup(
        uid=name, name=name, namespace=raw.get("namespace", "") or "", queue=raw["queue_name"],
        priority=priority, preemptible=preemptibility(dj.get("preemptibility"), priority, "preemptibility"),
        creation=NOW + float(dj.get("creation_offset_minutes", 0)) * MINUTE,
        pod_sets=pod_sets, sub_group_sets=sub_sets, topology=root_topology,
    )
    req = dj.get("task_request") or {}
    pods = []
    for i, t in enumerate(tasks):
        pods.append(_pod(name, i, t, raw, req))
    if req.get("gpu_fraction") and not any(t.get("required_gpus") is not None for t in tasks):
        pg.allocated_bias = kai_builder_bias(pods)
    if any(p.status & ALLOCATED for p in pods):
        pg.last_start_time = NOW - MINUTE
    if raw.get("stale_duration_seconds") is not None:
        pg.stale_since = NOW - float(raw["stale_duration_seconds"])
    return pg, pods


def kai_builder_bias(pods: list[Pod]) -> tuple[float, float, float]:
    """What KAI's test builder puts in a fractional job's `Allocated` beyond its allocated pods.

    KAI's scenario builder (`test_utils/jobs_fake`, `resourceFractionCalc`) counts a job of
    GPU-fraction pods once per node its pods are on (the first such pod's CPU, memory and GPU
    share), where KAI's cache counts every allocated pod. KAI keeps `Allocated` up to date as
    pods change status, so the difference stays for the whole session and shows where KAI reads
    it: the victims' resources in the queue order of victim queues. KAI's decisions in these
    scenarios (its corpus, kai-oracle's) depend on it, so the scenario carries it; a live job has
    none. Returned in core units (GPU milli, CPU milli, bytes)."""
    first: dict[str, Pod] = {}
    for p in pods:
        if p.node and p.node not in first:
            first[p.node] = p

    def total(ps: list[Pod]) -> tuple[float, float, float]:
        gpu = sum(float(p.gpu.portion_milli * p.gpu.devices) for p in ps)
        return gpu, float(sum(p.cpu_milli for p in ps)), float(sum(p.memory for p in ps))

    builder, real = total(list(first.values())), total([p for p in pods if p.status & ALLOCATED])
    return builder[0] - real[0], builder[1] - real[1], builder[2] - real[2]


def _tree_pod_sets(node: dict[str, Any], parent: str, derived: list[PodSetSpec],
                   sub_sets: list[SubGroupSetSpec]) -> list[PodSetSpec]:
    """Parents of pod sets from the raw tree; mins from `derived` (which adds implicit `default`)."""
    parents: dict[str, str] = {}

    def walk(n: dict[str, Any], par: str) -> None:
        for ps in n.get("pod_sets") or []:
            parents[ps["name"]] = par
        for sg in n.get("sub_groups") or []:
            sub_sets.append(SubGroupSetSpec(sg["name"], par, _constraint(sg.get("topology_constraint"))))
            walk(sg, sg["name"])

    walk(node, parent)
    return [PodSetSpec(ps.name, ps.min_available, parents.get(ps.name, ""), ps.topology) for ps in derived]


def _pod(job: str, i: int, t: dict[str, Any], raw: dict[str, Any], req: dict[str, Any]) -> Pod:
    uid = t.get("name") or f"{job}-{i}"
    status = PodStatus.parse(t.get("state", "Pending"))
    best_effort = bool(raw.get("is_best_effort_job"))
    labels = {"job-name": uid}
    labels.update({k: str(v) for k, v in (t.get("pod_affinity_labels") or {}).items()})
    namespace = raw.get("namespace", "") or ""
    selector = LabelSelector(tuple(Requirement(k, "In", (str(v),))
                                   for k, v in sorted((t.get("pod_affinity_labels") or {}).items())))
    required = tuple(PodAffinityTerm(selector, t[k], frozenset((namespace,)))
                     for k in ("pod_affinity_topology_key",) if t.get(k))
    anti = tuple(PodAffinityTerm(selector, t[k], frozenset((namespace,)))
                 for k in ("pod_anti_affinity_topology_key",) if t.get(k))
    node_affinity = None
    if t.get("node_affinity_names"):
        term = NodeSelectorTerm((Requirement("kai.scheduler/type", "In", tuple(t["node_affinity_names"])),))
        node_affinity = NodeAffinity(required=(term,))
    gpu = GpuRequest() if best_effort else _gpu_request(req, t.get("required_gpus"))
    return Pod(
        uid=uid, name=uid, namespace=namespace, job=job, status=status,
        cpu_milli=0 if best_effort else int(req.get("milli_cpu", 1000)),
        memory=0 if best_effort else int(req.get("memory", 10**9)),
        gpu=gpu,
        mig={k: int(v) for k, v in (t.get("required_mig_instances") or {}).items()},
        # Kept for every status (KAI keeps a pod's node name); only active pods are placed.
        node=t.get("node_name"),
        gpu_groups=[str(g) for g in t.get("gpu_groups") or []],
        labels=labels,
        subgroup=t.get("sub_group_name", "") or "",
        task_priority=t.get("priority"),
        node_affinity=node_affinity,
        pod_affinity=PodAffinity(required=required, required_anti=anti) if required or anti else None,
        legacy_mig=bool(t.get("is_legacy_mig_task")),
        best_effort=best_effort,
    )
