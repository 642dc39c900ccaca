"""Loading of the owner objects in tests/workloads/data and small pod builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).parent / "data"


def load(name: str) -> list[dict[str, Any]]:
    """All documents of data/<name>, in file order (direct owner first, top owner last)."""
    return [d for d in yaml.safe_load_all((DATA / name).read_text()) if d]


def make_pod(name: str, namespace: str = "default", *, labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None, owner: dict[str, Any] | None = None,
             node: str = "", uid: str = "", priority_class: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                            "annotations": dict(annotations or {})}
    if uid:
        meta["uid"] = uid
    if owner is not None:
        meta["ownerReferences"] = [{
            "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"].get("uid", ""), "controller": True,
        }]
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
