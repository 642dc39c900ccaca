"""Helpers for end-to-end tests against a real kube-apiserver (scripts/k8s-test-env).

The fixtures using them are in conftest.py.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
from lightkube import ApiError, Client, KubeConfig, codecs
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.models.core_v1 import NodeSpec, NodeStatus
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace, Node, Pod

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "k8s-test-env"
DEPLOY = REPO / "deploy"
DATA = REPO / "data"  # reference data copied into the repository (THIRD_PARTY.md)
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.2,
               what: str = "condition") -> T:
    """Call ``probe`` until it returns something other than None/False; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and last is not False:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def data_text(rel: str) -> str:
    """The text of ``data/<rel>`` (the repository's reference data), read from ``<rel>`` or ``<rel>.gz``.
    The repository carries every file the tests read: a missing one fails the test, never skips it."""
    path = DATA / rel
    if path.is_file():
        return path.read_text(encoding="utf-8")
    gz = path.with_name(path.name + ".gz")
    assert gz.is_file(), f"{path} (nor .gz) is missing from the repository (see THIRD_PARTY.md)"
    return gzip.decompress(gz.read_bytes()).decode("utf-8")


@dataclass(frozen=True)
class Cluster:
    """A running test cluster: its state dir and the two kubeconfigs ``start`` wrote."""

    dir: Path
    admin_kubeconfig: Path
    scheduler_kubeconfig: Path

    @property
    def viewer_kubeconfig(self) -> Path:
        """A read-only user (group shoal-viewers, deploy/rbac-viewer.yaml)."""
        return self.dir / "viewer.kubeconfig"

    def client(self, who: str = "admin") -> Client:
        """A sync lightkube client as ``admin`` (system:masters) or ``scheduler`` (deploy/rbac.yaml)."""
        path = self.admin_kubeconfig if who == "admin" else self.scheduler_kubeconfig
        return Client(config=KubeConfig.from_file(path), field_manager="shoal-e2e")

    def restart(self, process: str, signal: str = "KILL", *, kubelet: bool = True) -> float:
        """Stop ``process`` (etcd, kube-apiserver, ...) with ``signal`` and start it again with the same
        ports and data dir; return the seconds until it served again (the API server: RBAC included).

        kwok, the fake kubelet, stops starting pods after an etcd or API server restart (its pod watch
        does not come back), which would strand every later test of the session: with ``kubelet`` it
        is restarted too once the control plane serves (not counted in the seconds returned)."""
        t0 = time.monotonic()
        res = subprocess.run([str(SCRIPT), "restart", str(self.dir), process, signal], capture_output=True,
                             text=True, timeout=180)
        assert res.returncode == 0, f"restart {process} failed:\n{res.stderr[-3000:]}"
        eventually(self._serving, 60, what=f"the API server serving pods and nodes after restarting {process}")
        took = time.monotonic() - t0
        if kubelet and process in ("etcd", "kube-apiserver"):
            self.restart("kwok", "TERM")
        return took

    def _serving(self) -> bool:
        """Pods and nodes can be listed: the API server's watch caches are initialised again (until
        then it answers 429 "storage is (re)initializing")."""
        client = self.client()
        try:
            list(client.list(Pod, namespace="*", chunk_size=1))
            list(client.list(Node, chunk_size=1))
        except ApiError as e:
            if e.status.code in (429, 500, 503, 504):
                return False
            raise
        except httpx2.HTTPError:
            return False
        finally:
            client.close()
        return True

    def expire_watches(self, pids: list[int] | tuple[int, ...] = (), *, kubelet: bool = True) -> int:
        """Force every watch to end in 410 Gone (`scripts/k8s-test-env expire`): the writers (kwok, the
        controller manager and ``pids``) are paused for the moment from the compaction of etcd to its
        current revision until etcd is killed, then etcd starts again. Compaction alone ends no open
        watch; the API server's watches of etcd, resumed after the restart from compacted revisions,
        are refused, its watch caches re-list and every client watch resumed from an older
        resourceVersion is answered 410 Gone. (A resource written after the compaction point would be
        resumed from a revision etcd still has: hence the pause.) Returns the compaction revision."""
        t0 = time.monotonic()
        res = subprocess.run([str(SCRIPT), "expire", str(self.dir), *map(str, pids)], capture_output=True,
                             text=True, timeout=180)
        assert res.returncode == 0, f"expire failed:\n{res.stderr[-3000:]}"
        eventually(self._serving, 60, what="the API server serving pods and nodes after the forced expiry")
        if kubelet:
            self.restart("kwok", "TERM")
        assert time.monotonic() - t0 < 180
        return int(res.stdout.split()[0])


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_binaries() -> None:
    """Skip (locally) or fail (in CI) when the cluster binaries are not installed."""
    problem = None
    if shutil.which("openssl") is None:
        problem = "openssl not found"
    else:
        res = subprocess.run([str(SCRIPT), "check"], capture_output=True, text=True)
        if res.returncode != 0:
            problem = res.stderr.strip() or "k8s test binaries not installed"
    if problem is None:
        return
    msg = f"{problem} (run `scripts/k8s-test-env install`, about 6 min once on 2 cores)"
    if _in_ci():
        pytest.fail(f"e2e: {msg}; CI must not skip the e2e tests", pytrace=False)
    pytest.skip(f"e2e: {msg}")


def apply_deploy(client: Client, deploy: Path = DEPLOY) -> None:
    """Create the CRDs (and wait until they are served), then priority classes and RBAC."""
    crds = []
    for path in sorted((deploy / "crds").glob("*.yaml")):
        for obj in codecs.load_all_yaml(path.read_text()):
            crds.append(client.create(obj))
    for crd in crds:
        wait_crd_served(client, crd)
    for fname in ("priorityclasses.yaml", "rbac.yaml", "rbac-viewer.yaml", "gpu-sharing.yaml"):
        for obj in codecs.load_all_yaml((deploy / fname).read_text()):
            client.create(obj)


def wait_crd_served(client: Client, crd: CustomResourceDefinition, timeout: float = 30.0) -> None:
    """Wait until ``crd`` is Established and its objects can be listed.

    Established alone is not enough: the watch cache of a new resource answers 429 "storage is
    (re)initializing" for a moment afterwards.
    """
    name = crd.metadata.name
    eventually(lambda: _established(client, name), timeout, what=f"CRD {name} Established")
    version = next(v.name for v in crd.spec.versions if v.storage)
    names = crd.spec.names
    if crd.spec.scope == "Namespaced":
        res: Any = create_namespaced_resource(crd.spec.group, version, names.kind, names.plural)
        kw = {"namespace": "*"}
    else:
        res = create_global_resource(crd.spec.group, version, names.kind, names.plural)
        kw = {}

    def listable() -> bool:
        try:
            list(client.list(res, **kw))
        except ApiError as e:
            if e.status.code == 429:
                return False
            raise
        return True

    eventually(listable, timeout, what=f"CRD {name} served")


def _established(client: Client, name: str) -> bool:
    crd = client.get(CustomResourceDefinition, name)
    conds = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conds)


@dataclass
class KEnv:
    """Per-test view of the cluster: a private namespace and fake nodes that are cleaned up afterwards."""

    cluster: Cluster
    client: Client
    namespace: str
    node_prefix: str
    nodes: list[str] = field(default_factory=list)

    def add_gpu_nodes(self, count: int, gpus: int = 8, cpu: str = "64", memory: str = "512Gi",
                      labels: dict[str, str] | None = None) -> list[str]:
        """Create ``count`` kwok-managed, taint-free nodes with ``gpus`` nvidia.com/gpu each; return names."""
        names = []
        for _ in range(count):
            name = f"{self.node_prefix}-{len(self.nodes)}"
            resources = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus)}
            node = Node(
                metadata=ObjectMeta(
                    name=name,
                    labels={"kubernetes.io/hostname": name, "type": "kwok", **(labels or {})},
                    annotations={KWOK_NODE_ANNOTATION: "fake"},
                ),
                spec=NodeSpec(),
                status=NodeStatus(capacity=dict(resources), allocatable=dict(resources)),
            )
            self.client.create(node)
            self.nodes.append(name)
            names.append(name)
        return names

    def wait_nodes_ready(self, names: list[str], timeout: float = 30.0) -> None:
        for name in names:
            eventually(lambda n=name: node_ready(self.client, n), timeout, what=f"node {name} Ready")

    def cleanup(self) -> None:
        """Delete the test's pods (at once: grace 0), its namespace, then its nodes.

        Pods go first because kwok only finalizes pods on nodes it still manages.
        """
        _delete_quietly(lambda: self.client.deletecollection(Pod, namespace=self.namespace, grace_period=0))
        _delete_quietly(lambda: self.client.delete(Namespace, self.namespace))
        for name in self.nodes:
            _delete_quietly(lambda n=name: self.client.delete(Node, n))


def node_ready(client: Client, name: str) -> bool:
    node = client.get(Node, name)
    conds = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conds)


def _delete_quietly(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except ApiError as e:
        if e.status.code != 404:
            raise
