"""Apply manifests (CRDs, priority classes, RBAC) with server-side apply, for `shoal install-crds`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from shoal.kube.client import CRDS, JSON, KubeClient, Resource, load_yaml_documents

#: The kinds shoal ships manifests for: (apiVersion, kind) -> where they live.
KINDS: dict[tuple[str, str], Resource] = {
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): CRDS,
    ("scheduling.k8s.io/v1", "PriorityClass"): Resource("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    ("v1", "Namespace"): Resource("/api/v1", "namespaces", False),
    ("v1", "ServiceAccount"): Resource("/api/v1", "serviceaccounts", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"):
        Resource("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"):
        Resource("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    ("rbac.authorization.k8s.io/v1", "Role"): Resource("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"):
        Resource("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    ("v1", "ConfigMap"): Resource("/api/v1", "configmaps", True),
}


async def apply_object(client: KubeClient, obj: JSON) -> str:
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    res = KINDS.get(key)
    if res is None:
        raise ValueError(f"{key[1]} ({key[0]}): not a kind shoal install-crds applies")
    meta = obj.get("metadata") or {}
    path = res.path(meta.get("namespace"), meta["name"])
    await client.request("PATCH", path, body=obj, params={"fieldManager": "shoal", "force": "true"},
                         content_type="application/apply-patch+yaml")
    return f"{key[1].lower()}/{meta['name']} applied"


async def wait_established(client: KubeClient, name: str, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        crd = await client.get(CRDS, name)
        conds = (crd.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conds):
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"CRD {name} not Established after {timeout:.0f}s")
        await asyncio.sleep(0.2)


async def apply_manifests(kubeconfig: str | None, files: list[Path]) -> list[str]:
    """Apply every document of `files` in order; wait for CRDs to be Established. Returns log lines."""
    client = KubeClient(kubeconfig)
    out = []
    try:
        for f in files:
            for obj in load_yaml_documents(f.read_text()):
                out.append(await apply_object(client, obj))
                if obj.get("kind") == "CustomResourceDefinition":
                    await wait_established(client, obj["metadata"]["name"])
    finally:
        await client.close()
    return out
