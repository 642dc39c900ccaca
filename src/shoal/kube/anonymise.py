"""`shoal snapshot --anonymise`: the same cluster with every name replaced and free text removed.

Names of namespaces, nodes, queues, PodGroups, pods, topologies, PersistentVolumes and claims, and
owners become `ns-1`, `node-1`, `queue-1`, `job-1`, `pod-1`, `topology-1`, `pv-1`, `pvc-1`,
`owner-1` (numbered in sorted order, so the
same cluster gives the same file). Every string value equal to a replaced name is replaced
wherever it appears (a pod's `nodeName`, the `kubernetes.io/hostname` label, `pod-group-name`,
`parentQueue`, node-affinity values), so decisions are unchanged. Labels and annotations keep
only the keys the scheduler reads (KAI's, NVIDIA's, topology and Kubernetes node labels, the
keys pods select nodes by, shoal's own); other labels, annotations and condition messages go, and
uids are hashed.
"""

from __future__ import annotations

import hashlib
from typing import Any

from shoal.kube.client import JSON

_KEEP_PREFIXES = ("kai.scheduler/", "scheduling.run.ai/", "runai-", "nvidia.com/", "topology.kubernetes.io/",
                  "kubernetes.io/", "node.kubernetes.io/", "node-role.kubernetes.io/", "shoal.dev/",
                  "training.kubeflow.org/job-role", "ray.io/node-type")
_KEEP_KEYS = ("gpu-fraction", "gpu-memory", "gpu-fraction-num-devices", "pod-group-name", "received-resource-type",
              "gpu-portion", "type")
#: file key -> prefix of its objects' new names
_PREFIX = {"nodes": "node", "queues": "queue", "podGroups": "job", "pods": "pod", "topologies": "topology",
           "persistentVolumes": "pv", "persistentVolumeClaims": "pvc"}


def _keep(key: str, extra: set[str]) -> bool:
    return key in _KEEP_KEYS or key in extra or key.startswith(_KEEP_PREFIXES)


def anonymise(objects: dict[str, list[JSON]]) -> dict[str, list[JSON]]:
    """A renamed copy of `objects` (see the module doc); never mutates its input."""
    names: dict[str, str] = {}
    counters: dict[str, int] = {}
    # Values that must keep their meaning even if an object happens to share the name.
    protected = {o["metadata"].get("name", "") for o in objects.get("priorityClasses", [])}
    protected |= {str((o.get("spec") or {}).get("schedulerName", "")) for o in objects.get("pods", [])}

    def add(prefix: str, values: set[str]) -> None:
        for v in sorted(values - protected - set(names) - {""}):
            counters[prefix] = counters.get(prefix, 0) + 1
            names[v] = f"{prefix}-{counters[prefix]}"

    add("node", {o["metadata"].get("name", "") for o in objects.get("nodes", [])})
    add("ns", {o["metadata"].get("namespace", "") for k in ("pods", "podGroups", "persistentVolumeClaims")
               for o in objects.get(k, [])} | {o["metadata"].get("name", "") for o in objects.get("namespaces", [])})
    for key in ("queues", "podGroups", "topologies", "pods", "persistentVolumes", "persistentVolumeClaims"):
        add(_PREFIX[key], {o["metadata"].get("name", "") for o in objects.get(key, [])})
    add("owner", {r.get("name", "") for k in ("pods", "podGroups") for o in objects.get(k, [])
                  for r in o["metadata"].get("ownerReferences") or []})
    selected = _selector_keys(objects)
    out: dict[str, list[JSON]] = {}
    for key, items in objects.items():
        out[key] = [_rename(_strip(o, selected), names) for o in items]
    return out


def _selector_keys(objects: dict[str, list[JSON]]) -> set[str]:
    """Label keys pods select nodes by, and topology levels: kept on nodes."""
    keys: set[str] = set()
    for pod in objects.get("pods", []):
        spec = pod.get("spec") or {}
        keys.update((spec.get("nodeSelector") or {}).keys())
        terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        for t in terms:
            keys.update(str(e.get("key")) for e in t.get("matchExpressions") or [])
    for topo in objects.get("topologies", []):
        keys.update(str(level.get("nodeLabel")) for level in (topo.get("spec") or {}).get("levels") or [])
    return keys


def _strip(obj: JSON, selected: set[str]) -> JSON:
    m = dict(obj.get("metadata") or {})
    for field in ("labels", "annotations"):
        if field in m:
            m[field] = {k: v for k, v in m[field].items() if _keep(k, selected)}
    if "uid" in m:  # uids join pods to nothing the scheduler reads except themselves: hash them
        m["uid"] = hashlib.sha256(str(m["uid"]).encode()).hexdigest()[:32]
    if "ownerReferences" in m:
        m["ownerReferences"] = [{**r, "uid": hashlib.sha256(str(r.get("uid")).encode()).hexdigest()[:32]}
                                for r in m["ownerReferences"]]
    out = {**obj, "metadata": m}
    status = obj.get("status")
    if isinstance(status, dict) and status.get("conditions"):  # messages name other objects
        out["status"] = {**status, "conditions": [{k: v for k, v in c.items() if k != "message"}
                                                  for c in status["conditions"]]}
    return out


def _rename(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, names) for k, v in value.items()}
    return value
