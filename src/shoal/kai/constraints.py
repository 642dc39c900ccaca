"""Pod spec placement constraints -> model constraints, with kube-scheduler's defaults.

Node affinity (required and preferred, every operator, `matchFields`), inter-pod affinity and
anti-affinity (namespaces defaulted to the pod's own, `matchLabelKeys` / `mismatchLabelKeys`
merged into the selector), topology spread constraints (defaults for `minDomains` and the node
inclusion policies, `matchLabelKeys` merged), host ports and tolerations. Pure; a label selector
with an unknown operator raises `ConvertError` (kube-scheduler refuses such a pod too).
"""

from __future__ import annotations

from typing import Any

from shoal.kai.objects import JSON
from shoal.kai.units import ConvertError
from shoal.model.constraints import (
    SELECTOR_OPS,
    HostPort,
    LabelSelector,
    NodeAffinity,
    NodeSelectorTerm,
    PodAffinity,
    PodAffinityTerm,
    Requirement,
    SpreadConstraint,
)
from shoal.model.pod import Toleration


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _requirement(expr: JSON) -> Requirement:
    return Requirement(str(expr.get("key", "")), str(expr.get("operator", "")),
                       tuple(str(v) for v in _list(expr.get("values"))))


def selector_from(obj: Any, where: str) -> LabelSelector | None:
    """metav1.LabelSelector -> LabelSelector; None for a missing selector (it matches nothing)."""
    if not isinstance(obj, dict):
        return None
    reqs = [Requirement(str(k), "In", (str(v),)) for k, v in sorted(_dict(obj.get("matchLabels")).items())]
    for expr in _list(obj.get("matchExpressions")):
        r = _requirement(_dict(expr))
        if r.op not in SELECTOR_OPS or not r.valid:
            raise ConvertError(f"{where}: label selector requirement {r.key} {r.op} {list(r.values)} is invalid")
        reqs.append(r)
    return LabelSelector(tuple(reqs))


def node_term_from(obj: JSON) -> NodeSelectorTerm:
    """A v1.NodeSelectorTerm (matchExpressions and matchFields)."""
    return NodeSelectorTerm(tuple(_requirement(_dict(e)) for e in _list(obj.get("matchExpressions"))),
                            tuple(_requirement(_dict(e)) for e in _list(obj.get("matchFields"))))


def node_affinity_from(spec: JSON) -> NodeAffinity | None:
    """spec.affinity.nodeAffinity -> NodeAffinity (empty terms dropped, zero weights ignored)."""
    na = _dict(_dict(spec.get("affinity")).get("nodeAffinity"))
    if not na:
        return None
    req_obj = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = None
    if isinstance(req_obj, dict):
        terms = (node_term_from(_dict(t)) for t in _list(req_obj.get("nodeSelectorTerms")))
        required = tuple(t for t in terms if not t.empty)
    preferred = []
    for p in _list(na.get("preferredDuringSchedulingIgnoredDuringExecution")):
        p = _dict(p)
        weight = int(p.get("weight") or 0)
        term = node_term_from(_dict(p.get("preference")))
        if weight and not term.empty:
            preferred.append((weight, term))
    if required is None and not preferred:
        return None
    return NodeAffinity(required, tuple(preferred))


def _pod_term(obj: JSON, namespace: str, labels: dict[str, str], where: str) -> PodAffinityTerm:
    selector = selector_from(obj.get("labelSelector"), where)
    if selector is not None:
        match = {k: labels[k] for k in _list(obj.get("matchLabelKeys")) if k in labels}
        mismatch = [Requirement(k, "NotIn", (labels[k],)) for k in _list(obj.get("mismatchLabelKeys")) if k in labels]
        if match:
            selector = selector.with_labels(match)
        if mismatch:
            selector = LabelSelector(selector.requirements + tuple(mismatch))
    names = frozenset(str(n) for n in _list(obj.get("namespaces")))
    ns_obj = obj.get("namespaceSelector")
    ns_selector = selector_from(ns_obj, where + ".namespaceSelector") if isinstance(ns_obj, dict) else None
    if not names and ns_selector is None:
        names = frozenset((namespace,))
    return PodAffinityTerm(selector, str(obj.get("topologyKey", "")), names, ns_selector)


def pod_affinity_from(spec: JSON, namespace: str, labels: dict[str, str]) -> PodAffinity | None:
    """spec.affinity.podAffinity / podAntiAffinity -> PodAffinity; None when the pod has no terms."""
    aff = _dict(spec.get("affinity"))
    out: dict[str, list[Any]] = {"required": [], "required_anti": [], "preferred": [], "preferred_anti": []}
    for kind, suffix in (("podAffinity", ""), ("podAntiAffinity", "_anti")):
        block = _dict(aff.get(kind))
        for t in _list(block.get("requiredDuringSchedulingIgnoredDuringExecution")):
            out["required" + suffix].append(_pod_term(_dict(t), namespace, labels, f"affinity.{kind}"))
        for w in _list(block.get("preferredDuringSchedulingIgnoredDuringExecution")):
            w = _dict(w)
            term = _pod_term(_dict(w.get("podAffinityTerm")), namespace, labels, f"affinity.{kind}")
            out["preferred" + suffix].append((int(w.get("weight") or 0), term))
    result = PodAffinity(*(tuple(out[k]) for k in ("required", "required_anti", "preferred", "preferred_anti")))
    return None if result.empty else result


def spread_from(spec: JSON, labels: dict[str, str]) -> tuple[SpreadConstraint, ...]:
    """spec.topologySpreadConstraints -> SpreadConstraints (kube-scheduler's defaults)."""
    out = []
    for c in _list(spec.get("topologySpreadConstraints")):
        c = _dict(c)
        selector = selector_from(c.get("labelSelector"), "topologySpreadConstraints")
        match = {k: labels[k] for k in _list(c.get("matchLabelKeys")) if k in labels}
        if match and selector is not None:  # a missing selector stays one (kube-scheduler's merge)
            selector = selector.with_labels(match)
        out.append(SpreadConstraint(
            max_skew=int(c.get("maxSkew") or 1), topology_key=str(c.get("topologyKey", "")),
            hard=c.get("whenUnsatisfiable", "DoNotSchedule") != "ScheduleAnyway", selector=selector,
            min_domains=int(c.get("minDomains") or 1),
            honor_node_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
            honor_node_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor"))
    return tuple(out)


def host_ports_from(spec: JSON) -> tuple[HostPort, ...]:
    """Host ports of the containers and of the restartable (sidecar) init containers."""
    containers = [c for c in _list(spec.get("initContainers")) if _dict(c).get("restartPolicy") == "Always"]
    containers += _list(spec.get("containers"))
    out = []
    for c in containers:
        for p in _list(_dict(c).get("ports")):
            p = _dict(p)
            port = int(p.get("hostPort") or 0)
            if port > 0:
                out.append(HostPort(str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), port))
    return tuple(out)


def tolerations_from(spec: JSON) -> list[Toleration]:
    out = []
    for t in _list(spec.get("tolerations")):
        t = _dict(t)
        seconds = t.get("tolerationSeconds")
        out.append(Toleration(str(t.get("key", "")), str(t.get("operator") or "Equal"), str(t.get("value", "")),
                              str(t.get("effect", "")), int(seconds) if seconds is not None else None))
    return out
