"""The front door of the workload map: pick the grouper for the top owner's kind and derive PodGroups."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shoal.workloads import jobset, kubeflow, lws, ray, standard
from shoal.workloads.base import Context
from shoal.workloads.errors import WorkloadError
from shoal.workloads.owners import controller_owner
from shoal.workloads.spec import PodGroupSpec
from shoal.workloads.templates import standin_pod
from shoal.workloads.unstructured import View

logger = logging.getLogger(__name__)

Grouper = Callable[[Context], list[PodGroupSpec]]
ANY_VERSION = "*"

# (group, kind) -> (versions served by the grouper, grouper). A known kind at another version falls back to
# the default grouper, like KAI's exact-GVK lookup.
GROUPERS: Mapping[tuple[str, str], tuple[tuple[str, ...], Grouper]] = {
    ("", "Pod"): (("v1",), standard.pod),
    ("batch", "Job"): (("v1",), standard.batch_job),
    ("batch", "CronJob"): (("v1",), standard.cron_job),
    ("apps", "Deployment"): (("v1",), standard.deployment),
    ("apps", "StatefulSet"): (("v1",), standard.plain_default),
    ("apps", "ReplicaSet"): (("v1",), standard.plain_default),
    ("serving.knative.dev", "Service"): (("v1",), standard.knative_service),
    ("kubeflow.org", "TFJob"): (("v1",), kubeflow.tfjob),
    ("kubeflow.org", "PyTorchJob"): (("v1",), kubeflow.pytorchjob),
    ("kubeflow.org", "MPIJob"): (("v1", "v2beta1"), kubeflow.mpijob),
    ("kubeflow.org", "XGBoostJob"): (("v1",), kubeflow.xgboostjob),
    ("kubeflow.org", "JAXJob"): (("v1",), kubeflow.jaxjob),
    ("kubeflow.org", "Notebook"): (("v1", "v1beta1"), standard.notebook),
    ("ray.io", "RayCluster"): (("v1", "v1alpha1"), ray.ray),
    ("ray.io", "RayJob"): (("v1", "v1alpha1"), ray.ray),
    ("ray.io", "RayService"): (("v1", "v1alpha1"), ray.ray),
    ("jobset.x-k8s.io", "JobSet"): (("v1alpha2",), jobset.jobset),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): (("v1",), lws.lws),
    ("egx.nvidia.io", "SPOTRequest"): (("v1",), standard.inference_default),
}

# Kinds that only orchestrate: the PodGroup comes from the owner below them (KAI's SkipTopOwner).
SKIPPED_TOP_OWNERS = frozenset({
    ("argoproj.io", "Workflow"),
    ("trainer.kubeflow.org", "TrainJob"),
    ("nvidia.com", "DynamoGraphDeployment"),
    ("run.ai", "TrainingWorkload"), ("run.ai", "InteractiveWorkload"), ("run.ai", "DistributedWorkload"),
    ("run.ai", "InferenceWorkload"), ("run.ai", "DistributedInferenceWorkload"),
})


def group_version_kind(view: View) -> tuple[str, str, str]:
    """(group, version, kind) of an object; the core group is ""."""
    api_version = view.string("apiVersion")
    kind = view.string("kind")
    if not kind:
        raise view.error("kind", "must not be empty")
    group, _, version = api_version.rpartition("/")
    return group, version, kind


def grouper_for(view: View) -> Grouper:
    """The grouper for ``view``'s kind and version; the default grouper for anything else."""
    group, version, kind = group_version_kind(view)
    entry = GROUPERS.get((group, kind))
    if entry is None or (version not in entry[0] and ANY_VERSION not in entry[0]):
        return standard.default_grouper
    return entry[1]


def _merge_down(skipped: View, below: View) -> dict[str, Any]:
    """``below`` with the skipped owner's labels and annotations added where ``below`` lacks them."""
    meta = dict(below.sub("metadata").obj)
    meta["labels"] = {**skipped.labels(), **below.labels()}
    meta["annotations"] = {**skipped.annotations(), **below.annotations()}
    return {**below.obj, "metadata": meta}


def _effective_chain(chain: list[View], pod: View | None) -> list[View]:
    """Drop skipped top owners, propagating their metadata down; a pod under only skipped owners
    becomes its own top owner."""
    while chain and (group_version_kind(chain[-1])[0], chain[-1].string("kind")) in SKIPPED_TOP_OWNERS:
        skipped = chain.pop()
        if chain:
            chain[-1] = View(_merge_down(skipped, chain[-1]))
        elif pod is not None:
            chain = [View(_merge_down(skipped, pod))]
        else:
            raise skipped.error("kind", f"a {skipped.string('kind')} is grouped through the objects it "
                                        "creates; pass the owner below it (a TrainJob's JobSet) or its pod")
    return chain


def _as_view(obj: Any, where: str) -> View:
    if not isinstance(obj, Mapping):
        raise WorkloadError("object", where, "", f"must be an object, got {type(obj).__name__}")
    view = View(obj)
    controller_owner(obj)  # validates ownerReferences: ambiguous owners are an error on that object
    return view


def derive_podgroups(
    owner_chain: Sequence[Mapping[str, Any]],
    pod: Mapping[str, Any] | None,
    *,
    priority_classes: Mapping[str, int] | None = None,
    default_queue: str = "default-queue",
    sibling_pods: Sequence[Mapping[str, Any]] = (),
) -> list[PodGroupSpec]:
    """The PodGroups for a workload, given its owner chain (direct owner first, top owner last, as
    unstructured dicts) and the pod being grouped.

    With ``pod=None`` the top owner's pod template stands in for the pod and every PodGroup the workload
    implies is returned; with a real pod, kinds that map one workload to several PodGroups return the
    pod's own. ``priority_classes`` (name -> value), when given, limits which priority class names count
    as existing. ``sibling_pods`` are other live pods of the workload (MPIJob looks for its launcher).
    Pure: never mutates its inputs. Raises `WorkloadError` for a malformed or ambiguous object.
    """
    chain = [_as_view(obj, f"owner_chain[{i}]") for i, obj in enumerate(owner_chain)]
    pod_view = _as_view(pod, "pod") if pod is not None else None
    chain = _effective_chain(chain, pod_view)
    if not chain:
        if pod_view is None:
            raise WorkloadError("object", "<none>", "", "nothing to group: no owner and no pod")
        chain = [pod_view]
    top = chain[-1]
    real = pod_view is not None
    ctx = Context(
        top=top, owners=tuple(chain), pod=pod_view if pod_view is not None else View(standin_pod(top)),
        pod_is_real=real, priority_classes=priority_classes, default_queue=default_queue,
        sibling_pods=tuple(sibling_pods),
    )
    grouper = grouper_for(top)
    try:
        return grouper(ctx)
    except WorkloadError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as err:
        # A shape no rule anticipated: report it on the object instead of crashing the caller.
        logger.debug("grouper %s failed on %s", grouper.__name__, top.name, exc_info=True)
        message = f"malformed object ({type(err).__name__}: {err})"
        raise WorkloadError(top.kind, top.name, "", message) from err
