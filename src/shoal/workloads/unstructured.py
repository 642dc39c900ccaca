"""Typed, validating reads of unstructured Kubernetes objects (plain dicts as read from the API).

Every accessor names the field path it reads, so a wrong type or a missing required field becomes a
`WorkloadError` naming the object and the field — never a KeyError or TypeError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shoal.workloads.errors import WorkloadError

Obj = Mapping[str, Any]

_MISSING: Any = object()


class View:
    """A read-only view of one object (or a sub-object of it) that reports errors against the root object.

    ``View(obj).map("spec", "template")`` returns a View of the sub-map; errors read
    ``"<Kind> <ns>/<name>: spec.template: ..."``.
    """

    __slots__ = ("kind", "name", "obj", "path")

    def __init__(self, obj: Any, *, kind: str | None = None, name: str | None = None, path: str = "") -> None:
        if kind is None or name is None:
            root = obj if isinstance(obj, Mapping) else {}
            meta = root.get("metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            ns, nm = meta.get("namespace"), meta.get("name")
            kind = kind if kind is not None else str(root.get("kind") or "object")
            if name is None:
                name = f"{ns}/{nm}" if ns and nm else str(nm or "<unnamed>")
        self.obj = obj
        self.kind = kind
        self.name = name
        self.path = path

    # -- errors ---------------------------------------------------------------------------------
    def error(self, field: str, message: str) -> WorkloadError:
        """A WorkloadError for ``field`` (relative to this view)."""
        return WorkloadError(self.kind, self.name, self._join(field), message)

    def _join(self, *keys: str | int) -> str:
        out = self.path
        for key in keys:
            if isinstance(key, int):
                out += f"[{key}]"
            elif key == "":
                continue
            else:
                out = f"{out}.{key}" if out else key
        return out

    # -- navigation -----------------------------------------------------------------------------
    def _raw(self, keys: Sequence[str | int]) -> Any:
        cur: Any = self.obj
        for i, key in enumerate(keys):
            if isinstance(key, int):
                if not isinstance(cur, list) or key >= len(cur):
                    return _MISSING
                cur = cur[key]
                continue
            if cur is None:
                return _MISSING
            if not isinstance(cur, Mapping):
                raise self.error(self._join(*keys[:i]).removeprefix(self.path).lstrip("."),
                                 f"must be an object, got {type(cur).__name__}")
            if key not in cur:
                return _MISSING
            cur = cur[key]
        return _MISSING if cur is None else cur

    def has(self, *keys: str | int) -> bool:
        """True when the path exists with a non-null value."""
        return self._raw(keys) is not _MISSING

    def sub(self, *keys: str | int, required: bool = False) -> View:
        """A view of the map at ``keys`` (an empty map when absent and not required)."""
        value = self._raw(keys)
        path = self._join(*keys)
        if value is _MISSING:
            if required:
                raise WorkloadError(self.kind, self.name, path, "required field is missing")
            value = {}
        if not isinstance(value, Mapping):
            raise WorkloadError(self.kind, self.name, path, f"must be an object, got {type(value).__name__}")
        return View(value, kind=self.kind, name=self.name, path=path)

    def items(self, *keys: str | int, required: bool = False) -> list[View]:
        """Views of the list of maps at ``keys`` (empty when absent and not required)."""
        value = self._raw(keys)
        path = self._join(*keys)
        if value is _MISSING:
            if required:
                raise WorkloadError(self.kind, self.name, path, "required field is missing")
            return []
        if not isinstance(value, list):
            raise WorkloadError(self.kind, self.name, path, f"must be a list, got {type(value).__name__}")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                raise WorkloadError(self.kind, self.name, f"{path}[{i}]",
                                    f"must be an object, got {type(item).__name__}")
            out.append(View(item, kind=self.kind, name=self.name, path=f"{path}[{i}]"))
        return out

    def integer(self, *keys: str | int, default: int | None = None) -> int:
        """The integer at ``keys``; ``default`` when absent (absent and no default is an error)."""
        value = self._raw(keys)
        path = self._join(*keys)
        if value is _MISSING:
            if default is None:
                raise WorkloadError(self.kind, self.name, path, "required field is missing")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise WorkloadError(self.kind, self.name, path, f"must be an integer, got {value!r}")
        return value

    def string(self, *keys: str | int, default: str | None = None) -> str:
        """The string at ``keys``; ``default`` when absent (absent and no default is an error)."""
        value = self._raw(keys)
        path = self._join(*keys)
        if value is _MISSING:
            if default is None:
                raise WorkloadError(self.kind, self.name, path, "required field is missing")
            return default
        if not isinstance(value, str):
            raise WorkloadError(self.kind, self.name, path, f"must be a string, got {value!r}")
        return value

    def flag(self, *keys: str | int, default: bool = False) -> bool:
        """The boolean at ``keys``; ``default`` when absent."""
        value = self._raw(keys)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            raise WorkloadError(self.kind, self.name, self._join(*keys), f"must be a boolean, got {value!r}")
        return value

    def string_map(self, *keys: str | int) -> dict[str, str]:
        """A map of strings (labels, annotations); empty when absent. Non-string values are an error."""
        view = self.sub(*keys)
        out: dict[str, str] = {}
        for key, value in view.obj.items():
            if not isinstance(value, str):
                raise WorkloadError(self.kind, self.name, view._join(str(key)),
                                    f"must be a string, got {value!r}")
            out[str(key)] = value
        return out

    # -- metadata shortcuts ---------------------------------------------------------------------
    def labels(self) -> dict[str, str]:
        return self.string_map("metadata", "labels")

    def annotations(self) -> dict[str, str]:
        return self.string_map("metadata", "annotations")


def parse_int_string(view: View, field: str, raw: str, *, minimum: int) -> int:
    """Parse an integer carried in a label or annotation value, requiring ``>= minimum``."""
    try:
        value = int(raw.strip())
    except ValueError:
        raise view.error(field, f"must be an integer, got {raw!r}") from None
    if value < minimum:
        raise view.error(field, f"must be >= {minimum}, got {value}")
    return value
