"""Grouper for JobSet (jobset.x-k8s.io/v1alpha2): one PodGroup per replicatedJob when the JobSet starts
its jobs in order, else one PodGroup for the whole JobSet."""

from __future__ import annotations

from dataclasses import replace

from shoal.workloads.base import Context, base_spec, podgroup_name, with_min
from shoal.workloads.spec import PodGroupSpec, SubGroupSpec, select
from shoal.workloads.unstructured import View

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def _replicated_jobs(ctx: Context) -> list[tuple[str, int]]:
    """(name, pods needed) per replicatedJob: replicas × min(parallelism, completions), defaults 1/1/=par."""
    jobs = ctx.top.items("spec", "replicatedJobs", required=True)
    if not jobs:
        raise ctx.top.error("spec.replicatedJobs", "must hold at least one replicatedJob")
    out: list[tuple[str, int]] = []
    for job in jobs:
        name = job.string("name")
        if not name:
            raise job.error("name", "must not be empty")
        replicas = job.integer("replicas", default=1)
        if replicas < 0:
            raise job.error("replicas", f"must be >= 0, got {replicas}")
        job_spec = job.sub("template", "spec")
        parallelism = job_spec.integer("parallelism", default=1)
        completions = job_spec.integer("completions", default=parallelism)
        if parallelism < 0 or completions < 0:
            raise job_spec.error("parallelism", "parallelism and completions must be >= 0")
        out.append((name, replicas * min(parallelism, completions)))
    return out


def jobset(ctx: Context) -> list[PodGroupSpec]:
    """``startupPolicy.startupPolicyOrder: InOrder``: a PodGroup ``pg-<js>-<uid>-<rj>`` per replicatedJob
    (min = its pods), since the JobSet controller starts one replicatedJob only after the previous one
    is ready; a gang across them would deadlock. Otherwise (AnyOrder, the JobSet default) one PodGroup with
    min = Σ and a subgroup per replicatedJob. With a real pod, InOrder returns only the pod's PodGroup.
    replicatedJobs with 0 pods are left out."""
    jobs = [(name, pods) for name, pods in _replicated_jobs(ctx) if pods > 0]
    order = ctx.top.string("spec", "startupPolicy", "startupPolicyOrder", default="AnyOrder")
    if order not in ("AnyOrder", "InOrder"):
        raise ctx.top.error("spec.startupPolicy.startupPolicyOrder",
                            f"must be AnyOrder or InOrder, got {order!r}")
    base = base_spec(ctx)
    if order == "AnyOrder":
        spec = with_min(base, ctx.top, "spec.replicatedJobs", sum(pods for _, pods in jobs))
        groups = tuple(SubGroupSpec(name, pods, pod_selector=select((REPLICATED_JOB_LABEL, name)))
                       for name, pods in jobs)
        return [replace(spec, sub_groups=groups)]
    wanted = ctx.pod_labels.get(REPLICATED_JOB_LABEL) if ctx.pod_is_real else None
    out = []
    for name, pods in jobs:
        if wanted is not None and name != wanted:
            continue
        out.append(replace(base, name=podgroup_name(ctx.top, name), min_member=pods,
                           pod_selector=select((REPLICATED_JOB_LABEL, name))))
    if not out:
        raise View(ctx.pod.obj, kind="Pod").error(f"metadata.labels[{REPLICATED_JOB_LABEL}]",
                                                  f"names no replicatedJob of JobSet {ctx.top.name}")
    return out
