"""The pod grouper on the real API server: operator workloads become gang-scheduled PodGroups.

The published CRDs of PyTorchJob, RayCluster, JobSet and LeaderWorkerSet (``data/crds/``) are
created once per session. No operator runs: each test creates the owner object, then what its operator
would create (pods with the operator's labels and a controller ownerReference; for a JobSet, its Jobs,
whose pods the real Job controller makes). One `shoal run` (with its pod grouper) serves the module.
"""

from __future__ import annotations

import string
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Event, Pod

from .cluster import Cluster, KEnv, data_text, wait_crd_served
from .scheduler_fixtures import (
    PodGroupRes,
    ShoalProcess,
    create,
    ensure_queue,
    pod_manifest,
    shoal_runner,  # noqa: F401  (fixture)
)

pytestmark = pytest.mark.e2e

CRD_FILES = (
    "kubeflow-training-operator-v1/kubeflow.org_pytorchjobs.yaml",
    "kuberay/ray.io_rayclusters.yaml",
    "jobset/jobset.x-k8s.io_jobsets.yaml",
    "lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
)
# Registered so that `codecs.from_dict` (used by `create`) knows these kinds.
PyTorchJobRes = create_namespaced_resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
RayClusterRes = create_namespaced_resource("ray.io", "v1", "RayCluster", "rayclusters")
JobSetRes = create_namespaced_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
LeaderWorkerSetRes = create_namespaced_resource("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet",
                                                "leaderworkersets")

DATA = Path(__file__).resolve().parent / "data"
POOL_LABEL = "shoal.dev/e2e-pool"  # pods select their test's nodes: stray nodes cannot satisfy a gang
PG_ANNOTATION = "pod-group-name"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"

Manifest = dict[str, Any]


# -- fixtures ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def workload_crds(cluster: Cluster) -> None:
    """Create (plain POST: client-side apply would overflow the annotation limit) the four operator CRDs
    once per session and wait until each is Established and served. An existing CRD is kept."""
    client = cluster.client()
    created: list[Any] = []
    for rel in CRD_FILES:
        doc = yaml.load(data_text(f"crds/{rel}"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        crd = codecs.from_dict(doc)
        try:
            created.append(client.create(crd))
        except ApiError as e:
            if e.status.code != 409:
                raise
            created.append(client.get(CustomResourceDefinition, doc["metadata"]["name"]))
    for crd in created:
        wait_crd_served(client, crd, timeout=60)


@pytest.fixture(scope="module")
def grouping_shoal(cluster: Cluster, workload_crds: None,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShoalProcess]:
    """One `shoal run` (pod grouper on, the default) for the module: starting one per test costs more
    than the tests on a busy 2-core machine. Every test uses its own namespace, nodes and queue."""
    log = tmp_path_factory.mktemp("shoal-workloads") / "shoal.log"
    proc = ShoalProcess(cluster, f"shoal-wl-{uuid.uuid4().hex[:6]}", log).start()
    try:
        yield proc
    finally:
        proc.stop()


# -- what an operator would create ---------------------------------------------------------------------------

def load_owner(fname: str, scheduler: str, pool: str, queue: str, **extra: str) -> Manifest:
    """An owner object from ``tests/e2e/data/`` with ``${SCHEDULER}``, ``${POOL}``, ``${QUEUE}`` (and
    ``extra``) filled in: the templates name our scheduler and select the test's nodes."""
    text = string.Template((DATA / fname).read_text())
    doc: Manifest = yaml.safe_load(text.substitute(SCHEDULER=scheduler, POOL=pool, QUEUE=queue, **extra))
    return doc


def owner_ref(owner: Any) -> dict[str, Any]:
    """The controller ownerReference an operator puts on what it creates."""
    return {"apiVersion": owner.apiVersion, "kind": owner.kind, "name": owner.metadata.name,
            "uid": owner.metadata.uid, "controller": True, "blockOwnerDeletion": True}


def operator_pod(name: str, owner: Any, tmpl: Manifest, labels: dict[str, str],
                 restart_policy: str = "Never") -> Manifest:
    """A pod stamped out of ``tmpl`` by an operator: template labels plus the operator's, owned by ``owner``."""
    meta = tmpl.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {**(meta.get("labels") or {}), **labels},
                         "annotations": dict(meta.get("annotations") or {}),
                         "ownerReferences": [owner_ref(owner)]},
            "spec": {**tmpl["spec"], "restartPolicy": restart_policy}}


def pytorch_pods(owner: Any) -> list[Manifest]:
    """Training-operator v1: `<job>-<type>-<i>` per replica, type lower-cased, `job-role: master` on masters."""
    job, pods = owner.metadata.name, []
    for rtype, rspec in owner.spec["pytorchReplicaSpecs"].items():
        role = rtype.lower()
        # The operator maps the replica restart policy ExitCode to a pod restart policy of Never.
        restart = {"ExitCode": "Never"}.get(rspec.get("restartPolicy", "Never"), rspec.get("restartPolicy", "Never"))
        for i in range(rspec.get("replicas", 1)):
            labels = {"training.kubeflow.org/job-name": job,
                      "training.kubeflow.org/operator-name": "pytorchjob-controller",
                      "training.kubeflow.org/replica-type": role, "training.kubeflow.org/replica-index": str(i)}
            if role == "master":
                labels["training.kubeflow.org/job-role"] = "master"
            pods.append(operator_pod(f"{job}-{role}-{i}", owner, rspec["template"], labels, restart_policy=restart))
    return pods


def ray_pods(owner: Any) -> list[Manifest]:
    """KubeRay: head `<cluster>-head-<rand>`, workers `<cluster>-<group>-worker-<rand>`."""
    common = {"ray.io/cluster": "ray", "ray.io/is-ray-node": "yes",
              "app.kubernetes.io/created-by": "kuberay-operator", "app.kubernetes.io/name": "kuberay"}
    pods = [operator_pod("ray-head-x7k2p", owner, owner.spec["headGroupSpec"]["template"],
                         {**common, "ray.io/node-type": "head", "ray.io/group": "headgroup",
                          "ray.io/identifier": "ray-head"}, restart_policy="Always")]
    for g in owner.spec["workerGroupSpecs"]:
        for i in range(g["replicas"]):
            pods.append(operator_pod(f"ray-{g['groupName']}-worker-{i}q9", owner, g["template"],
                                     {**common, "ray.io/node-type": "worker", "ray.io/group": g["groupName"],
                                      "ray.io/identifier": "ray-worker"}, restart_policy="Always"))
    return pods


def jobset_jobs(owner: Any) -> list[Manifest]:
    """The JobSet controller's Jobs `<js>-<rj>-<i>`; the real Job controller then creates their pods."""
    jobs, global_index = [], 0
    for rj in owner.spec["replicatedJobs"]:
        for i in range(rj["replicas"]):
            labels = {"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                      "jobset.sigs.k8s.io/replicatedjob-replicas": str(rj["replicas"]),
                      "jobset.sigs.k8s.io/job-index": str(i), "jobset.sigs.k8s.io/job-global-index": str(global_index),
                      "jobset.sigs.k8s.io/restart-attempt": "0", "jobset.sigs.k8s.io/jobset-uid": owner.metadata.uid}
            global_index += 1
            spec = rj["template"]["spec"]
            pod_tmpl = spec["template"]
            pod_tmpl = {"metadata": {"labels": {**((pod_tmpl.get("metadata") or {}).get("labels") or {}), **labels}},
                        "spec": {**pod_tmpl["spec"], "restartPolicy": "Never"}}
            jobs.append({"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": f"js-{rj['name']}-{i}", "labels": labels,
                                      "ownerReferences": [owner_ref(owner)]},
                         "spec": {**spec, "template": pod_tmpl}})
    return jobs


def lws_pods(owner: Any) -> list[Manifest]:
    """LWS: leader `<lws>-<g>`, workers `<lws>-<g>-<w>`, labels set by its controller and pod webhook.
    (The real chain has StatefulSets in between; the grouper only needs the top owner.)"""
    tmpl = owner.spec["leaderWorkerTemplate"]["workerTemplate"]
    pods = []
    for g in range(owner.spec["replicas"]):
        for w in range(owner.spec["leaderWorkerTemplate"]["size"]):
            labels = {"leaderworkerset.sigs.k8s.io/name": "lws", "leaderworkerset.sigs.k8s.io/group-index": str(g),
                      "leaderworkerset.sigs.k8s.io/worker-index": str(w),
                      "leaderworkerset.sigs.k8s.io/group-key": f"{g:040x}"}
            pods.append(operator_pod(f"lws-{g}" if w == 0 else f"lws-{g}-{w}", owner, tmpl, labels,
                                     restart_policy="Always"))
    return pods


@dataclass(frozen=True)
class Case:
    """A workload, what its operator creates, and what the grouper and scheduler must make of it.

    ``groups``: PodGroup name suffix (after ``pg-<owner>-<uid>``) -> (minMember, {subgroup: minMember}).
    ``assign``: pod labels -> (PodGroup suffix, subgroup or None) the pod must be labelled with.
    With ``short_nodes`` one-GPU nodes exactly ``bound_when_short`` pods (whole gangs) bind; after adding
    nodes up to ``nodes`` every pod binds.
    """

    owner: str  # file in tests/e2e/data/
    children: Callable[[Any], list[Manifest]]
    pods: int
    groups: dict[str, tuple[int, dict[str, int]]]
    assign: Callable[[dict[str, str]], tuple[str, str | None]]
    short_nodes: int
    nodes: int
    bound_when_short: int = 0
    owner_vars: tuple[tuple[str, str], ...] = ()


def _lws_assign(labels: dict[str, str]) -> tuple[str, str | None]:
    role = "leader" if labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0" else "workers"
    return f"-group-{labels['leaderworkerset.sigs.k8s.io/group-index']}", role


CASES = [
    pytest.param(Case("pytorchjob-elastic.yaml", pytorch_pods, pods=3, groups={"": (2, {"worker": 2})},
                      assign=lambda lb: ("", "worker"), short_nodes=1, nodes=3), id="pytorchjob-elastic"),
    pytest.param(Case("raycluster-two-groups.yaml", ray_pods, pods=4,
                      groups={"": (3, {"headgroup": 1, "small": 1, "big": 1})},
                      assign=lambda lb: ("", lb["ray.io/group"]), short_nodes=1, nodes=3),
                 id="raycluster-two-worker-groups"),
    pytest.param(Case("jobset.yaml", jobset_jobs, pods=3, groups={"": (3, {"driver": 1, "workers": 2})},
                      assign=lambda lb: ("", lb["jobset.sigs.k8s.io/replicatedjob-name"]), short_nodes=2,
                      nodes=3, owner_vars=(("ORDER", "AnyOrder"),)), id="jobset-anyorder-via-jobs"),
    # InOrder: one gang per replicatedJob; on one node the driver's gang of one runs, the workers' waits.
    pytest.param(Case("jobset.yaml", jobset_jobs, pods=3, groups={"-driver": (1, {}), "-workers": (2, {})},
                      assign=lambda lb: ("-" + lb["jobset.sigs.k8s.io/replicatedjob-name"], None), short_nodes=1,
                      nodes=3, bound_when_short=1, owner_vars=(("ORDER", "InOrder"),)),
                 id="jobset-inorder-gang-per-replicatedjob"),
    pytest.param(Case("leaderworkerset.yaml", lws_pods, pods=4,
                      groups={"-group-0": (2, {"leader": 1, "workers": 1}),
                              "-group-1": (2, {"leader": 1, "workers": 1})},
                      assign=_lws_assign, short_nodes=3, nodes=4, bound_when_short=2),
                 id="leaderworkerset-two-groups"),
]


# -- reading the outcome -----------------------------------------------------------------------------------

def _wait(probe: Callable[[], Any], timeout: float, what: str, shoal: ShoalProcess, interval: float = 0.3) -> Any:
    """Poll ``probe`` until truthy; on timeout fail with the scheduler's log tail."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})\n"
                         f"--- shoal log ---\n{shoal.tail(3000)}")


def _pods(client: Client, ns: str) -> list[Any]:
    return list(client.list(Pod, namespace=ns))


def _bound(pod: Any) -> bool:
    return bool(pod.spec.nodeName)


def _unschedulable(pod: Any) -> bool:
    conds = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable" and c.message
               for c in conds)


def _grouped(pods: list[Any], count: int) -> list[Any] | None:
    ok = len(pods) == count and all((p.metadata.annotations or {}).get(PG_ANNOTATION) for p in pods)
    return pods if ok else None


def _all_running(client: Client, ns: str, count: int) -> list[Any] | None:
    pods = _pods(client, ns)
    ok = len(pods) == count and all(_bound(p) and p.status.phase == "Running" for p in pods)
    return pods if ok else None


def _check_podgroups(client: Client, ns: str, owner: Any, case: Case, pods: list[Any], queue: str) -> None:
    """Each PodGroup: derived minMember / subgroups / queue, owned by the top owner; every pod annotated
    with its PodGroup and labelled with its subgroup."""
    base = f"pg-{owner.metadata.name}-{owner.metadata.uid}"
    for suffix, (minimum, subgroups) in case.groups.items():
        pg = client.get(PodGroupRes, base + suffix, namespace=ns)
        spec = pg["spec"]
        assert spec["minMember"] == minimum, spec
        assert {s["name"]: s["minMember"] for s in spec.get("subGroups") or []} == subgroups, spec
        assert spec["queue"] == queue and spec.get("priorityClassName") == "train", spec
        assert pg["metadata"]["ownerReferences"] == [owner_ref(owner)], pg["metadata"]
        assert (pg["metadata"].get("labels") or {}).get("kai.scheduler/queue") == queue  # copied from the owner
    for p in pods:
        suffix, subgroup = case.assign(p.metadata.labels)
        assert p.metadata.annotations[PG_ANNOTATION] == base + suffix, p.metadata.name
        assert p.metadata.labels.get(SUBGROUP_LABEL) == subgroup, (p.metadata.name, p.metadata.labels)


def _whole_gangs_only(pods: list[Any]) -> None:
    """All-or-nothing: within each PodGroup either every pod is bound or none is."""
    by_group: dict[str, set[bool]] = {}
    for p in pods:
        by_group.setdefault(p.metadata.annotations[PG_ANNOTATION], set()).add(_bound(p))
    split = [g for g, states in by_group.items() if len(states) > 1]
    assert not split, f"part of a gang was bound: {split}"


def _settle_short(client: Client, ns: str, bound: int, shoal: ShoalProcess) -> None:
    """With too few nodes: exactly ``bound`` pods (whole gangs) bind and stay so for a few more cycles;
    every other pod is PodScheduled=False/Unschedulable and its PodGroup has a scheduling condition."""
    def settled() -> list[Any] | None:
        now = _pods(client, ns)
        waiting = [p for p in now if not _bound(p)]
        return now if sum(map(_bound, now)) == bound and all(map(_unschedulable, waiting)) else None

    _wait(settled, 40, f"{bound} pods bound, the others Unschedulable", shoal)
    time.sleep(1.5)  # a few more cycles (period 0.5 s): nothing else may bind
    now = _pods(client, ns)
    assert sum(map(_bound, now)) == bound, [(p.metadata.name, p.spec.nodeName) for p in now]
    _whole_gangs_only(now)
    for name in sorted({p.metadata.annotations[PG_ANNOTATION] for p in now if not _bound(p)}):
        def reasons(n: str = name) -> Any:
            conds = (client.get(PodGroupRes, n, namespace=ns).get("status") or {}).get("schedulingConditions")
            return conds and conds[0].get("reasons")

        _wait(reasons, 20, f"PodGroup {name} schedulingConditions with reasons", shoal)


def _new_queue(kenv: KEnv) -> str:
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    return queue


# -- tests -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_workload_is_gang_scheduled_under_its_derived_podgroup(kenv: KEnv, grouping_shoal: ShoalProcess,
                                                               case: Case) -> None:
    shoal, client, ns, pool = grouping_shoal, kenv.client, kenv.namespace, kenv.node_prefix
    nodes = kenv.add_gpu_nodes(case.short_nodes, gpus=1, labels={POOL_LABEL: pool})
    queue = _new_queue(kenv)
    owner = create(kenv, load_owner(case.owner, shoal.scheduler_name, pool, queue, **dict(case.owner_vars)))
    for child in case.children(owner):
        create(kenv, child)
    kenv.wait_nodes_ready(nodes)
    pods = _wait(lambda: _grouped(_pods(client, ns), case.pods), 60, "every pod annotated with its PodGroup", shoal)
    _check_podgroups(client, ns, owner, case, pods, queue)

    # Too few nodes: whole gangs bind, the rest wait with a reason on pods and PodGroup.
    _settle_short(client, ns, case.bound_when_short, shoal)
    more = kenv.add_gpu_nodes(case.nodes - case.short_nodes, gpus=1, labels={POOL_LABEL: pool})
    kenv.wait_nodes_ready(more)
    running = _wait(lambda: _all_running(client, ns, case.pods), 60, "every pod bound and Running", shoal)
    assert {p.spec.nodeName for p in running} <= set(nodes + more)


def test_deployment_pods_each_get_their_own_podgroup(kenv: KEnv, grouping_shoal: ShoalProcess) -> None:
    """Pod -> ReplicaSet -> Deployment: the grouper follows the chain through the API and gives each pod
    its own PodGroup, owned by the pod (a serving workload is no gang). The test cluster runs no
    Deployment/ReplicaSet controllers, so the test creates the ReplicaSet and its pods as they would."""
    shoal, client, ns, pool = grouping_shoal, kenv.client, kenv.namespace, kenv.node_prefix
    nodes = kenv.add_gpu_nodes(2, gpus=1, labels={POOL_LABEL: pool})
    queue = _new_queue(kenv)
    manifest = load_owner("deployment.yaml", shoal.scheduler_name, pool, queue)
    deploy = create(kenv, manifest)
    hashed = {"app": "web", "pod-template-hash": "5d8f7c9b6d"}
    rs_tmpl = {**manifest["spec"]["template"], "metadata": {"labels": hashed}}
    rs = create(kenv, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                       "metadata": {"name": "web-5d8f7c9b6d", "labels": hashed, "ownerReferences": [owner_ref(deploy)]},
                       "spec": {"replicas": 2, "selector": {"matchLabels": hashed}, "template": rs_tmpl}})
    for suffix in ("x2k9p", "q7w4m"):
        create(kenv, operator_pod(f"web-5d8f7c9b6d-{suffix}", rs, rs_tmpl, {}, restart_policy="Always"))
    kenv.wait_nodes_ready(nodes)
    pods = _wait(lambda: _grouped(_all_running(client, ns, 2) or [], 2), 60, "both Deployment pods grouped and Running",
                 shoal)
    assert len({p.metadata.annotations[PG_ANNOTATION] for p in pods}) == 2
    for p in pods:
        name = f"pg-{p.metadata.name}-{p.metadata.uid}"
        assert p.metadata.annotations[PG_ANNOTATION] == name
        assert SUBGROUP_LABEL not in p.metadata.labels
        pg = client.get(PodGroupRes, name, namespace=ns)
        assert pg["spec"]["minMember"] == 1 and not pg["spec"].get("subGroups"), pg["spec"]
        # Queue from the Deployment (top owner) label, priority the serving default.
        assert pg["spec"]["queue"] == queue and pg["spec"].get("priorityClassName") == "inference", pg["spec"]
        assert pg["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": p.metadata.name,
                                                      "uid": p.metadata.uid, "controller": True,
                                                      "blockOwnerDeletion": True}]


def _kai_pytorch_example() -> Manifest:
    (doc,) = [d for d in yaml.safe_load_all(data_text("kai-examples/batch--pytorch-job.yaml")) if d]
    return dict(doc)


def test_kai_pytorch_example_is_accepted_unchanged_and_gang_scheduled(kenv: KEnv, workload_crds: None,
                                                                     shoal_runner: Any) -> None:
    client, ns = kenv.client, kenv.namespace
    doc = _kai_pytorch_example()
    owner = create(kenv, doc)  # the API server (with the published CRD) accepts the file as it is
    assert owner.spec["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert owner.spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    first = kenv.add_gpu_nodes(1, gpus=2)  # 3 one-GPU pods: the gang does not fit
    ensure_queue(client, "default-queue")
    shoal = shoal_runner("kai-scheduler")  # the example's templates name KAI's scheduler
    for pod in pytorch_pods(owner):
        create(kenv, pod)
    kenv.wait_nodes_ready(first)
    pods = _wait(lambda: _grouped(_pods(client, ns), 3), 60, "every pod annotated with its PodGroup", shoal)
    case = Case("(KAI example)", pytorch_pods, pods=3, groups={"": (3, {"master": 1, "worker": 2})},
                assign=lambda lb: ("", lb["training.kubeflow.org/replica-type"]), short_nodes=1, nodes=2)
    _check_podgroups(client, ns, owner, case, pods, "default-queue")
    _settle_short(client, ns, 0, shoal)
    more = kenv.add_gpu_nodes(1, gpus=1)
    kenv.wait_nodes_ready(more)
    running = _wait(lambda: _all_running(client, ns, 3), 60, "every pod bound and Running", shoal)
    assert sorted(p.spec.nodeName for p in running) == sorted([first[0], first[0], more[0]])


def test_owner_of_a_kind_that_is_not_installed_is_no_error(kenv: KEnv, grouping_shoal: ShoalProcess) -> None:
    """A pod owned by a kind whose CRD is not installed (TFJob here): reading the owner fails with 404,
    the chain ends at the pod, and the pod runs as its own gang of one."""
    shoal, client, ns, pool = grouping_shoal, kenv.client, kenv.namespace, kenv.node_prefix
    try:
        client.get(CustomResourceDefinition, "tfjobs.kubeflow.org")
        pytest.fail("the TFJob CRD is installed in the test cluster: this test needs a kind that is not")
    except ApiError as e:
        if e.status.code != 404:
            raise
    nodes = kenv.add_gpu_nodes(1, gpus=1, labels={POOL_LABEL: pool})
    queue = _new_queue(kenv)
    tfjob = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "tf", "uid": str(uuid.uuid4()),
             "controller": True, "blockOwnerDeletion": True}
    pod = pod_manifest("tf-worker-0", shoal.scheduler_name, gpus=1, queue=queue,  # no readable owner: pod's queue
                       labels={"training.kubeflow.org/replica-type": "worker"})
    pod["metadata"]["ownerReferences"] = [tfjob]
    pod["spec"]["nodeSelector"] = {POOL_LABEL: pool}
    create(kenv, pod)
    kenv.wait_nodes_ready(nodes)
    (running,) = _wait(lambda: _grouped(_all_running(client, ns, 1) or [], 1), 60, "the pod grouped and Running",
                       shoal)
    name = f"pg-tf-worker-0-{running.metadata.uid}"
    assert running.metadata.annotations[PG_ANNOTATION] == name
    pg = client.get(PodGroupRes, name, namespace=ns)
    assert pg["spec"]["minMember"] == 1 and pg["spec"]["queue"] == queue, pg["spec"]
    assert [(o["kind"], o["name"]) for o in pg["metadata"]["ownerReferences"]] == [("Pod", "tf-worker-0")]
    evs = client.list(Event, namespace=ns, fields={"involvedObject.name": "tf-worker-0"})
    assert not [e for e in evs if e.reason == "PodGrouperError"], "a missing CRD was reported as an error"


def test_ray_pod_without_its_group_label_joins_the_cluster_podgroup(kenv: KEnv, grouping_shoal: ShoalProcess) -> None:
    """KAI's Ray grouper logs a pod without `ray.io/group` and goes on: the pod gets the cluster's
    PodGroup (no subgroup label) instead of an error, and the gang of the labelled pods runs."""
    shoal, client, ns, pool = grouping_shoal, kenv.client, kenv.namespace, kenv.node_prefix
    nodes = kenv.add_gpu_nodes(4, gpus=1, labels={POOL_LABEL: pool})
    queue = _new_queue(kenv)
    owner = create(kenv, load_owner("raycluster-two-groups.yaml", shoal.scheduler_name, pool, queue))
    children = ray_pods(owner)
    stray = children[2]  # the second "small" worker: the gang (head, small 1, big 1) is still whole
    del stray["metadata"]["labels"]["ray.io/group"]
    for child in children:
        create(kenv, child)
    kenv.wait_nodes_ready(nodes)
    pods = _wait(lambda: _grouped(_pods(client, ns), len(children)), 60, "every pod annotated with its PodGroup",
                 shoal)
    base = f"pg-{owner.metadata.name}-{owner.metadata.uid}"
    by_name = {p.metadata.name: p for p in pods}
    got = by_name[stray["metadata"]["name"]]
    assert got.metadata.annotations[PG_ANNOTATION] == base
    assert SUBGROUP_LABEL not in (got.metadata.labels or {}), got.metadata.labels
    labelled = [n for n in by_name if n != stray["metadata"]["name"]]
    _wait(lambda: all(_bound(client.get(Pod, n, namespace=ns)) for n in labelled), 60,
          "the labelled pods' gang bound", shoal)
