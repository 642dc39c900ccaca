"""Helpers for the GPU-sharing e2e tests: a fake device plugin for reservation pods, readers of the
shared-GPU ConfigMaps, and a stand-in for fractiond.

The fake device plugin plays the node's part for every reservation pod kwok "runs": it gives the
pod a free device UUID of its node (`GPU-<node>-<i>`, i < the node's nvidia.com/gpu) and runs the
real agent code (`shoal.kube.gpusharing.agent.run_agent`) with that UUID in
NVIDIA_VISIBLE_DEVICES, as the container would see it. It records a reservation pod it could not
serve (every device of the node already reserved): a second reservation of one GPU.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError as LightkubeError
from lightkube import Client
from lightkube.resources.admissionregistration_v1 import (
    MutatingWebhookConfiguration,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.core_v1 import ConfigMap, Pod

from shoal.kai.sharing import (
    FRACTIONING_PREFIX,
    RESERVATION_NAMESPACE,
    RESERVED_DEVICE_ANNOTATION,
    VISIBLE_DEVICES,
    configmap_names,
    fraction_container,
    reservation_key,
)
from shoal.kube.client import NODES, PODS, ApiError, KubeClient
from shoal.kube.gpusharing.agent import run_agent
from shoal.kube.webhook.certs import write_self_signed

from .cluster import Cluster, KEnv


@dataclass
class FakeDevicePlugin:
    cluster: Cluster
    #: Nodes whose reservation pods get no device (the agent "never starts" there).
    silent_nodes: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    #: Reservation pod uid -> the device it was given.
    served: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> FakeDevicePlugin:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._loop()), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    async def _loop(self) -> None:
        client = KubeClient(str(self.cluster.admin_kubeconfig))
        try:
            while not self._stop.is_set():
                try:
                    await self._serve(client)
                except Exception as e:  # keep serving; the tests read `errors`
                    self.errors.append(f"plugin: {e!r}")
                await asyncio.sleep(0.2)
        finally:
            await client.close()

    async def _serve(self, client: KubeClient) -> None:
        pods = (await client.list_page(PODS, namespace=RESERVATION_NAMESPACE, limit=1000)).get("items") or []
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        for pod in live:
            ann = pod["metadata"].get("annotations") or {}
            name = pod["metadata"]["name"]
            node = pod["spec"].get("nodeName")
            if ann.get(RESERVED_DEVICE_ANNOTATION) or not node or node in self.silent_nodes:
                continue
            taken = {(p["metadata"].get("annotations") or {}).get(RESERVED_DEVICE_ANNOTATION)
                     for p in live if p["spec"].get("nodeName") == node}
            # Served but not yet seen annotated; by uid: shoal may delete a reservation pod and create
            # another of the same name at once, whose device is not the old one's.
            taken |= {dev for uid, dev in self.served.items() if uid in {p["metadata"]["uid"] for p in live}}
            try:
                count = int((await client.get(NODES, node))["status"]["allocatable"].get("nvidia.com/gpu", "0"))
            except ApiError as e:  # a node of an earlier test, gone
                if e.code == 404:
                    continue
                raise
            free = [f"GPU-{node}-{i}" for i in range(count) if f"GPU-{node}-{i}" not in taken]
            if not free:
                self.errors.append(f"{name}: every GPU of {node} is reserved already ({sorted(t for t in taken if t)})")
                continue
            env = {"POD_NAME": name, "POD_NAMESPACE": RESERVATION_NAMESPACE, VISIBLE_DEVICES: free[0]}
            await run_agent(client, env, once=True)
            self.served[pod["metadata"]["uid"]] = free[0]


@pytest.fixture
def device_plugin(cluster: Cluster) -> Iterator[FakeDevicePlugin]:
    plugin = FakeDevicePlugin(cluster).start()
    yield plugin
    plugin.stop()


def reservations(kenv: KEnv) -> list[Any]:
    """Live reservation pods on the test's nodes."""
    return [p for p in kenv.client.list(Pod, namespace=RESERVATION_NAMESPACE)
            if not p.metadata.deletionTimestamp and p.spec.nodeName in kenv.nodes]


def reservation_devices(kenv: KEnv) -> dict[tuple[str, str], list[str]]:
    """(node, group) -> devices of its live reservation pods on the test's nodes (one, when all is well)."""
    out: dict[tuple[str, str], list[str]] = {}
    for p in reservations(kenv):
        key = reservation_key(p.to_dict())
        assert key is not None, p.metadata.name
        out.setdefault(key, []).append((p.metadata.annotations or {}).get(RESERVED_DEVICE_ANNOTATION, ""))
    return out


def configmap_data(client: Client, pod: Any) -> dict[str, str]:
    """Both shared-GPU ConfigMaps of `pod` merged ({} for one that does not exist)."""
    obj = pod.to_dict()
    prefix = (obj["metadata"].get("annotations") or {}).get("runai/shared-gpu-configmap")
    assert prefix, f"{pod.metadata.name} is not linked to shared-GPU ConfigMaps"
    data: dict[str, str] = {}
    for name in configmap_names(prefix, fraction_container(obj)):
        try:
            data.update(client.get(ConfigMap, name, namespace=pod.metadata.namespace).data or {})
        except LightkubeError as e:
            if e.status.code != 404:
                raise
    return data


def groups_of(pod: Any) -> list[str]:
    labels = pod.metadata.labels or {}
    multi = sorted(v for k, v in labels.items() if k.startswith("runai-gpu-group/"))
    return multi or ([labels["runai-gpu-group"]] if "runai-gpu-group" in labels else [])


def fractiond_env(pod: Any, container: str) -> dict[str, str]:
    """What fractiond would inject into `container` at creation, from the pod's annotations only
    (kai-gpu-fractioning: NVIDIA_VISIBLE_DEVICES from `.gpus.devices`, the MPS memory limits in MiB
    from `.gpu-memory.request|limit`)."""
    ann = pod.metadata.annotations or {}
    key = f"{FRACTIONING_PREFIX}{container}"
    env = {}
    if ann.get(f"{key}.gpus.devices", "").strip():
        env[VISIBLE_DEVICES] = ann[f"{key}.gpus.devices"].strip()
    for part, var in (("request", "NVIDIA_GPU_MEMORY_REQUESTS"), ("limit", "NVIDIA_GPU_MEMORY_LIMITS")):
        value = ann.get(f"{key}.gpu-memory.{part}")
        if value is not None:
            assert value.endswith("Mi"), value
            env[var] = value.removesuffix("Mi")
    return env


@dataclass
class Webhook:
    """`shoal webhook` on a loopback port, registered for one namespace by `url` with its self-signed CA."""

    cluster: Cluster
    kenv: KEnv
    scheduler_name: str
    tmp: Path
    port: int = 0
    names: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Webhook:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        write_self_signed(self.tmp, ["127.0.0.1"])
        cmd = [sys.executable, "-m", "shoal.cli.main", "webhook",
               "--kubeconfig", str(self.cluster.scheduler_kubeconfig),
               "--scheduler-name", self.scheduler_name, "--host", "127.0.0.1", "--port", str(self.port),
               "--tls-cert", str(self.tmp / "tls.crt"), "--tls-key", str(self.tmp / "tls.key")]
        self.proc = subprocess.Popen(cmd, stdout=(self.tmp / "webhook.log").open("ab"), stderr=subprocess.STDOUT)
        return self

    def register(self, failure_policy: str = "Fail", port: int | None = None) -> None:
        """Mutating (pods) and validating (pods, PodGroups) configurations for the test's namespace."""
        ca = base64.b64encode((self.tmp / "tls.crt").read_bytes()).decode()
        base = f"https://127.0.0.1:{port or self.port}"
        selector = {"matchLabels": {"kubernetes.io/metadata.name": self.kenv.namespace}}

        def hook(name: str, path: str, resource: str, group: str, version: str) -> dict[str, Any]:
            return {"name": f"{name}.shoal.dev", "clientConfig": {"url": base + path, "caBundle": ca},
                    "rules": [{"apiGroups": [group], "apiVersions": [version], "operations": ["CREATE"],
                               "resources": [resource]}],
                    "failurePolicy": failure_policy, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                    "namespaceSelector": selector, "timeoutSeconds": 10}

        name = f"shoal-{self.kenv.namespace}"[:63]
        self.names.append(name)
        self.kenv.client.create(MutatingWebhookConfiguration.from_dict({
            "metadata": {"name": name}, "webhooks": [hook("pods", "/mutate-pods", "pods", "", "v1")]}))
        self.kenv.client.create(ValidatingWebhookConfiguration.from_dict({
            "metadata": {"name": name}, "webhooks": [
                hook("pods", "/validate-pods", "pods", "", "v1"),
                hook("podgroups", "/validate-podgroups", "podgroups", "scheduling.run.ai", "v2alpha2")]}))

    def stop(self) -> None:
        for name in self.names:
            for res in (MutatingWebhookConfiguration, ValidatingWebhookConfiguration):
                with contextlib.suppress(LightkubeError):
                    self.kenv.client.delete(res, name)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
