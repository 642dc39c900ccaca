"""Owner-chain resolution: follow a pod's ownerReferences up to its top owner through a lookup callback."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from shoal.workloads.unstructured import View

MAX_OWNER_DEPTH = 16  # deeper chains are cut: real controllers nest 3-4 levels at most


@dataclass(frozen=True, slots=True)
class OwnerKey:
    """What `resolve_owner_chain` asks the lookup for: one ownerReference, in the child's namespace."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str = ""


OwnerLookup = Callable[[OwnerKey], Mapping[str, Any] | None]


def controller_owner(obj: Mapping[str, Any]) -> OwnerKey | None:
    """The owner to follow from ``obj``: its controller reference, else its only reference.

    Returns None when ``obj`` has no ownerReferences. Several references none of which is the controller
    is ambiguous and raises `WorkloadError` (as KAI's grouper does).
    """
    view = View(obj)
    refs = view.items("metadata", "ownerReferences")
    if not refs:
        return None
    chosen = next((ref for ref in refs if ref.flag("controller")), None)
    if chosen is None:
        if len(refs) > 1:
            raise view.error("metadata.ownerReferences",
                             f"{len(refs)} owner references and none is the controller; cannot pick one")
        chosen = refs[0]
    return OwnerKey(
        api_version=chosen.string("apiVersion"),
        kind=chosen.string("kind"),
        name=chosen.string("name"),
        namespace=view.string("metadata", "namespace", default=""),
        uid=chosen.string("uid", default=""),
    )


#: The owner walk as a generator: it yields the key of the next owner to fetch and is sent that
#: owner (None: unreadable, the chain ends); its return value is the chain. The walk is written
#: once and driven by a synchronous lookup (`resolve_owner_chain`) or an async one (the live
#: pod grouper).
OwnerWalk = Generator[OwnerKey, Mapping[str, Any] | None, list[Mapping[str, Any]]]


def owner_walk(pod: Mapping[str, Any]) -> OwnerWalk:
    """Walk ``pod``'s controller ownerReferences up to the top owner (see `resolve_owner_chain`)."""
    chain: list[Mapping[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    current: Mapping[str, Any] = pod
    for _ in range(MAX_OWNER_DEPTH):
        key = controller_owner(current)
        if key is None or (key.kind, key.name) in seen:
            break
        seen.add((key.kind, key.name))
        owner = yield key
        if owner is None:
            break
        chain.append(owner)
        current = owner
    return chain


def resolve_owner_chain(pod: Mapping[str, Any], lookup: OwnerLookup) -> list[Mapping[str, Any]]:
    """The owner chain of ``pod``, direct owner first and top owner last (empty for a bare pod).

    Follows the controller ownerReference of each object. An owner the lookup cannot return (not found,
    forbidden) ends the chain at the last readable owner. Raises `WorkloadError` for an object with
    several non-controller owners. Never mutates its inputs; calls ``lookup`` at most MAX_OWNER_DEPTH times.
    """
    walk = owner_walk(pod)
    try:
        key = next(walk)
        while True:
            key = walk.send(lookup(key))
    except StopIteration as done:
        chain: list[Mapping[str, Any]] = done.value
        return chain
