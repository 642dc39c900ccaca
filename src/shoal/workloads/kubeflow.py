"""Groupers for Kubeflow training jobs: TFJob, PyTorchJob (elastic, master/worker subgroups, segments),
MPIJob (v1 and v2beta1, delayed launcher), XGBoostJob and JAXJob (kai-spec §6)."""

from __future__ import annotations

from dataclasses import replace

from shoal.workloads.base import (
    SEGMENT_PREFERRED_ANNOTATION,
    SEGMENT_REQUIRED_ANNOTATION,
    SEGMENT_SIZE_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Context,
    base_spec,
    with_min,
)
from shoal.workloads.spec import PodGroupSpec, SubGroupSpec, TopologyConstraint, select
from shoal.workloads.unstructured import View, parse_int_string

REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
MAX_SEGMENTS = 10_000  # KAI's bound: more subgroups than this is a mistake, not a workload


def replica_counts(ctx: Context, specs_field: str, required: tuple[str, ...]) -> dict[str, int]:
    """Replicas per replica type of ``spec.<specs_field>`` (a missing ``replicas`` defaults to 1, as the
    training operator's defaulting does). A missing required type or a type with < 1 replica is an error."""
    specs = ctx.top.sub("spec", specs_field, required=True)
    if not specs.obj:
        raise specs.error("", "must name at least one replica type")
    for role in required:
        if not specs.has(role):
            raise specs.error(role, f"required replica type {role!r} is missing")
    counts: dict[str, int] = {}
    for role in specs.obj:
        replicas = specs.sub(str(role), required=True).integer("replicas", default=1)
        if replicas < 1:
            raise specs.error(f"{role}.replicas", f"must be > 0, got {replicas}")
        counts[str(role)] = replicas
    return counts


def min_available(ctx: Context) -> int | None:
    """``spec.runPolicy.schedulingPolicy.minAvailable`` when set."""
    policy = ctx.top.sub("spec", "runPolicy", "schedulingPolicy")
    return policy.integer("minAvailable") if policy.has("minAvailable") else None


def distributed(ctx: Context, specs_field: str, required: tuple[str, ...] = ()) -> PodGroupSpec:
    """KAI's Kubeflow distributed grouper: min = schedulingPolicy.minAvailable, else the sum of replicas."""
    counts = replica_counts(ctx, specs_field, required)
    explicit = min_available(ctx)
    if explicit is not None:
        return with_min(base_spec(ctx), ctx.top, "spec.runPolicy.schedulingPolicy.minAvailable", explicit)
    return with_min(base_spec(ctx), ctx.top, f"spec.{specs_field}", sum(counts.values()))


def tfjob(ctx: Context) -> list[PodGroupSpec]:
    return [distributed(ctx, "tfReplicaSpecs")]


def xgboostjob(ctx: Context) -> list[PodGroupSpec]:
    return [distributed(ctx, "xgbReplicaSpecs", ("Master", "Worker"))]


def jaxjob(ctx: Context) -> list[PodGroupSpec]:
    return [distributed(ctx, "jaxReplicaSpecs", ("Worker",))]


def mpijob(ctx: Context) -> list[PodGroupSpec]:
    """MPIJob v1/v2beta1: distributed over Launcher + Worker. With ``launcherCreationPolicy:
    WaitForWorkersReady`` and no launcher pod yet, the launcher is left out of the gang (it is created
    only once the workers run). The launcher "exists" when the pod, or a sibling pod the caller passes,
    carries ``training.kubeflow.org/job-role: launcher`` and is not being deleted."""
    spec = distributed(ctx, "mpiReplicaSpecs", ("Launcher", "Worker"))
    if ctx.top.string("spec", "launcherCreationPolicy", default="") != "WaitForWorkersReady":
        return [spec]
    if _launcher_exists(ctx):
        return [spec]
    launchers = ctx.top.integer("spec", "mpiReplicaSpecs", "Launcher", "replicas", default=1)
    return [with_min(spec, ctx.top, "spec.launcherCreationPolicy", spec.min_member - launchers)]


def _launcher_exists(ctx: Context) -> bool:
    candidates = [ctx.pod] if ctx.pod_is_real else []
    candidates += [View(p) for p in ctx.sibling_pods]
    for candidate in candidates:
        labels = candidate.labels()
        role = labels.get(JOB_ROLE_LABEL) or labels.get(REPLICA_TYPE_LABEL)
        if role == "launcher" and not candidate.has("metadata", "deletionTimestamp"):
            return True
    return False


def pytorchjob(ctx: Context) -> list[PodGroupSpec]:
    """PyTorchJob: distributed min, overridden by ``elasticPolicy.minReplicas``, then by
    ``schedulingPolicy.minAvailable``; subgroups ``master`` and ``worker`` (min = max(0, min − master)),
    and with a segment size s the ``worker`` subgroup parents ``worker-<i>`` of s workers each."""
    counts = replica_counts(ctx, "pytorchReplicaSpecs", ())
    minimum, field_path = sum(counts.values()), "spec.pytorchReplicaSpecs"
    elastic = ctx.top.sub("spec", "elasticPolicy")
    if elastic.has("minReplicas"):
        minimum, field_path = elastic.integer("minReplicas"), "spec.elasticPolicy.minReplicas"
    explicit = min_available(ctx)
    if explicit is not None:
        minimum, field_path = explicit, "spec.runPolicy.schedulingPolicy.minAvailable"
    spec = with_min(base_spec(ctx), ctx.top, field_path, minimum)
    masters = counts.get("Master", 0)
    groups: list[SubGroupSpec] = []
    if masters:
        groups.append(SubGroupSpec("master", masters, pod_selector=select((REPLICA_TYPE_LABEL, "master"))))
    if "Worker" in counts:
        groups += _worker_subgroups(ctx, counts["Worker"], max(0, minimum - masters))
    return [replace(spec, sub_groups=tuple(groups))]


def _worker_subgroups(ctx: Context, workers: int, worker_min: int) -> list[SubGroupSpec]:
    worker_sel = select((REPLICA_TYPE_LABEL, "worker"))
    template = ctx.top.sub("spec", "pytorchReplicaSpecs", "Worker", "template", "metadata")
    template_ann = template.string_map("annotations")
    pod_ann = ctx.pod_annotations if ctx.pod_is_real else {}
    raw = pod_ann.get(SEGMENT_SIZE_ANNOTATION) or template_ann.get(SEGMENT_SIZE_ANNOTATION)
    if not raw:
        return [SubGroupSpec("worker", worker_min, pod_selector=worker_sel)]
    where = ctx.pod if pod_ann.get(SEGMENT_SIZE_ANNOTATION) else template
    size = parse_int_string(where, f"annotations[{SEGMENT_SIZE_ANNOTATION}]", raw, minimum=1)
    count = -(-workers // size)
    if count > MAX_SEGMENTS:
        raise where.error(f"annotations[{SEGMENT_SIZE_ANNOTATION}]",
                          f"{count} segments exceed the limit of {MAX_SEGMENTS}")
    topology = _segment_topology(ctx, pod_ann, template_ann)
    out = [SubGroupSpec("worker", worker_min)]
    for i in range(count):
        members = range(i * size, min((i + 1) * size, workers))
        out.append(SubGroupSpec(
            f"worker-{i}", len(members), parent="worker", topology_constraint=topology,
            pod_selector=(*worker_sel, (REPLICA_INDEX_LABEL, tuple(str(m) for m in members))),
        ))
    return out


def _segment_topology(ctx: Context, pod_ann: dict[str, str],
                      template_ann: dict[str, str]) -> TopologyConstraint | None:
    """Segment placement: topology from pod, worker template, then job annotations; levels from the
    segment placement annotations on the pod or worker template. None unless a level is given."""

    def pick(key: str) -> str:
        return pod_ann.get(key) or template_ann.get(key) or ""

    topology = pick(TOPOLOGY_ANNOTATION) or ctx.top.annotations().get(TOPOLOGY_ANNOTATION, "")
    required, preferred = pick(SEGMENT_REQUIRED_ANNOTATION), pick(SEGMENT_PREFERRED_ANNOTATION)
    if not topology or not (required or preferred):
        return None
    return TopologyConstraint(topology, required, preferred)
