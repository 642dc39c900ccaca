"""One informer event reduced to what a cache handler keys on.

Every handler of a local cache (kube/cache.py, kube/dra.py) starts the same way: take the object
the event is about (`new`, or `old` for a deletion), read its namespace and name, and decide
whether the object is gone. `change_of` does that once, so the handlers hold only what differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.kai.objects import JSON, meta


@dataclass(frozen=True, slots=True)
class Change:
    """What an informer event says about one object.

    `obj` is the object as it is now, or None when the event deletes it (a DELETED event, or
    no new object at all)."""

    namespace: str
    name: str
    obj: JSON | None

    @property
    def key(self) -> str:
        """"namespace/name" (shoal's key for namespaced objects such as PodGroups)."""
        return f"{self.namespace}/{self.name}"

    @property
    def pair(self) -> tuple[str, str]:
        """(namespace, name), the key of claims and claim templates."""
        return self.namespace, self.name


def change_of(kind: str, old: JSON | None, new: JSON | None) -> Change | None:
    """The change an informer event `(kind, old, new)` makes, or None for an event without an
    object (nothing to do)."""
    obj = new or old
    if obj is None:
        return None
    m = meta(obj)
    live = None if new is None or kind == "DELETED" else new
    return Change(str(m.get("namespace", "")), str(m.get("name")), live)
