"""Helpers for the Helm chart's e2e tests: a cluster of its own, helm, and `shoal run` as the chart runs it.

The chart's tests get a control plane of their own (not the session's `cluster`, which already has
deploy/ applied): the chart must install into an empty cluster, and uninstalling it must not take
anything from the other tests. Its kube-controller-manager also runs the Deployment and ReplicaSet
controllers, and a kube-scheduler places the chart's own pods on kwok nodes.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.models.authentication_v1 import BoundObjectReference, TokenRequestSpec
from lightkube.models.core_v1 import NodeSpec, NodeStatus
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Node, ServiceAccountToken

from .cluster import REPO, SCRIPT, Cluster

CHART = REPO / "deploy" / "helm" / "shoal"
RELEASE = "shoal"
NAMESPACE = "shoal-system"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass
class ChartCluster:
    """A running control plane for the chart tests, plus helm and the API server's port."""

    cluster: Cluster
    bin_dir: Path
    api_port: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def client(self) -> Client:
        return self.cluster.client("admin")

    def helm(self, *args: str, timeout: float = 240, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the helm built by `scripts/k8s-test-env install` against this cluster as admin."""
        cmd = [str(self.bin_dir / "helm"), "--kubeconfig", str(self.cluster.admin_kubeconfig), *args]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, "HELM_CACHE_HOME": str(self.cluster.dir / "helm-cache"),
                                  "HELM_CONFIG_HOME": str(self.cluster.dir / "helm-config"),
                                  "HELM_DATA_HOME": str(self.cluster.dir / "helm-data")})
        if check and res.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
        return res


def render(cc: ChartCluster, *values: str) -> dict[tuple[str, str], dict[str, Any]]:
    """`helm template` of the chart in NAMESPACE with `values` (helm arguments): {(kind, name): object}."""
    out = cc.helm("template", "t", str(CHART), "--namespace", NAMESPACE, *values).stdout
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}

def start_chart_cluster(state: Path) -> ChartCluster:
    """`scripts/k8s-test-env start` with the Deployment/ReplicaSet controllers, then a kube-scheduler."""
    env = {**os.environ, "SHOAL_KWOK_HEARTBEAT_MS": "10000",
           "SHOAL_KCM_CONTROLLERS": "deployment-controller,replicaset-controller"}
    res = subprocess.run([str(SCRIPT), "start", str(state)], capture_output=True, text=True, timeout=240, env=env)
    if res.returncode != 0:
        raise AssertionError(f"k8s-test-env start failed:\n{res.stderr[-4000:]}")
    bin_dir = Path(subprocess.run([str(SCRIPT), "bin"], capture_output=True, text=True, check=True).stdout.strip())
    cluster = Cluster(state, state / "admin.kubeconfig", state / "scheduler.kubeconfig")
    cc = ChartCluster(cluster, bin_dir, int((state / "apiserver.port").read_text()))
    log = (state / "log" / "kube-scheduler.log").open("ab")
    cc.procs.append(subprocess.Popen(
        [str(bin_dir / "kube-scheduler"), "--kubeconfig", str(cluster.admin_kubeconfig), "--leader-elect=false",
         "--secure-port=0"], stdout=log, stderr=subprocess.STDOUT))
    return cc


def stop_chart_cluster(cc: ChartCluster) -> None:
    for p in cc.procs:
        stop_process(p)
    subprocess.run([str(SCRIPT), "stop", str(cc.cluster.dir)], capture_output=True, text=True, timeout=60)


def stop_process(p: subprocess.Popen[Any]) -> None:
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def service_account_token(client: Client, name: str, namespace: str, seconds: int = 3600,
                          pod: Any = None) -> str:
    """A real bound token of ServiceAccount namespace/name (TokenRequest API), like the kubelet mounts; bound
    to `pod` (a Pod object) as the kubelet binds a pod's projected token when given."""
    bound = None if pod is None else BoundObjectReference(apiVersion="v1", kind="Pod", name=pod.metadata.name,
                                                          uid=pod.metadata.uid)
    req = ServiceAccountToken(metadata=ObjectMeta(name=name, namespace=namespace),
                              spec=TokenRequestSpec(audiences=[], expirationSeconds=seconds,
                                                    boundObjectRef=bound))
    out = client.create(req, name=name, namespace=namespace)
    assert out.status is not None and out.status.token
    return str(out.status.token)


def token_kubeconfig(cc: ChartCluster, token: str, path: Path) -> Path:
    """A kubeconfig that authenticates with `token` only (for `shoal` processes run as a service account)."""
    ca = cc.cluster.dir / "pki" / "ca.crt"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{cc.api_port}",
                                               "certificate-authority": str(ca)}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}]}))
    return path


def system_nodes(client: Client, count: int) -> list[str]:
    """Plain kwok nodes (no GPUs) for the chart's own pods, placed by kube-scheduler."""
    names = []
    for i in range(count):
        name = f"kwok-system-{i}"
        res = {"cpu": "16", "memory": "64Gi", "pods": "110"}
        client.create(Node(metadata=ObjectMeta(name=name, labels={"kubernetes.io/hostname": name},
                                               annotations={"kwok.x-k8s.io/node": "fake"}),
                           spec=NodeSpec(), status=NodeStatus(capacity=dict(res), allocatable=dict(res))))
        names.append(name)
    return names


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scheduler_args(client: Client, metrics_port: int) -> list[str]:
    """The chart's Deployment container args, as the kubelet would run them: `$(POD_NAME)` expanded; metrics
    on loopback and a free port (the pod's own network namespace is not there outside a pod)."""
    dep = client.get(Deployment, RELEASE, namespace=NAMESPACE)
    assert dep.spec is not None and dep.spec.template.spec is not None
    args = list(dep.spec.template.spec.containers[0].args or [])
    out = []
    for a in args:
        a = a.replace("$(POD_NAME)", "shoal-e2e-in-cluster")
        if a.startswith("--metrics-host="):
            a = "--metrics-host=127.0.0.1"
        elif a.startswith("--metrics-port="):
            a = f"--metrics-port={metrics_port}"
        out.append(a)
    return out


@dataclass
class InClusterShoal:
    """`shoal` run the way the chart's pod runs it: the Deployment's args, and credentials only from a
    service-account directory mounted at the standard path plus KUBERNETES_SERVICE_HOST/PORT (no
    kubeconfig anywhere). The mount lives in a private mount namespace (unshare), so the machine's
    /var/run is untouched."""

    proc: subprocess.Popen[bytes]
    log: Path
    metrics_port: int

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except OSError as e:
            code = getattr(e, "code", 0)
            return int(code or 0), str(e)


def start_in_cluster_shoal(cc: ChartCluster, token: str, workdir: Path) -> InClusterShoal:
    unshare = shutil.which("unshare")
    assert unshare is not None, "the in-cluster test needs unshare(1) (util-linux) to mount the token"
    sa = workdir / "serviceaccount"
    sa.mkdir(parents=True, exist_ok=True)
    (sa / "token").write_text(token)
    (sa / "namespace").write_text(NAMESPACE)
    shutil.copy(cc.cluster.dir / "pki" / "ca.crt", sa / "ca.crt")
    port = free_port()
    args = scheduler_args(cc.client(), port)
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
    env.update({"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(cc.api_port),
                "HOME": str(workdir), "SA_SRC": str(sa), "SA_DIR": SA_DIR})
    # A tmpfs over the real /var/run (a symlink to /run on Debian) in a private mount namespace, the token
    # directory inside it, then exec shoal (so the Popen pid is shoal's).
    mount_and_exec = ('set -e; run=$(readlink -f /var/run); mount -t tmpfs -o size=1m,mode=755 tmpfs "$run"; '
                      'mkdir -p "$SA_DIR"; cp "$SA_SRC"/token "$SA_SRC"/ca.crt "$SA_SRC"/namespace "$SA_DIR"/; '
                      'exec "$@"')
    cmd = [unshare, "--mount", "--propagation", "private", "sh", "-c", mount_and_exec, "sh",
           sys.executable, "-m", "shoal.cli.main", *args]
    log = workdir / "shoal-in-cluster.log"
    proc = subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env)
    return InClusterShoal(proc, log, port)


def wait_ready(shoal: InClusterShoal, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if shoal.proc.poll() is not None:
            raise AssertionError(f"in-cluster shoal exited {shoal.proc.returncode}:\n{shoal.tail()}")
        if shoal.get("/readyz")[0] == 200:
            return
        time.sleep(0.3)
    raise AssertionError(f"in-cluster shoal not ready after {timeout}s:\n{shoal.tail()}")


def running_pods(client: Client, namespace: str, labels: dict[str, str]) -> Iterator[Any]:
    from lightkube.resources.core_v1 import Pod

    for p in client.list(Pod, namespace=namespace, labels=labels):
        if p.status is not None and p.status.phase == "Running" and p.metadata.deletionTimestamp is None:
            yield p
