"""The Helm chart (deploy/helm/shoal) in a real cluster: install, the scheduler running with only the chart's
service account, live config reload, upgrade and uninstall.

Tests run in file order against one control plane of their own (tests/e2e/chart.py); uninstall is last.
"""

from __future__ import annotations

import base64
import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, KubeConfig
from lightkube.config.models import User
from lightkube.generic_resource import create_global_resource
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.models.core_v1 import NodeSpec, NodeStatus
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.core_v1 import ConfigMap, Namespace, Node, Pod, Secret, Service, ServiceAccount
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding, Role, RoleBinding
from lightkube.resources.scheduling_v1 import PriorityClass

from shoal.kube.webhook.certs import self_signed

from .chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    ChartCluster,
    InClusterShoal,
    render,
    running_pods,
    service_account_token,
    start_chart_cluster,
    start_in_cluster_shoal,
    stop_chart_cluster,
    stop_process,
    system_nodes,
    wait_ready,
)
from .cluster import DEPLOY, KEnv, data_text, eventually, require_binaries
from .scheduler_fixtures import create, pod_state

pytestmark = pytest.mark.e2e

QueueRes = create_global_resource("scheduling.run.ai", "v2", "Queue", "queues")
SELECTOR = {"app.kubernetes.io/instance": RELEASE}
GPU_MEMORY_LABELS = {"nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.count": "8"}


@pytest.fixture(scope="module")
def chart_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartCluster]:
    require_binaries()
    cc = start_chart_cluster(tmp_path_factory.mktemp("k8s-helm"))
    try:
        yield cc
    finally:
        stop_chart_cluster(cc)


@pytest.fixture(scope="module")
def installed(chart_cluster: ChartCluster) -> float:
    """`helm install --wait` of the chart into the empty cluster; returns the seconds it took."""
    system_nodes(chart_cluster.client(), 2)
    t0 = time.monotonic()
    chart_cluster.helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
                       "--wait", "--timeout", "3m")
    return time.monotonic() - t0


@pytest.fixture(scope="module")
def in_cluster(chart_cluster: ChartCluster, installed: float,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[InClusterShoal]:
    token = service_account_token(chart_cluster.client(), RELEASE, NAMESPACE)
    shoal = start_in_cluster_shoal(chart_cluster, token, tmp_path_factory.mktemp("in-cluster"))
    try:
        wait_ready(shoal)
        yield shoal
    finally:
        stop_process(shoal.proc)


@pytest.fixture
def ns(chart_cluster: ChartCluster, request: pytest.FixtureRequest) -> Iterator[KEnv]:
    """A namespace and GPU nodes for one test (a KEnv on the chart's cluster)."""
    client = chart_cluster.client()
    name = f"helm-{request.node.name[5:25].replace('_', '-').strip('-')}"
    client.create(Namespace(metadata=ObjectMeta(name=name)))
    env = KEnv(cluster=chart_cluster.cluster, client=client, namespace=name, node_prefix=f"kwok-{name}")
    try:
        yield env
    finally:
        env.cleanup()


# ------------------------------------------------------------------------------------------ the chart


def test_chart_lints_and_its_schema_rejects_typos(chart_cluster: ChartCluster) -> None:
    lint = chart_cluster.helm("lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in lint.stdout
    for bad, needle in [
        (["--set", "replicaCunt=3"], "additional properties 'replicaCunt' not allowed"),
        (["--set", "image.tagg=1"], "additional properties 'tagg' not allowed"),
        (["--set", "logLevel=verbose"], "logLevel"),
        (["--set", "schedulerConfig.tiers[0].plugins[0].nmae=x"], "nmae"),
    ]:
        res = chart_cluster.helm("template", "t", str(CHART), *bad, check=False)
        assert res.returncode != 0 and needle in res.stderr, (bad, res.stderr)


def test_chart_renders_optional_parts(chart_cluster: ChartCluster) -> None:
    res = chart_cluster.helm("template", "t", str(CHART), "--namespace", NAMESPACE, "--set",
                             "metrics.serviceMonitor.enabled=true", "--set", "podAntiAffinity=hard",
                             "--set", "defaultQueues.create=false", "--set", "logLevel=debug")
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(res.stdout) if d}
    assert ("ServiceMonitor", "t-shoal") in docs
    assert not [k for k in docs if k[0] == "Queue"]
    pod = docs[("Deployment", "t-shoal")]["spec"]["template"]["spec"]
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert pod["containers"][0]["args"][0] == "-vv"


def test_chart_renders_a_scheduling_shard(chart_cluster: ChartCluster) -> None:
    """nodePool.value: the scheduler serves that pool; its lease, state and report are named for it."""
    res = chart_cluster.helm("template", "t", str(CHART), "--namespace", NAMESPACE, "--set", "nodePool.value=a100")
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(res.stdout) if d}
    args = docs[("Deployment", "t-shoal")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--node-pool=a100" in args and "--lease-name=kai-scheduler-a100" in args
    assert not [a for a in args if a.startswith("--node-pool-label")]
    for name in ("kai-scheduler-a100-visibility", "kai-scheduler-a100-usage", "kai-scheduler-a100-runtimes"):
        assert ("ConfigMap", name) in docs
    names = {n for rule in docs[("Role", "t-shoal")]["rules"] for n in rule.get("resourceNames", [])}
    assert {"kai-scheduler-a100", "kai-scheduler-a100-visibility", "kai-scheduler-a100-usage"} <= names
    assert docs[("Queue", "default-queue")]["metadata"]["labels"]["kai.scheduler/node-pool"] == "a100"
    plain = chart_cluster.helm("template", "t", str(CHART), "--namespace", NAMESPACE).stdout
    assert "--node-pool" not in plain and "--lease-name=kai-scheduler\n" in plain
    bad = chart_cluster.helm("template", "t", str(CHART), "--set", "nodePool.value=-x", check=False)
    assert bad.returncode != 0 and "nodePool" in bad.stderr


def _hooks(docs: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    return [h for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
            for h in docs[(kind, "t-shoal-webhook")]["webhooks"]]


def _pod(docs: dict[tuple[str, str], dict[str, Any]], deployment: str) -> dict[str, Any]:
    return dict(docs[("Deployment", deployment)]["spec"]["template"]["spec"])


def test_chart_renders_gpu_sharing_modes_and_webhook_certificate_sources(chart_cluster: ChartCluster) -> None:
    cc, on = chart_cluster, ["--set", "webhook.enabled=true"]
    labels = render(cc)
    assert ("Namespace", "kai-resource-reservation") not in labels
    assert ("Deployment", "t-shoal-webhook") not in labels
    frac = render(cc, "--set", "gpuSharing.mode=fractioning")
    assert "--gpu-sharing=fractioning" in _pod(frac, "t-shoal")["containers"][0]["args"]
    assert ("Namespace", "kai-resource-reservation") in frac
    assert ("ValidatingAdmissionPolicy", "t-shoal-reservation-agent") in frac
    # source=helm: the chart's Secret, its CA in every caBundle.
    docs = render(cc, *on)
    ca = docs[("Secret", "t-shoal-webhook-tls")]["data"]["ca.crt"]
    assert [h["clientConfig"]["caBundle"] for h in _hooks(docs)] == [ca] * 3
    # source=secret: the user's Secret is mounted, its CA (PEM or base64) is the caBundle, none means a clear error.
    pem = self_signed(["t-shoal-webhook.shoal-system.svc"])[0].decode()
    user = [*on, "--set", "webhook.certificate.source=secret", "--set", "webhook.certificate.existingSecret=mine"]
    docs = render(cc, *user, "--set", f"webhook.certificate.caBundle={base64.b64encode(pem.encode()).decode()}")
    assert not [k for k in docs if k[0] == "Secret"]
    assert _pod(docs, "t-shoal-webhook")["volumes"][0]["secret"]["secretName"] == "mine"
    assert {base64.b64decode(h["clientConfig"]["caBundle"]).decode() for h in _hooks(docs)} == {pem}
    res = cc.helm("template", "t", str(CHART), *user, check=False)
    assert res.returncode != 0 and "needs webhook.certificate.caBundle" in res.stderr, res.stderr
    # source=certManager: the chart's own CA Issuer (or the user's issuer), the CA injected by cert-manager.
    cm = [*on, "--set", "webhook.certificate.source=certManager"]
    docs = render(cc, *cm)
    assert all("caBundle" not in h["clientConfig"] for h in _hooks(docs))
    assert docs[("MutatingWebhookConfiguration", "t-shoal-webhook")]["metadata"]["annotations"] == \
        {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/t-shoal-webhook"}
    serving = docs[("Certificate", "t-shoal-webhook")]["spec"]
    assert serving["secretName"] == "t-shoal-webhook-tls" and f"t-shoal-webhook.{NAMESPACE}.svc" in serving["dnsNames"]
    assert serving["issuerRef"]["name"] == "t-shoal-webhook-ca"
    assert docs[("Certificate", "t-shoal-webhook-ca")]["spec"]["isCA"]
    docs = render(cc, *cm, "--set", "webhook.certificate.certManager.issuerRef.name=corp",
                  "--set", "webhook.certificate.certManager.issuerRef.kind=ClusterIssuer")
    assert not [k for k in docs if k[0] == "Issuer"]
    assert docs[("Certificate", "t-shoal-webhook")]["spec"]["issuerRef"]["kind"] == "ClusterIssuer"
    for bad, needle in [(["--set", "webhook.certificate.source=vault"], "source"),
                        (["--set", "webhook.certificate.certManager.issuerRef.kind=Vault"], "kind"),
                        (["--set", "gpuSharing.mode=mps"], "mode")]:
        res = cc.helm("template", "t", str(CHART), *bad, check=False)
        assert res.returncode != 0 and needle in res.stderr, (bad, res.stderr)

def test_chart_crds_match_deploy() -> None:
    """The chart carries copies of deploy/crds (helm cannot read outside the chart): they must not drift."""
    for crd in sorted((DEPLOY / "crds").glob("*.yaml")):
        assert (CHART / "crds" / crd.name).read_text() == crd.read_text(), crd.name
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml")) == \
        sorted(p.name for p in (DEPLOY / "crds").glob("*.yaml"))


def test_chart_default_config_is_shoals_default() -> None:
    """The chart's schedulerConfig renders shoal's built-in defaults (a KAI-format reading of them)."""
    from shoal.framework.config import SchedulerConfig, config_from_dict

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert config_from_dict(values["schedulerConfig"]) == SchedulerConfig()


# ---------------------------------------------------------------------------------------------- install


def test_install_creates_every_object(chart_cluster: ChartCluster, installed: float) -> None:
    c = chart_cluster.client()
    print(f"helm install --wait: {installed:.1f} s")
    for crd in ("queues.scheduling.run.ai", "podgroups.scheduling.run.ai", "topologies.kai.scheduler"):
        c.get(CustomResourceDefinition, crd)
    # The same priority classes as deploy/priorityclasses.yaml (train 50, build-preemptible 75, build 100,
    # inference 125).
    docs = yaml.safe_load_all((DEPLOY / "priorityclasses.yaml").read_text())
    want = {d["metadata"]["name"]: d["value"] for d in docs}
    assert len(want) == 4 and {pc: c.get(PriorityClass, pc).value for pc in want} == want
    c.get(ServiceAccount, RELEASE, namespace=NAMESPACE)
    c.get(ClusterRole, RELEASE)
    c.get(ClusterRoleBinding, RELEASE)
    c.get(Role, RELEASE, namespace=NAMESPACE)
    c.get(RoleBinding, RELEASE, namespace=NAMESPACE)
    cm = c.get(ConfigMap, f"{RELEASE}-config", namespace=NAMESPACE)
    assert "nodeplacement" in (cm.data or {})["config.yaml"]
    assert c.get(Service, f"{RELEASE}-metrics", namespace=NAMESPACE).spec.ports[0].port == 8080
    assert c.get(PodDisruptionBudget, RELEASE, namespace=NAMESPACE).spec.minAvailable == 1
    assert c.get(QueueRes, "default-queue")["spec"]["parentQueue"] == "default-parent-queue"
    c.get(QueueRes, "default-parent-queue")
    dep = c.get(Deployment, RELEASE, namespace=NAMESPACE)
    assert dep.spec.replicas == 2 and dep.status.readyReplicas == 2
    pods = list(running_pods(c, NAMESPACE, SELECTOR))
    assert len(pods) == 2
    # Preferred anti-affinity: with two free nodes the replicas land on different nodes.
    assert len({p.spec.nodeName for p in pods}) == 2
    ctr = pods[0].spec.containers[0]
    assert ctr.livenessProbe.httpGet.path == "/healthz" and ctr.readinessProbe.httpGet.path == "/readyz"
    assert ctr.securityContext.readOnlyRootFilesystem and pods[0].spec.securityContext.runAsNonRoot
    assert ctr.resources.requests and ctr.resources.limits


# ------------------------------------------------------------------------- running on the chart's identity


def _example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(data_text(f"kai-examples/{name}")) if d]


def test_in_cluster_scheduler_runs_kai_examples(in_cluster: InClusterShoal, ns: KEnv) -> None:
    """`shoal` with the Deployment's args and only the chart's service-account token schedules KAI's
    examples into the chart's default queues."""
    assert in_cluster.get("/healthz")[0] == 200
    (node,) = ns.add_gpu_nodes(1, gpus=8, labels=GPU_MEMORY_LABELS)
    ns.wait_nodes_ready([node])
    names = []
    for fname in ("quickstart--pods--cpu-only-pod.yaml", "quickstart--pods--gpu-pod.yaml",
                  "gpu-sharing--gpu-sharing.yaml"):
        for doc in _example(fname):
            create(ns, doc)
            names.append(doc["metadata"]["name"])
    for doc in _example("batch--batch-job.yaml"):
        create(ns, doc)

    def placed() -> bool:
        return all(pod_state(ns.client, n, ns.namespace)[1] == "Running" for n in names)

    try:
        eventually(placed, 30, what="KAI example pods Running")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{in_cluster.tail()}") from None
    # The GPU pods are on the GPU node (the cpu-only pod may take a chart node).
    assert {pod_state(ns.client, n, ns.namespace)[0] for n in names[1:]} == {node}

    def job_running() -> bool:
        pods = list(ns.client.list(Pod, namespace=ns.namespace, labels={"job-name": "batch-job"}))
        return len(pods) == 2 and all(p.status.phase == "Running" for p in pods)

    eventually(job_running, 60, what="both batch-job pods Running")
    assert "no usable context" not in in_cluster.tail() and in_cluster.proc.poll() is None


def test_chart_rbac_denies_what_the_scheduler_does_not_need(chart_cluster: ChartCluster, installed: float) -> None:
    token = service_account_token(chart_cluster.client(), RELEASE, NAMESPACE)
    admin = KubeConfig.from_file(chart_cluster.cluster.admin_kubeconfig)
    cfg = KubeConfig.from_one(cluster=admin.clusters[admin.contexts[admin.current_context].cluster],
                              user=User(token=token))
    sa = Client(config=cfg, field_manager="shoal-e2e")
    assert list(sa.list(Pod, namespace="*")) is not None  # allowed: it watches pods
    # allowed: writing the state it keeps across restarts into the ConfigMaps the chart created
    for state in ("kai-scheduler-usage", "kai-scheduler-runtimes"):
        sa.patch(ConfigMap, state, {"metadata": {"labels": {"shoal.dev/e2e": "rbac"}}}, namespace=NAMESPACE)
    denied = [
        ("delete a pod", lambda: sa.delete(Pod, "any", namespace="default")),
        ("list secrets", lambda: list(sa.list(Secret, namespace=NAMESPACE))),
        ("patch a node", lambda: sa.patch(Node, "kwok-system-0", {"metadata": {"labels": {"x": "y"}}})),
        ("create a ConfigMap", lambda: sa.create(ConfigMap(metadata=ObjectMeta(name="x"), data={}),
                                                 namespace=NAMESPACE)),
        ("read another ConfigMap", lambda: sa.get(ConfigMap, "kube-root-ca.crt", namespace=NAMESPACE)),
        ("edit its own config", lambda: sa.patch(ConfigMap, f"{RELEASE}-config", {"data": {"a": "b"}},
                                                 namespace=NAMESPACE)),
        ("delete a Queue", lambda: sa.delete(QueueRes, "default-queue")),
        ("delete its own Deployment", lambda: sa.delete(Deployment, RELEASE, namespace=NAMESPACE)),
    ]
    for what, call in denied:
        with pytest.raises(ApiError) as exc:
            call()
        assert exc.value.status.code == 403, f"{what}: {exc.value.status}"


def test_chart_viewer_role_reads_the_report_and_nothing_else(chart_cluster: ChartCluster, installed: float) -> None:
    """viewerRole: a member of the group shoal-viewers may read what `shoal queues|pending|explain|snapshot`
    read (asked with SubjectAccessReview, as the API server authorises a request) and nothing more."""
    c = chart_cluster.client()

    def allowed(verb: str, resource: str, name: str = "", namespace: str = "", group: str = "") -> bool:
        attrs = ResourceAttributes(verb=verb, resource=resource, name=name or None, namespace=namespace or None,
                                   group=group)
        review = c.create(SubjectAccessReview(spec=SubjectAccessReviewSpec(
            user="alice", groups=["shoal-viewers", "system:authenticated"], resourceAttributes=attrs)))
        return bool(review.status.allowed)

    assert allowed("get", "configmaps", "kai-scheduler-visibility", NAMESPACE)
    assert allowed("list", "pods") and allowed("list", "nodes")
    assert allowed("list", "podgroups", group="scheduling.run.ai")
    assert allowed("list", "queues", group="scheduling.run.ai")
    assert allowed("list", "topologies", group="kai.scheduler")
    assert not allowed("get", "configmaps", f"{RELEASE}-config", NAMESPACE)
    assert not allowed("list", "secrets", namespace=NAMESPACE)
    assert not allowed("delete", "pods", "any", "default")
    assert not allowed("patch", "podgroups", "any", "default", group="scheduling.run.ai")


# --------------------------------------------------------------------------------------- config reload


def _spread_config(text: str) -> str:
    """KAI's spread flavour of the chart's config: gpuspread instead of gpupack, no gpusharingorder,
    nodeplacement spread, and (like KAI's operator) no consolidation."""
    conf = yaml.safe_load(text)
    plugins = []
    for p in conf["tiers"][0]["plugins"]:
        if p["name"] == "gpusharingorder":
            continue
        p = copy.deepcopy(p)
        if p["name"] == "gpupack":
            p["name"] = "gpuspread"
        if p["name"] == "nodeplacement":
            p["arguments"] = {"cpu": "spread", "gpu": "spread"}
        plugins.append(p)
    conf["tiers"][0]["plugins"] = plugins
    conf["actions"] = "allocate, reclaim, preempt, stalegangeviction"
    return yaml.safe_dump(conf, sort_keys=False)


def _gpu_pod(name: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"kai.scheduler/queue": "default-queue"}},
            "spec": {"schedulerName": "kai-scheduler", "nodeSelector": {"e2e-zone": zone},
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def _place(ns: KEnv, names: list[str], zone: str) -> list[str]:
    for n in names:
        create(ns, _gpu_pod(n, zone))
    return [eventually(lambda n=n: pod_state(ns.client, n, ns.namespace)[0], 20, what=f"{n} bound") for n in names]


def test_config_map_edit_switches_binpack_to_spread_without_restart(
        chart_cluster: ChartCluster, in_cluster: InClusterShoal, ns: KEnv) -> None:
    c = chart_cluster.client()
    nodes = ns.add_gpu_nodes(2, gpus=8, labels={"e2e-zone": "reload"})
    ns.wait_nodes_ready(nodes)
    deploy_pods = {p.metadata.uid for p in running_pods(c, NAMESPACE, SELECTOR)}
    before = _place(ns, ["bin-a", "bin-b"], "reload")
    assert before[0] == before[1], f"binpack (the chart's default) put two 1-GPU pods apart: {before}"

    cm = c.get(ConfigMap, f"{RELEASE}-config", namespace=NAMESPACE)
    t0 = time.monotonic()
    c.patch(ConfigMap, cm.metadata.name, {"data": {"config.yaml": _spread_config(cm.data["config.yaml"])}},
            namespace=NAMESPACE)
    eventually(lambda: "load 2)" in in_cluster.tail(20000), 10, what="config reload (load 2) in the log")
    reload_s = time.monotonic() - t0
    after = _place(ns, ["spread-a", "spread-b"], "reload")
    # Binpack would add them to the node already holding two pods; spread fills the emptier node.
    assert before[0] not in after, f"after the switch to spread, pods still joined the fuller node: {after}"
    assert time.monotonic() - t0 < 10 + 20, "placements after the reload took too long"
    print(f"config reload seen {reload_s:.2f} s after the ConfigMap patch")
    # No restart: the same process, and the chart's pods were not rolled.
    assert in_cluster.proc.poll() is None
    assert {p.metadata.uid for p in running_pods(c, NAMESPACE, SELECTOR)} == deploy_pods
    # Put the chart's config back for the tests after this one.
    c.patch(ConfigMap, cm.metadata.name, {"data": {"config.yaml": cm.data["config.yaml"]}}, namespace=NAMESPACE)


def test_a_broken_config_edit_keeps_the_running_config(
        chart_cluster: ChartCluster, in_cluster: InClusterShoal) -> None:
    c = chart_cluster.client()
    cm = c.get(ConfigMap, f"{RELEASE}-config", namespace=NAMESPACE)
    c.patch(ConfigMap, cm.metadata.name, {"data": {"config.yaml": "tiers:\n- plugins:\n  - name: nosuch\n"}},
            namespace=NAMESPACE)
    eventually(lambda: "config refused" in in_cluster.tail(20000), 10, what="the refusal in the log")
    assert in_cluster.get("/readyz")[0] == 200
    c.patch(ConfigMap, cm.metadata.name, {"data": {"config.yaml": cm.data["config.yaml"]}}, namespace=NAMESPACE)


# ----------------------------------------------------------------------------------- upgrade, uninstall


def test_helm_upgrade_applies_changed_values(chart_cluster: ChartCluster, installed: float) -> None:
    c = chart_cluster.client()
    _system_nodes_extra(c)
    old_hash = _template_hash(c)
    chart_cluster.helm("upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
                       "--set", "replicaCount=3", "--set", "schedulerConfig.actions=allocate\\, reclaim",
                       "--wait", "--timeout", "3m")
    dep = c.get(Deployment, RELEASE, namespace=NAMESPACE)
    assert dep.spec.replicas == 3 and dep.status.readyReplicas == 3
    cm = c.get(ConfigMap, f"{RELEASE}-config", namespace=NAMESPACE)
    assert yaml.safe_load(cm.data["config.yaml"])["actions"] == "allocate, reclaim"
    # A config change is applied live: it does not roll the pods (the template is unchanged).
    assert _template_hash(c) == old_hash
    history = json.loads(chart_cluster.helm("history", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert [h["revision"] for h in history] == [1, 2] and history[-1]["status"] == "deployed"


def _system_nodes_extra(c: Client) -> None:
    try:
        c.get(Node, "kwok-system-2")
    except ApiError:
        res = {"cpu": "16", "memory": "64Gi", "pods": "110"}
        c.create(Node(metadata=ObjectMeta(name="kwok-system-2", labels={"kubernetes.io/hostname": "kwok-system-2"},
                                          annotations={"kwok.x-k8s.io/node": "fake"}),
                      spec=NodeSpec(), status=NodeStatus(capacity=dict(res), allocatable=dict(res))))


def _template_hash(c: Client) -> set[str]:
    return {p.metadata.labels["pod-template-hash"] for p in running_pods(c, NAMESPACE, SELECTOR)}


def test_helm_uninstall_removes_the_release_and_keeps_crds(chart_cluster: ChartCluster, installed: float) -> None:
    c = chart_cluster.client()
    c.create(QueueRes(metadata={"name": "team-a"}, spec={"resources": {
        r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("cpu", "gpu", "memory")}}))
    chart_cluster.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "2m")
    gone = [(Deployment, RELEASE, NAMESPACE), (ServiceAccount, RELEASE, NAMESPACE), (ClusterRole, RELEASE, None),
            (ClusterRoleBinding, RELEASE, None), (Role, RELEASE, NAMESPACE),
            (ConfigMap, f"{RELEASE}-config", NAMESPACE), (PodDisruptionBudget, RELEASE, NAMESPACE),
            (PriorityClass, "train", None), (QueueRes, "default-queue", None)]
    for kind, name, namespace in gone:
        with pytest.raises(ApiError) as exc:
            c.get(kind, name, namespace=namespace) if namespace else c.get(kind, name)
        assert exc.value.status.code == 404, (kind, name)
    # The CRDs stay (as with KAI and Kueue), and so do the users' objects.
    for crd in ("queues.scheduling.run.ai", "podgroups.scheduling.run.ai", "topologies.kai.scheduler"):
        c.get(CustomResourceDefinition, crd)
    c.get(QueueRes, "team-a")
    eventually(lambda: not list(c.list(Pod, namespace=NAMESPACE, labels=SELECTOR)), 60, what="chart pods gone")
