"""Grouper for LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): one PodGroup per group (leader + workers),
with optional segments of workers placed together."""

from __future__ import annotations

from dataclasses import replace

from shoal.workloads.base import (
    SEGMENT_PREFERRED_ANNOTATION,
    SEGMENT_REQUIRED_ANNOTATION,
    SEGMENT_SIZE_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Context,
    base_spec,
    podgroup_name,
    with_min,
)
from shoal.workloads.spec import PodGroupSpec, SubGroupSpec, TopologyConstraint, select
from shoal.workloads.unstructured import View, parse_int_string

GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
MAX_SEGMENTS = 10_000


def _segment_size(ctx: Context, size: int) -> int | None:
    """subGroupPolicy.subGroupSize, else the segment-size annotation on the LWS, else on the worker
    template; None when none is set. Must be > 1 and <= the group size."""
    template = ctx.top.sub("spec", "leaderWorkerTemplate")
    if template.has("subGroupPolicy", "subGroupSize"):
        where, field = template, "subGroupPolicy.subGroupSize"
        seg = template.integer("subGroupPolicy", "subGroupSize")
    else:
        field = f"metadata.annotations[{SEGMENT_SIZE_ANNOTATION}]"
        where = ctx.top
        raw = ctx.top.annotations().get(SEGMENT_SIZE_ANNOTATION)
        if raw is None:
            where = template.sub("workerTemplate")
            raw = where.string_map("metadata", "annotations").get(SEGMENT_SIZE_ANNOTATION)
        if raw is None:
            return None
        seg = parse_int_string(where, field, raw, minimum=2)
    if seg <= 1 or seg > size:
        raise where.error(field, f"segment size must be > 1 and <= the group size {size}, got {seg}")
    return seg


def _segment_topology(ctx: Context) -> TopologyConstraint | None:
    worker_ann = ctx.top.sub("spec", "leaderWorkerTemplate", "workerTemplate").string_map(
        "metadata", "annotations")
    pod_ann = ctx.pod_annotations if ctx.pod_is_real else {}

    def pick(key: str) -> str:
        return pod_ann.get(key) or worker_ann.get(key) or ""

    topology = pick(TOPOLOGY_ANNOTATION) or ctx.top.annotations().get(TOPOLOGY_ANNOTATION, "")
    required, preferred = pick(SEGMENT_REQUIRED_ANNOTATION), pick(SEGMENT_PREFERRED_ANNOTATION)
    if not topology or not (required or preferred):
        return None
    return TopologyConstraint(topology, required, preferred)


def _indexes(members: range | list[int]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return select((WORKER_INDEX_LABEL, [str(i) for i in members]))


def _plain_subgroups(members: int, size: int) -> list[SubGroupSpec]:
    out = [SubGroupSpec("leader", 1, pod_selector=_indexes([0]))]
    if members > 1:
        out.append(SubGroupSpec("workers", members - 1, pod_selector=_indexes(range(1, size))))
    return out


def _segmented_subgroups(ctx: Context, size: int, seg: int) -> list[SubGroupSpec]:
    """Segments over worker indexes. When (size−1) is divisible by the segment size the leader is an
    extra pod of segment 0, otherwise it counts as index 0 of segment 0. LeaderWorker (default) splits
    segment 0 into ``leader`` and ``workers`` children; LeaderExcluded puts the leader in its own
    top-level subgroup and needs (size−1) divisible by the segment size."""
    template = ctx.top.sub("spec", "leaderWorkerTemplate")
    policy = template.string("subGroupPolicy", "subGroupPolicyType", default="LeaderWorker")
    if policy not in ("LeaderWorker", "LeaderExcluded"):
        raise template.error("subGroupPolicy.subGroupPolicyType",
                             f"must be LeaderWorker or LeaderExcluded, got {policy!r}")
    divisible = (size - 1) % seg == 0
    if policy == "LeaderExcluded" and not divisible:
        raise template.error("subGroupPolicy.subGroupSize",
                             f"LeaderExcluded needs size-1 ({size - 1}) divisible by the segment size {seg}")

    def index(w: int) -> int:
        return 0 if w == 0 else ((w - 1) // seg if divisible else w // seg)

    count = index(size - 1) + 1
    if count > MAX_SEGMENTS:
        raise template.error("subGroupPolicy.subGroupSize", f"{count} segments exceed {MAX_SEGMENTS}")
    topology = _segment_topology(ctx)
    segments: list[list[int]] = [[] for _ in range(count)]
    for w in range(size):
        segments[index(w)].append(w)
    out: list[SubGroupSpec] = []
    if policy == "LeaderExcluded":
        out.append(SubGroupSpec("leader", 1, pod_selector=_indexes([0])))
        segments[0].remove(0)
    for i, members in enumerate(segments):
        if i == 0 and policy == "LeaderWorker":
            out.append(SubGroupSpec("segment-0", len(members), topology_constraint=topology))
            out.append(SubGroupSpec("leader", 1, parent="segment-0", pod_selector=_indexes([0])))
            if len(members) > 1:
                out.append(SubGroupSpec("workers", len(members) - 1, parent="segment-0",
                                        pod_selector=_indexes(members[1:])))
            continue
        out.append(SubGroupSpec(f"segment-{i}", len(members), topology_constraint=topology,
                                pod_selector=_indexes(members)))
    return out


def _leader_waiting(ctx: Context) -> bool:
    """Under LeaderReady the workers are created only once the leader runs: an unscheduled leader pod
    forms a gang of one."""
    return (ctx.pod_is_real and ctx.pod_labels.get(WORKER_INDEX_LABEL) == "0"
            and not ctx.pod.string("spec", "nodeName", default=""))


def lws(ctx: Context) -> list[PodGroupSpec]:
    """PodGroup ``pg-<lws>-<uid>-group-<i>`` per group (all ``spec.replicas`` groups without a real pod,
    the pod's group with one); min = size (LeaderCreated) or 1 for a waiting leader (LeaderReady)."""
    template = ctx.top.sub("spec", "leaderWorkerTemplate", required=True)
    size = template.integer("size", default=1)
    if size < 1:
        raise template.error("size", f"must be > 0, got {size}")
    policy = ctx.top.string("spec", "startupPolicy", default="LeaderCreated")
    if policy not in ("LeaderCreated", "LeaderReady"):
        raise ctx.top.error("spec.startupPolicy", f"must be LeaderCreated or LeaderReady, got {policy!r}")
    replicas = ctx.top.integer("spec", "replicas", default=1)
    if replicas < 0:
        raise ctx.top.error("spec.replicas", f"must be >= 0, got {replicas}")
    seg = _segment_size(ctx, size)
    members = 1 if policy == "LeaderReady" and _leader_waiting(ctx) else size
    if members < size or seg is None:
        groups = _plain_subgroups(members, size)
    else:
        groups = _segmented_subgroups(ctx, size, seg)
    base = replace(with_min(base_spec(ctx), ctx.top, "spec.leaderWorkerTemplate.size", members),
                   sub_groups=tuple(groups))
    return [replace(base, name=podgroup_name(ctx.top, "group", str(i)),
                    pod_selector=select((GROUP_INDEX_LABEL, str(i)))) for i in _group_indexes(ctx, replicas)]


def _group_indexes(ctx: Context, replicas: int) -> list[int]:
    if not ctx.pod_is_real:
        return list(range(replicas))
    raw = ctx.pod_labels.get(GROUP_INDEX_LABEL)
    if raw is None:
        raise View(ctx.pod.obj, kind="Pod").error(f"metadata.labels[{GROUP_INDEX_LABEL}]",
                                                  "a LeaderWorkerSet pod must carry its group index")
    return [parse_int_string(ctx.pod, f"metadata.labels[{GROUP_INDEX_LABEL}]", raw, minimum=0)]
