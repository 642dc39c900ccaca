"""Grouper for JobSet (jobset.x-k8s.io/v1alpha2): one PodGroup per replicatedJob when the JobSet starts
its jobs in order (KAI's default when `startupPolicyOrder` is absent), else one PodGroup for the whole
JobSet. Names and sizes as KAI's jobset grouper."""

from __future__ import annotations

from dataclasses import replace

from shoal.workloads.base import Context, base_spec, podgroup_name, with_min
from shoal.workloads.spec import PodGroupSpec, SubGroupSpec, select
from shoal.workloads.unstructured import View

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def _replicated_jobs(ctx: Context) -> list[tuple[str, int]]:
    """(name, pods needed) per replicatedJob, as KAI: replicas × min(parallelism, completions), where
    replicas and parallelism below 1 (or absent) count as 1 and completions only when set and > 0."""
    jobs = ctx.top.items("spec", "replicatedJobs", required=True)
    if not jobs:
        raise ctx.top.error("spec.replicatedJobs", "must hold at least one replicatedJob")
    out: list[tuple[str, int]] = []
    for job in jobs:
        name = job.string("name")
        if not name:
            raise job.error("name", "must not be empty")
        replicas = max(job.integer("replicas", default=1), 1)
        job_spec = job.sub("template", "spec")
        parallelism = max(job_spec.integer("parallelism", default=1), 1)
        completions = job_spec.integer("completions", default=0)
        if 0 < completions < parallelism:
            parallelism = completions
        out.append((name, replicas * parallelism))
    return out


def jobset(ctx: Context) -> list[PodGroupSpec]:
    """``startupPolicy.startupPolicyOrder: InOrder`` (KAI's default when absent): a PodGroup
    ``pg-<js>-<uid>-<rj>`` per replicatedJob (min = its pods), since the JobSet controller starts one
    replicatedJob only after the previous one is ready; a gang across them would deadlock. AnyOrder:
    one PodGroup with min = Σ and a subgroup per replicatedJob. With a real pod, InOrder returns only
    the pod's PodGroup."""
    jobs = _replicated_jobs(ctx)
    order = ctx.top.string("spec", "startupPolicy", "startupPolicyOrder", default="InOrder")
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
