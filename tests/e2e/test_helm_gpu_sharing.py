"""The Helm chart with GPU sharing (`gpuSharing.mode=reservation`) and the admission webhook
(`webhook.enabled=true`) in a real cluster of its own (tests/e2e/chart.py): every object is created; the
webhook configurations' caBundle verifies the certificate `shoal webhook` serves from the chart's Secret
for the Service's DNS name; a renewal keeps the old CA trusted; the reservation agent may annotate its own
pod and nothing more; and the scheduler, with only the chart's service account, runs the reservation flow
with the real agent code on the agent's own bound token.

kwok fakes pods, so no webhook pod really listens behind the Service: the release's namespaceSelector
matches no namespace of this cluster; the TLS path is checked by running `shoal webhook` with the
Deployment's args on loopback, as the chart's pod runs it. The last test switches the release to a user's
Secret and has the API server call that loopback webhook through a copy of the chart's pod webhook whose
client is a `url` (rules, matchCondition, caBundle as installed).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.config.models import User
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import (
    MutatingWebhookConfiguration,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod, Secret, Service, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRole, Role, RoleBinding

from shoal.kai.sharing import RESERVATION_NAMESPACE, RESERVED_DEVICE_ANNOTATION, VISIBLE_DEVICES
from shoal.kube.client import KubeClient
from shoal.kube.gpusharing.agent import run_agent
from shoal.kube.webhook.certs import self_signed

from .chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    ChartCluster,
    InClusterShoal,
    free_port,
    running_pods,
    service_account_token,
    start_chart_cluster,
    start_in_cluster_shoal,
    stop_chart_cluster,
    stop_process,
    system_nodes,
    token_kubeconfig,
    wait_ready,
)
from .cluster import KEnv, eventually, require_binaries
from .scheduler_fixtures import create, pod_manifest
from .sharing_fixtures import configmap_data
from .test_gpu_sharing import linked

pytestmark = pytest.mark.e2e

HOOK = f"{RELEASE}-webhook"
SERVICE_DNS = f"{HOOK}.{NAMESPACE}.svc"
AGENT = "kai-resource-reservation"
VALUES = ["--set", "webhook.enabled=true", "--set", "gpuSharing.mode=reservation",
          "--set", "webhook.namespaceSelector.matchLabels.shoal-e2e-webhook=never"]


@pytest.fixture(scope="module")
def chart_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartCluster]:
    require_binaries()
    cc = start_chart_cluster(tmp_path_factory.mktemp("k8s-helm-sharing"))
    try:
        system_nodes(cc.client(), 2)
        cc.helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace", *VALUES,
                "--wait", "--timeout", "3m")
        yield cc
    finally:
        stop_chart_cluster(cc)


def _tls_files(c: Client, directory: Path, secret: str = f"{HOOK}-tls") -> dict[str, bytes]:
    """The webhook's Secret written out as the kubelet mounts it; returns its decoded data."""
    data = {k: base64.b64decode(v) for k, v in (c.get(Secret, secret, namespace=NAMESPACE).data or {}).items()}
    directory.mkdir(parents=True, exist_ok=True)
    for k in ("tls.crt", "tls.key"):
        (directory / k).write_bytes(data[k])
    return data


class LocalWebhook:
    """`shoal webhook` with the chart Deployment's args, the Secret's files and the webhook's service account
    token; listening on loopback."""

    def __init__(self, cc: ChartCluster, workdir: Path, secret: str = f"{HOOK}-tls") -> None:
        c = cc.client()
        self.dir = workdir / "tls"
        _tls_files(c, self.dir, secret)
        dep = c.get(Deployment, HOOK, namespace=NAMESPACE)
        self.args = list(dep.spec.template.spec.containers[0].args)
        self.port = free_port()
        kubeconfig = token_kubeconfig(cc, service_account_token(c, HOOK, NAMESPACE), workdir / "webhook.kubeconfig")
        swap = {"--host=": "127.0.0.1", "--port=": str(self.port), "--tls-cert=": str(self.dir / "tls.crt"),
                "--tls-key=": str(self.dir / "tls.key")}
        args = [next((k + v for k, v in swap.items() if a.startswith(k)), a) for a in self.args]
        self.log = workdir / "webhook.log"
        self.proc = subprocess.Popen([sys.executable, "-m", "shoal.cli.main", *args, "--kubeconfig", str(kubeconfig)],
                                     stdout=self.log.open("ab"), stderr=subprocess.STDOUT)

    def post(self, path: str, body: dict[str, Any], ca: bytes, host: str = SERVICE_DNS) -> tuple[dict[str, Any], bytes]:
        """POST over TLS verified against `ca` for `host`; (the JSON answer, the peer certificate in DER)."""
        ctx = ssl.create_default_context(cadata=ca.decode())
        raw = json.dumps(body).encode()
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock, \
                ctx.wrap_socket(sock, server_hostname=host) as tls:
            tls.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(raw)}\r\n\r\n".encode() + raw)
            out = b""
            while chunk := tls.recv(65536):
                out += chunk
            peer = tls.getpeercert(binary_form=True) or b""
        return json.loads(out.partition(b"\r\n\r\n")[2]), peer


@pytest.fixture(scope="module")
def local_webhook(chart_cluster: ChartCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalWebhook]:
    hook = LocalWebhook(chart_cluster, tmp_path_factory.mktemp("webhook"))
    try:
        yield hook
    finally:
        stop_process(hook.proc)


def _ca_bundles(c: Client) -> list[bytes]:
    hooks = [*c.get(MutatingWebhookConfiguration, HOOK).webhooks, *c.get(ValidatingWebhookConfiguration, HOOK).webhooks]
    return [base64.b64decode(h.clientConfig.caBundle) for h in hooks]


def _review(kind: str, obj: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    group, version = ("", "v1") if kind == "Pod" else ("scheduling.run.ai", "v2alpha2")
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "e2e", "kind": {"group": group, "version": version, "kind": kind},
                        "operation": "CREATE", "namespace": namespace, "object": obj}}


# ---------------------------------------------------------------------------------------------- install


def test_lint_and_schema(chart_cluster: ChartCluster) -> None:
    assert "0 chart(s) failed" in chart_cluster.helm("lint", "--strict", str(CHART), *VALUES).stdout
    for bad, needle in [(["--set", "webhook.failurePolicy=Sometimes"], "failurePolicy"),
                        (["--set", "gpuSharing.mode=shared"], "mode"),
                        (["--set", "webhook.enabeld=true"], "additional properties 'enabeld' not allowed")]:
        res = chart_cluster.helm("template", "t", str(CHART), *bad, check=False)
        assert res.returncode != 0 and needle in res.stderr, (bad, res.stderr)


def test_install_creates_every_object(chart_cluster: ChartCluster) -> None:
    c = chart_cluster.client()
    dep = c.get(Deployment, HOOK, namespace=NAMESPACE)
    assert dep.status.readyReplicas == 2
    hook_pods = list(running_pods(c, NAMESPACE, {"app.kubernetes.io/name": "shoal-webhook"}))
    assert len(hook_pods) == 2
    # The scheduler's selector does not take the webhook's pods (and the other way round).
    sched = c.get(Deployment, RELEASE, namespace=NAMESPACE)
    assert sched.status.readyReplicas == 2 and len(running_pods_of(c, sched)) == 2
    args = sched.spec.template.spec.containers[0].args
    assert "--gpu-sharing=reservation" in args and any(a.startswith("--reservation-image=") for a in args)
    svc = c.get(Service, HOOK, namespace=NAMESPACE)
    assert svc.spec.ports[0].port == 443 and svc.spec.selector == dep.spec.selector.matchLabels
    c.get(ServiceAccount, HOOK, namespace=NAMESPACE)
    c.get(ClusterRole, HOOK)
    for cfg in (c.get(MutatingWebhookConfiguration, HOOK), c.get(ValidatingWebhookConfiguration, HOOK)):
        for h in cfg.webhooks:
            ref = h.clientConfig.service
            assert (ref.name, ref.namespace, ref.port) == (HOOK, NAMESPACE, 443) and h.clientConfig.url is None
            assert h.failurePolicy == "Ignore" and h.sideEffects == "None"
            never = [e for e in h.namespaceSelector.matchExpressions if e.key == "kubernetes.io/metadata.name"]
            assert never[0].operator == "NotIn" and "kube-system" in never[0].values
            if h.rules[0].resources == ["pods"]:
                assert h.matchConditions[0].expression == "object.spec.schedulerName == 'kai-scheduler'"
    assert {h.clientConfig.service.path for h in c.get(ValidatingWebhookConfiguration, HOOK).webhooks} == \
        {"/validate-pods", "/validate-podgroups"}
    # The reservation namespace, the agent's identity and rights, the scheduler's rights there and on ConfigMaps.
    c.get(Namespace, AGENT)
    c.get(ServiceAccount, AGENT, namespace=AGENT)
    assert [(r.resources, r.verbs) for r in c.get(Role, AGENT, namespace=AGENT).rules] == [(["pods"], ["get", "patch"])]
    c.get(RoleBinding, AGENT, namespace=AGENT)
    assert c.get(Role, f"{RELEASE}-gpu-reservations", namespace=AGENT).rules[0].verbs == \
        ["get", "list", "watch", "create", "delete"]
    assert any(r.resources == ["configmaps"] and "create" in r.verbs for r in c.get(ClusterRole, RELEASE).rules)
    c.get(ValidatingAdmissionPolicy, f"{RELEASE}-reservation-agent")
    c.get(ValidatingAdmissionPolicyBinding, f"{RELEASE}-reservation-agent")


def running_pods_of(c: Client, dep: Deployment) -> list[Any]:
    return list(running_pods(c, NAMESPACE, dict(dep.spec.selector.matchLabels)))


# ------------------------------------------------------------------------------------------ certificates


def test_ca_bundle_verifies_the_served_certificate_for_the_service_name(
        chart_cluster: ChartCluster, local_webhook: LocalWebhook) -> None:
    c = chart_cluster.client()
    bundles = _ca_bundles(c)
    assert len(bundles) == 3 and len(set(bundles)) == 1
    bad = pod_manifest("bad", "kai-scheduler", annotations={"gpu-fraction": "1.5"})
    eventually(lambda: _answers(local_webhook, bundles[0]), 30, what=f"shoal webhook answering:\n{local_webhook.log}")
    answer, _ = local_webhook.post("/validate-pods", _review("Pod", bad), bundles[0])
    assert answer["response"]["allowed"] is False and "gpu-fraction" in answer["response"]["status"]["message"]
    # The default queue (the chart's default-queue) is given to a pod without one; a fractional pod is linked.
    pod = pod_manifest("frac", "kai-scheduler", annotations={"gpu-fraction": "0.5"})
    del pod["metadata"]["labels"]["kai.scheduler/queue"]
    answer, _ = local_webhook.post("/mutate-pods", _review("Pod", pod), bundles[0])
    ops = {op["path"]: op["value"] for op in json.loads(base64.b64decode(answer["response"]["patch"]))}
    assert ops["/metadata/labels"]["kai.scheduler/queue"] == "default-queue"
    assert ops["/metadata/annotations"]["runai/shared-gpu-configmap"], ops
    # Its informers read the Queues with the webhook's own service account: a PodGroup of a missing queue is
    # refused, one of default-queue is not.
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg"},
          "spec": {"minMember": 1, "queue": "nosuch"}}
    refused, _ = local_webhook.post("/validate-podgroups", _review("PodGroup", pg), bundles[0])
    assert refused["response"]["allowed"] is False
    pg["spec"]["queue"] = "default-queue"
    assert local_webhook.post("/validate-podgroups", _review("PodGroup", pg), bundles[0])[0]["response"]["allowed"]
    # The certificate is for the Service's names, not any name.
    with pytest.raises(ssl.SSLCertVerificationError):
        local_webhook.post("/validate-pods", _review("Pod", bad), bundles[0], host="other.example")


def _answers(hook: LocalWebhook, ca: bytes) -> bool:
    if hook.proc.poll() is not None:
        raise AssertionError(f"shoal webhook exited:\n{hook.log.read_text()[-3000:]}")
    try:
        pg = {"metadata": {"name": "x"}, "spec": {"minMember": 1, "queue": "default-queue"}}
        return bool(hook.post("/validate-podgroups", _review("PodGroup", pg), ca)[0]["response"]["allowed"])
    except OSError:
        return False


def test_upgrade_keeps_the_certificate_and_a_renewal_keeps_the_old_ca_trusted(
        chart_cluster: ChartCluster, local_webhook: LocalWebhook, tmp_path: Path) -> None:
    c = chart_cluster.client()
    before = _tls_files(c, tmp_path / "before")
    chart_cluster.helm("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values", "--wait")
    assert _tls_files(c, tmp_path / "same") == before and _ca_bundles(c)[0] == before["ca.crt"]
    # Renew now (fewer than renewBeforeDays left, as it will be one day): new CA and certificate, the
    # caBundle trusts both, so the pods' old files and the new ones verify while the kubelet swaps them.
    chart_cluster.helm("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
                       "--set", "webhook.certificate.renewBeforeDays=100000", "--wait")
    after = _tls_files(c, local_webhook.dir)
    assert after["tls.crt"] != before["tls.crt"] and after["ca-previous.crt"] == before["ca.crt"]
    bundle = _ca_bundles(c)[0]
    assert before["ca.crt"] in bundle and after["ca.crt"] in bundle
    # The running webhook reloads the rewritten files: the next connection gets the new certificate.
    pg = {"metadata": {"name": "x"}, "spec": {"minMember": 1, "queue": "default-queue"}}
    answer, peer = local_webhook.post("/validate-podgroups", _review("PodGroup", pg), after["ca.crt"])
    assert answer["response"]["allowed"] and ssl.DER_cert_to_PEM_cert(peer).encode().strip() == after["tls.crt"].strip()
    chart_cluster.helm("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
                       "--set", "webhook.certificate.renewBeforeDays=180", "--wait")


# ------------------------------------------------------------------------------------ the reservation agent


def _as(cc: ChartCluster, token: str) -> Client:
    admin = KubeConfig.from_file(cc.cluster.admin_kubeconfig)
    cfg = KubeConfig.from_one(cluster=admin.clusters[admin.contexts[admin.current_context].cluster],
                              user=User(token=token))
    return Client(config=cfg, field_manager="shoal-e2e")


def _reservation_like(c: Client, name: str) -> Any:
    """A pod in the reservation namespace (placed by kube-scheduler; its containers never run on kwok)."""
    return c.create(Pod.from_dict({"metadata": {"name": name, "labels": {"app": AGENT}}, "spec": {
        "serviceAccountName": AGENT, "containers": [{"name": "agent", "image": "shoal"}]}}), namespace=AGENT)


def _agent_client(cc: ChartCluster, pod: Any, path: Path) -> KubeClient:
    token = service_account_token(cc.client(), AGENT, AGENT, pod=pod)
    return KubeClient(str(token_kubeconfig(cc, token, path)))


async def _report(cc: ChartCluster, pod: Any, path: Path, device: str) -> None:
    client = _agent_client(cc, pod, path)
    try:
        env = {"POD_NAME": pod.metadata.name, "POD_NAMESPACE": AGENT, VISIBLE_DEVICES: device}
        await run_agent(client, env, once=True)
    finally:
        await client.close()


def test_agent_may_annotate_only_its_own_pod(chart_cluster: ChartCluster, tmp_path: Path) -> None:
    c = chart_cluster.client()
    mine = _reservation_like(c, "e2e-mine")
    _reservation_like(c, "e2e-other")
    try:
        # The real agent code, on a token bound to its pod as the kubelet mounts it, writes the device.
        asyncio.run(_report(chart_cluster, mine, tmp_path / "agent.kubeconfig", "GPU-e2e-0"))
        ann = c.get(Pod, "e2e-mine", namespace=AGENT).metadata.annotations
        assert ann[RESERVED_DEVICE_ANNOTATION] == "GPU-e2e-0"
        agent = _as(chart_cluster, service_account_token(c, AGENT, AGENT, pod=mine))
        key = RESERVED_DEVICE_ANNOTATION
        denied = [
            ("annotate another reservation pod", 422,
             lambda: agent.patch(Pod, "e2e-other", {"metadata": {"annotations": {key: "GPU-x"}}}, namespace=AGENT)),
            ("label its own pod", 422,
             lambda: agent.patch(Pod, "e2e-mine", {"metadata": {"labels": {"x": "y"}}}, namespace=AGENT)),
            ("add another annotation", 422,
             lambda: agent.patch(Pod, "e2e-mine", {"metadata": {"annotations": {"x": "y"}}}, namespace=AGENT)),
            ("change its pod's spec", 422,
             lambda: agent.patch(Pod, "e2e-mine", {"spec": {"activeDeadlineSeconds": 5}}, namespace=AGENT)),
            ("delete its pod", 403, lambda: agent.delete(Pod, "e2e-mine", namespace=AGENT)),
            ("create a pod", 403, lambda: _reservation_like(agent, "e2e-new")),
            ("read pods elsewhere", 403, lambda: list(agent.list(Pod, namespace=NAMESPACE))),
            ("read a secret", 403, lambda: list(agent.list(Secret, namespace=AGENT))),
            ("write a ConfigMap", 403, lambda: agent.create(ConfigMap(metadata=ObjectMeta(name="x")), namespace=AGENT)),
            ("patch its pod's status", 403,
             lambda: agent.patch(Pod.Status, "e2e-mine", {"status": {"phase": "Failed"}}, namespace=AGENT)),
        ]
        for what, code, call in denied:
            with pytest.raises(ApiError) as exc:
                call()
            assert exc.value.status.code == code, f"{what}: {exc.value.status}"
        # A token not bound to a pod (a copied or long-lived one) may change no pod at all.
        unbound = _as(chart_cluster, service_account_token(c, AGENT, AGENT))
        with pytest.raises(ApiError) as exc:
            unbound.patch(Pod, "e2e-mine", {"metadata": {"annotations": {key: "GPU-y"}}}, namespace=AGENT)
        assert "only its own pod" in str(exc.value.status.message)
        assert c.get(Pod, "e2e-other", namespace=AGENT).metadata.annotations is None
    finally:
        for n in ("e2e-mine", "e2e-other"):
            c.delete(Pod, n, namespace=AGENT, grace_period=0)


# ---------------------------------------------------------------- the scheduler on the chart's identity


@pytest.fixture
def in_cluster(chart_cluster: ChartCluster, tmp_path: Path) -> Iterator[InClusterShoal]:
    token = service_account_token(chart_cluster.client(), RELEASE, NAMESPACE)
    shoal = start_in_cluster_shoal(chart_cluster, token, tmp_path / "in-cluster")
    try:
        wait_ready(shoal)
        yield shoal
    finally:
        stop_process(shoal.proc)


@pytest.fixture
def ns(chart_cluster: ChartCluster) -> Iterator[KEnv]:
    client = chart_cluster.client()
    client.create(Namespace(metadata=ObjectMeta(name="helm-sharing")))
    env = KEnv(cluster=chart_cluster.cluster, client=client, namespace="helm-sharing", node_prefix="kwok-sharing")
    try:
        yield env
    finally:
        env.cleanup()


def test_scheduler_with_the_charts_rbac_shares_a_gpu_through_a_reservation_pod(
        chart_cluster: ChartCluster, in_cluster: InClusterShoal, ns: KEnv, tmp_path: Path) -> None:
    """`shoal run` with the Deployment's args (--gpu-sharing=reservation) and only the chart's token creates
    the reservation pod; the agent, on its own bound token, reports the device; the ConfigMap carries it."""
    (node,) = ns.add_gpu_nodes(1, gpus=2, labels={"nvidia.com/gpu.memory": "40960"})
    ns.wait_nodes_ready([node])
    for name in ("half-a", "half-b"):
        create(ns, linked(pod_manifest(name, "kai-scheduler", annotations={"gpu-fraction": "0.5"})))

    def reservation() -> Any:
        pods = [p for p in ns.client.list(Pod, namespace=RESERVATION_NAMESPACE) if p.spec.nodeName == node]
        return pods[0] if pods else None

    try:
        res = eventually(reservation, 30, what="the reservation pod")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{in_cluster.tail()}") from None
    asyncio.run(_report(chart_cluster, res, tmp_path / "agent.kubeconfig", f"GPU-{node}-0"))

    def bound() -> list[Any] | None:
        pods = [ns.client.get(Pod, n, namespace=ns.namespace) for n in ("half-a", "half-b")]
        return pods if all(p.spec.nodeName == node for p in pods) else None

    pods = eventually(bound, 30, what="both halves bound")
    for pod in pods:
        assert configmap_data(ns.client, pod)["NVIDIA_VISIBLE_DEVICES"] == f"GPU-{node}-0"
    assert len([p for p in ns.client.list(Pod, namespace=RESERVATION_NAMESPACE) if p.spec.nodeName == node]) == 1
    assert "Forbidden" not in in_cluster.tail(20000) and in_cluster.proc.poll() is None


def _refusal(c: Client, pod: dict[str, Any], namespace: str) -> Any:
    """The API server's refusal of `pod`, or None when it was created (then deleted again: the API server
    may not have read a webhook configuration created a moment ago)."""
    try:
        c.create(Pod.from_dict(pod), namespace=namespace)
    except ApiError as e:
        return e.status
    c.delete(Pod, pod["metadata"]["name"], namespace=namespace, grace_period=0)
    return None


# --------------------------------------------- a user's certificate, and the API server calling the webhook


def test_users_secret_and_the_api_server_refuses_an_invalid_fractional_pod(
        chart_cluster: ChartCluster, tmp_path: Path) -> None:
    """certificate.source=secret with the CA read from the Secret; the API server, given the installed
    ValidatingWebhookConfiguration with only its client switched from the Service (no proxy routes to kwok's
    pod IPs) to `shoal webhook` on loopback, refuses a pod with gpu-fraction 1.5 at create time."""
    c = chart_cluster.client()
    pem, key = self_signed([SERVICE_DNS, "127.0.0.1"])
    data = {k: base64.b64encode(v).decode() for k, v in {"tls.crt": pem, "tls.key": key, "ca.crt": pem}.items()}
    c.create(Secret(metadata=ObjectMeta(name="e2e-user-tls"), type="kubernetes.io/tls", data=data), namespace=NAMESPACE)
    chart_cluster.helm("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values", "--wait", "--set",
                       "webhook.certificate.source=secret", "--set", "webhook.certificate.existingSecret=e2e-user-tls")
    assert set(_ca_bundles(c)) == {pem}
    hook = LocalWebhook(chart_cluster, tmp_path, "e2e-user-tls")
    cfg = c.get(ValidatingWebhookConfiguration, HOOK).to_dict()
    (pods,) = [h for h in cfg["webhooks"] if h["name"] == "validate-pods.shoal.dev"]
    pods["clientConfig"] = {"url": f"https://127.0.0.1:{hook.port}/validate-pods",
                            "caBundle": pods["clientConfig"]["caBundle"]}
    pods["namespaceSelector"]["matchLabels"] = {"kubernetes.io/metadata.name": "helm-admission"}
    cfg = {"metadata": {"name": "e2e-loopback"}, "webhooks": [pods]}
    c.create(Namespace(metadata=ObjectMeta(name="helm-admission")))
    try:
        eventually(lambda: _answers(hook, pem), 30, what="shoal webhook answering")
        c.create(ValidatingWebhookConfiguration.from_dict(cfg))
        bad = pod_manifest("bad", "kai-scheduler", annotations={"gpu-fraction": "1.5"})
        refusal = eventually(lambda: _refusal(c, bad, "helm-admission"), 15, what="the API server calling the webhook")
        assert refusal.code == 403 and "gpu-fraction" in str(refusal.message), refusal
        # The matchCondition: another scheduler's pod with the same annotation is not sent to the webhook.
        other = pod_manifest("other", "default-scheduler", annotations={"gpu-fraction": "1.5"})
        c.create(Pod.from_dict(other), namespace="helm-admission")
    finally:
        c.delete(ValidatingWebhookConfiguration, "e2e-loopback")
        c.delete(Namespace, "helm-admission")
        stop_process(hook.proc)
