"""Groupers for Kubernetes' own kinds (Job, CronJob, Deployment, StatefulSet, ReplicaSet, bare and Spark
pods), Knative Services, and the default grouper for any other kind."""

from __future__ import annotations

from dataclasses import replace

from shoal.workloads.base import Context, base_spec, owner_ref, podgroup_name
from shoal.workloads.spec import PodGroupSpec

SPARK_APP_NAME_LABEL = "spark-app-name"
SPARK_APP_SELECTOR_LABEL = "spark-app-selector"


def default_grouper(ctx: Context) -> list[PodGroupSpec]:
    """Any kind without its own grouper: one PodGroup per top owner, min 1, priority `train`.

    Priority looks through the whole owner chain (direct owner first), as KAI's bare DefaultGrouper does.
    """
    return [base_spec(ctx, owners=ctx.owners)]


def batch_job(ctx: Context) -> list[PodGroupSpec]:
    """batch/v1 Job: one PodGroup per pod, ``pg-<pod>-<jobUID>``, min 1 (a Job's pods need no gang)."""
    spec = base_spec(ctx)
    name = f"pg-{ctx.pod.string('metadata', 'name', default=ctx.top.string('metadata', 'name'))}"
    uid = ctx.top.string("metadata", "uid", default="")
    return [replace(spec, name=f"{name}-{uid}" if uid else name)]


def cron_job(ctx: Context) -> list[PodGroupSpec]:
    """batch/v1 CronJob: the pod's owning Job is the top owner, grouped by the default grouper.

    Without a Job in the chain (a CronJob read from a file) the CronJob itself stands in.
    """
    job = next((owner for owner in ctx.owners if owner.string("kind", default="") == "Job"), None)
    if job is None:
        return [base_spec(ctx)]
    as_job = Context(top=job, owners=(job,), pod=ctx.pod, pod_is_real=ctx.pod_is_real,
                     priority_classes=ctx.priority_classes, default_queue=ctx.default_queue,
                     sibling_pods=ctx.sibling_pods)
    return [base_spec(as_job)]


def per_pod(ctx: Context, default_priority: str) -> PodGroupSpec:
    """A PodGroup owned by the pod itself (``pg-<pod>-<podUID>``), min 1."""
    spec = base_spec(ctx, default_priority=default_priority)
    return replace(spec, name=podgroup_name(ctx.pod), owner_reference=owner_ref(ctx.pod))


def deployment(ctx: Context) -> list[PodGroupSpec]:
    """apps/v1 Deployment: one PodGroup per pod, default priority `inference`."""
    return [per_pod(ctx, "inference")]


def knative_service(ctx: Context) -> list[PodGroupSpec]:
    """serving.knative.dev/v1 Service: one PodGroup per pod, default priority `inference`.

    KAI's gang mode (a PodGroup per Revision with min = `autoscaling.knative.dev/min-scale`) is not
    implemented: it needs the Revision objects, which the offline map does not see.
    """
    return [per_pod(ctx, "inference")]


def plain_default(ctx: Context) -> list[PodGroupSpec]:
    """StatefulSet, ReplicaSet and the other kinds KAI maps to the DefaultGrouper on the top owner only."""
    return [base_spec(ctx)]


def notebook(ctx: Context) -> list[PodGroupSpec]:
    """kubeflow.org Notebook: default grouper, default priority `build` (interactive, non-preemptible)."""
    return [base_spec(ctx, default_priority="build")]


def inference_default(ctx: Context) -> list[PodGroupSpec]:
    """Serving kinds without gang semantics (SPOTRequest): default grouper, priority `inference`."""
    return [base_spec(ctx, default_priority="inference")]


def pod(ctx: Context) -> list[PodGroupSpec]:
    """A pod with no owner (or owned by another pod): one PodGroup for it, min 1.

    Spark pods (labels `spark-app-name` and `spark-app-selector`) are grouped by application: the
    PodGroup is named after `spark-app-selector`, so the driver and its executors share it.
    """
    spec = base_spec(ctx)
    labels = ctx.pod_labels
    if labels.get(SPARK_APP_NAME_LABEL) and labels.get(SPARK_APP_SELECTOR_LABEL):
        spec = replace(spec, name=labels[SPARK_APP_SELECTOR_LABEL])
    return [spec]
