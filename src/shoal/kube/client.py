"""The one module that talks HTTP to the API server (and the only one importing lightkube).

lightkube reads the kubeconfig (TLS, tokens, exec plugins) and builds the HTTP client; shoal then
works with plain JSON dicts, so `convert.py` and the cache are testable without a cluster and pay
no typed-model cost. Every call raises `ApiError` (status code + message) on a non-2xx answer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
from lightkube import KubeConfig
from lightkube.config import models as kubeconfig_models
from lightkube.config.client_adapter import AsyncClient, ConnectionParams, verify_cluster

from shoal.kube.fastpost import FastPoster

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """A non-2xx answer: `code` is the HTTP status, `reason` the Status reason (e.g. `Expired`)."""

    def __init__(self, code: int, message: str, reason: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives: API prefix (`/api/v1`, `/apis/group/version`) and plural."""

    prefix: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        p = self.prefix
        if self.namespaced and namespace:
            p += f"/namespaces/{namespace}"
        p += f"/{self.plural}"
        if name:
            p += f"/{name}"
        if sub:
            p += f"/{sub}"
        return p


PODS = Resource("/api/v1", "pods", True)
NODES = Resource("/api/v1", "nodes", False)
NAMESPACES = Resource("/api/v1", "namespaces", False)
PERSISTENT_VOLUMES = Resource("/api/v1", "persistentvolumes", False)
PERSISTENT_VOLUME_CLAIMS = Resource("/api/v1", "persistentvolumeclaims", True)
STORAGE_CLASSES = Resource("/apis/storage.k8s.io/v1", "storageclasses", False)
EVENTS = Resource("/api/v1", "events", True)
PRIORITY_CLASSES = Resource("/apis/scheduling.k8s.io/v1", "priorityclasses", False)
LEASES = Resource("/apis/coordination.k8s.io/v1", "leases", True)
QUEUES = Resource("/apis/scheduling.run.ai/v2", "queues", False)
PODGROUPS = Resource("/apis/scheduling.run.ai/v2alpha2", "podgroups", True)
TOPOLOGIES = Resource("/apis/kai.scheduler/v1alpha1", "topologies", False)
CRDS = Resource("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False)
CONFIGMAPS = Resource("/api/v1", "configmaps", True)
RESOURCE_CLAIMS = Resource("/apis/resource.k8s.io/v1", "resourceclaims", True)
RESOURCE_CLAIM_TEMPLATES = Resource("/apis/resource.k8s.io/v1", "resourceclaimtemplates", True)
RESOURCE_SLICES = Resource("/apis/resource.k8s.io/v1", "resourceslices", False)
DEVICE_CLASSES = Resource("/apis/resource.k8s.io/v1", "deviceclasses", False)

#: Where the kubelet mounts a pod's service-account token, CA and namespace.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def load_kubeconfig(path: str | None = None, *, environ: Mapping[str, str] | None = None,
                    service_account: str | Path = SERVICE_ACCOUNT_DIR) -> KubeConfig:
    """Where the credentials come from, in the order every controller uses: `path` (`--kubeconfig`),
    else `$KUBECONFIG`, else the in-cluster service account (its mounted token, `ca.crt` and
    `KUBERNETES_SERVICE_HOST`/`_PORT`), else `~/.kube/config`.

    In-cluster, the token is read from its file again whenever the server answers 401, so a token the
    kubelet rotates keeps working (lightkube's token-file auth).
    """
    env = os.environ if environ is None else environ
    if path:
        return KubeConfig.from_file(path)
    if env.get("KUBECONFIG"):
        return KubeConfig.from_file(env["KUBECONFIG"])
    sa = Path(service_account)
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if host and port and (sa / "token").is_file():
        host = f"[{host}]" if ":" in host else host  # IPv6
        namespace = (sa / "namespace").read_text().strip() if (sa / "namespace").is_file() else "default"
        return KubeConfig.from_one(
            cluster=kubeconfig_models.Cluster(server=f"https://{host}:{port}", certificate_auth=str(sa / "ca.crt")),
            user=kubeconfig_models.User(token_file=str(sa / "token")), namespace=namespace)
    return KubeConfig.from_file(Path(env.get("HOME", "~")).expanduser() / ".kube" / "config")


class KubeClient:
    """Thin async JSON client over lightkube's configured HTTP client."""

    _fast: FastPoster | None = None  # (test doubles skip __init__)

    def __init__(self, kubeconfig: str | None = None, *, timeout: float = 30.0, http2: bool = True,
                 fast_binds: bool = True) -> None:
        config = load_kubeconfig(kubeconfig).get()
        if config is None:
            raise ValueError(f"no usable context in kubeconfig {kubeconfig or '(environment)'}")
        http2 = http2 and _have_h2()
        # Requests share one HTTP/2 connection (many parallel binds without a TLS handshake each);
        # watches get HTTP/1.1 connections of their own, so a long stream never starves the writes
        # and a dropped connection never takes every watch down at once.
        self._http: httpx.AsyncClient = AsyncClient(
            config, ConnectionParams(timeout=httpx.Timeout(timeout), trust_env=False, http2=http2))
        self._watch_http: httpx.AsyncClient = AsyncClient(
            config, ConnectionParams(timeout=httpx.Timeout(timeout), trust_env=False, http2=False))
        #: Writes go through lean pipelined HTTP/1.1 connections (shoal.kube.fastpost) when the
        #: kubeconfig's auth allows; None = through httpx like the reads and watches.
        self._fast = _fast_poster(config, timeout) if fast_binds else None
        self._config = config

    async def close(self) -> None:
        if self._fast is not None:
            await self._fast.close()
        await self._http.aclose()
        await self._watch_http.aclose()

    async def request(self, method: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None,
                      content_type: str = "application/json") -> JSON:
        """Send one request; return the decoded JSON body (`{}` if empty). Non-2xx raises ApiError."""
        content = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": content_type} if content is not None else None
        resp = await self._http.request(method, path, content=content, params=params, headers=headers)
        if resp.status_code >= 300:
            raise _api_error(resp.status_code, resp.content)
        return json.loads(resp.content) if resp.content else {}

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> JSON:
        return await self.request("GET", res.path(namespace, name))

    async def create(self, res: Resource, obj: JSON, namespace: str | None = None) -> JSON:
        return await self.write("POST", res.path(namespace), obj)

    async def replace(self, res: Resource, obj: JSON, namespace: str | None = None) -> JSON:
        name = obj["metadata"]["name"]
        return await self.write("PUT", res.path(namespace, name), obj)

    async def patch(self, res: Resource, name: str, patch: JSON, namespace: str | None = None, *,
                    sub: str | None = None, strategic: bool = False) -> JSON:
        ctype = STRATEGIC_PATCH if strategic else MERGE_PATCH
        return await self.write("PATCH", res.path(namespace, name, sub), patch, ctype)

    async def write(self, method: str, path: str, body: Any, content_type: str = "application/json",
                    *, decode: bool = True) -> JSON:
        """A write request (POST, PUT, PATCH) with a JSON body: through the lean pipelined
        connections when the kubeconfig allows (httpx costs milliseconds of CPU per request),
        else like `request`. Non-2xx raises ApiError; the answer is decoded unless `decode` is
        False (then `{}`)."""
        if self._fast is None:
            answer = await self.request(method, path, body=body, content_type=content_type)
            return answer if decode else {}
        content = json.dumps(body).encode()
        status, raw = await self._fast.send(method, path, content, content_type)
        if status == 401:  # a rotated token file: httpx's auth re-reads it, and so do later fast writes
            answer = await self.request(method, path, body=body, content_type=content_type)
            with contextlib.suppress(OSError):
                self._fast.set_auth(_bearer(self._config))
            return answer if decode else {}
        if status >= 300:
            raise _api_error(status, raw)
        return json.loads(raw) if raw and decode else {}

    async def list_page(self, res: Resource, *, limit: int = 500, cont: str | None = None,
                        namespace: str | None = None, field_selector: str | None = None,
                        label_selector: str | None = None) -> JSON:
        params: dict[str, Any] = {"limit": limit}
        if cont:
            params["continue"] = cont
        if field_selector:
            params["fieldSelector"] = field_selector
        if label_selector:
            params["labelSelector"] = label_selector
        return await self.request("GET", res.path(namespace), params=params)

    async def watch(self, res: Resource, resource_version: str, *, timeout_seconds: int = 300,
                    namespace: str | None = None, field_selector: str | None = None,
                    label_selector: str | None = None) -> AsyncIterator[JSON]:
        """Watch events from `resource_version` with bookmarks; yields raw `{type, object}` dicts.

        Ends when the server closes the stream (timeout). An `ERROR` event is yielded as is
        (a 410 arrives that way), the caller decides to re-list.
        """
        params = {"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(timeout_seconds)}
        if field_selector:
            params["fieldSelector"] = field_selector
        if label_selector:
            params["labelSelector"] = label_selector
        timeout = httpx.Timeout(30.0, read=timeout_seconds + 30.0)
        req = self._watch_http.build_request("GET", res.path(namespace), params=params, timeout=timeout)
        resp = await self._watch_http.send(req, stream=True)
        try:
            if resp.status_code >= 300:
                raise _api_error(resp.status_code, await resp.aread())
            async for line in resp.aiter_lines():
                if line.strip():
                    yield json.loads(line)
        finally:
            await resp.aclose()

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST pods/binding. The 201 answer is a Status, not a Binding: it is not decoded as one."""
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        await self.write("POST", PODS.path(namespace, name, "binding"), body, decode=False)

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        """POST pods/eviction (policy/v1). A PDB refusal raises ApiError with code 429."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": {"preconditions": {"uid": uid}}}
        await self.write("POST", PODS.path(namespace, name, "eviction"), body, decode=False)


def _fast_poster(config: Any, timeout: float) -> FastPoster | None:
    """A FastPoster for a kubeconfig with token, token-file or client-certificate auth; else None."""
    user = config.user
    if user is None or user.exec is not None or user.username is not None:
        return None
    try:
        auth = _bearer(config)
    except OSError:
        return None
    ctx = verify_cluster(config.cluster, user, config.abs_file, trust_env=False)
    return FastPoster(config.cluster.server, ctx, auth, timeout=timeout)


def _bearer(config: Any) -> str | None:
    """The kubeconfig user's bearer token as an Authorization header (a token file read now)."""
    user = config.user
    if user.token is not None:
        return f"Bearer {user.token}"
    if user.token_file is not None:
        return f"Bearer {Path(config.abs_file(user.token_file)).read_text().strip()}"
    return None


#: Closed stream ids h2 remembers per connection (its default is 2**16). It keeps them to answer a
#: late frame on a closed stream precisely; one older than that is still refused, only less
#: precisely. Each costs ~130 bytes, so the default let a long-lived connection grow by ~8.5 MiB
#: before levelling off: the churn soak (docs/reliability.md) saw RSS rise ~0.8 KB per pod created,
#: and tracemalloc showed h2's closed-stream dict as the only growing Python allocation.
H2_CLOSED_STREAMS = 1024


def _have_h2() -> bool:
    """HTTP/2 needs the optional `h2` package; without it shoal falls back to HTTP/1.1 (slower binds).
    With it, the memory h2 keeps per closed stream is bounded (H2_CLOSED_STREAMS)."""
    import importlib.util

    if importlib.util.find_spec("h2") is None:
        return False
    from h2.connection import H2Connection

    H2Connection.MAX_CLOSED_STREAMS = min(H2Connection.MAX_CLOSED_STREAMS, H2_CLOSED_STREAMS)
    return True


def _api_error(code: int, content: bytes) -> ApiError:
    try:
        status = json.loads(content)
        return ApiError(code, str(status.get("message", "")), str(status.get("reason", "")))
    except (ValueError, AttributeError):
        return ApiError(code, content[:500].decode(errors="replace"))


def load_yaml_documents(text: str) -> list[JSON]:
    """Every non-empty YAML document of a manifest (for `shoal install-crds`)."""
    import yaml

    return [d for d in yaml.safe_load_all(text) if d]
