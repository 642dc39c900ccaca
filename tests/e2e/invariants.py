"""Invariants of a scheduled cluster, read from the API only (the chaos tests' checker, #19).

`violations(client, namespace)` lists, as sentences, every broken invariant among the namespace's
pods: a node whose whole GPUs are over-committed (bound, not finished pods' `nvidia.com/gpu` limits
above its allocatable), a shared GPU group over-committed (the `gpu-fraction` of the pods labelled
with one `runai-gpu-group` on one node above 1), a pod bound to a node that does not exist. Gangs
partly bound are checked by `partial_gangs` (only meaningful once the grace period has passed).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Node, Pod

GROUP_LABEL = "runai-gpu-group"


def _active(p: Any) -> bool:
    return bool(p.spec.nodeName) and (p.status is None or p.status.phase not in ("Succeeded", "Failed"))


def _whole_gpus(p: Any) -> int:
    return sum(int(((c.resources.limits if c.resources else None) or {}).get("nvidia.com/gpu", 0))
               for c in p.spec.containers)


def violations(client: Client, namespace: str) -> list[str]:
    """Every broken placement invariant among `namespace`'s pods, as sentences (empty = none)."""
    nodes = {n.metadata.name: int((n.status.allocatable or {}).get("nvidia.com/gpu", 0)) for n in client.list(Node)}
    whole: Counter[str] = Counter()
    shared: dict[tuple[str, str], float] = defaultdict(float)
    out = []
    for p in client.list(Pod, namespace=namespace):
        if not _active(p):
            continue
        node = p.spec.nodeName
        if node not in nodes:
            out.append(f"pod {p.metadata.name} is bound to missing node {node}")
            continue
        whole[node] += _whole_gpus(p)
        frac = (p.metadata.annotations or {}).get("gpu-fraction")
        group = (p.metadata.labels or {}).get(GROUP_LABEL)
        if frac and group:
            shared[(node, group)] += float(frac)
    for node, used in whole.items():
        devices_shared = len({g for n, g in shared if n == node})
        if used + devices_shared > nodes[node]:
            out.append(f"node {node}: {used} whole GPUs + {devices_shared} shared devices > {nodes[node]}")
    out.extend(f"node {n}: GPU group {g} holds {v:.2f} of one GPU" for (n, g), v in shared.items() if v > 1.0 + 1e-9)
    return out


def partial_gangs(client: Client, namespace: str, gangs: dict[str, int]) -> dict[str, int]:
    """Gangs (PodGroup name -> minMember) with some but fewer than minMember pods bound."""
    bound: Counter[str] = Counter()
    for p in client.list(Pod, namespace=namespace):
        pg = (p.metadata.annotations or {}).get("pod-group-name")
        if pg in gangs and _active(p):
            bound[pg] += 1
    return {g: bound[g] for g, m in gangs.items() if 0 < bound[g] < m}
