"""An in-memory Kubernetes API behind `KubeClient.request`, for unit tests of the kube adapter.

It records every request, stores objects by REST path (create -> 409 when present, PUT -> 409 on
a stale resourceVersion, merge patch, GET -> 404 when absent), answers `binding` and `eviction`
subresources with a Status, and fails a request on demand (`fail(method, path_suffix, code)`).
Everything above `request` (paths, bodies, the bind and evict helpers) is the real client's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from shoal.kube.client import ApiError, KubeClient

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str
    body: Any


def merge(target: JSON, patch: JSON) -> JSON:
    """RFC 7386 merge patch (a None value deletes the key)."""
    out = copy.deepcopy(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


class FakeApi(KubeClient):
    def __init__(self) -> None:  # no kubeconfig, no HTTP client
        self.objects: dict[str, JSON] = {}
        self.calls: list[Call] = []
        self._failures: list[tuple[str, str, ApiError, int]] = []
        self._rv = 0

    async def close(self) -> None:
        return None

    def put(self, path: str, obj: JSON) -> None:
        """Store an object as if it had been created (gets a resourceVersion)."""
        self._rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        self.objects[path] = obj

    def fail(self, method: str, path_suffix: str, code: int, message: str = "injected", times: int = 1) -> None:
        """The next `times` requests `method` on a path ending with `path_suffix` fail with `code`."""
        self._failures.append((method, path_suffix, ApiError(code, message), times))

    def sent(self, method: str, suffix: str = "") -> list[Call]:
        return [c for c in self.calls if c.method == method and c.path.endswith(suffix)]

    async def request(self, method: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None,
                      content_type: str = "application/json") -> JSON:
        self.calls.append(Call(method, path, copy.deepcopy(body)))
        for i, (m, suffix, err, times) in enumerate(self._failures):
            if m == method and path.endswith(suffix):
                if times <= 1:
                    self._failures.pop(i)
                else:
                    self._failures[i] = (m, suffix, err, times - 1)
                raise err
        if path.endswith(("/binding", "/eviction")):
            return {"kind": "Status", "status": "Success"}
        if method == "GET":
            if path not in self.objects:
                raise ApiError(404, f"{path} not found")
            return copy.deepcopy(self.objects[path])
        if method == "POST":
            target = f"{path}/{body['metadata'].get('name') or 'generated-' + str(len(self.calls))}"
            if target in self.objects:
                raise ApiError(409, f"{target} already exists")
            self.put(target, body)
            return copy.deepcopy(self.objects[target])
        if method == "PUT":
            current = self.objects.get(path)
            if current is None:
                raise ApiError(404, f"{path} not found")
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "the object has been modified")
            self.put(path, body)
            return copy.deepcopy(self.objects[path])
        if method == "PATCH":
            base = path.removesuffix("/status")
            if base not in self.objects:
                raise ApiError(404, f"{path} not found")
            self.objects[base] = merge(self.objects[base], body)
            return copy.deepcopy(self.objects[base])
        raise AssertionError(f"unexpected request {method} {path}")
