"""Placement constraints of a pod spec, with kube-scheduler's meaning: selectors, node affinity,
inter-pod (anti-)affinity terms, topology spread constraints and host ports.

All types are frozen (hashable), so equal constraints share caches. Matching a single label set
is defined here (`Requirement.matches`, `LabelSelector.matches`); the vectorised versions over
many nodes or pods live in `shoal.framework.labelindex` and must agree with these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Operators of label selectors; node selectors add Gt and Lt.
SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPS = (*SELECTOR_OPS, "Gt", "Lt")
_INT = re.compile(r"[+-]?[0-9]+\Z")
_INT64 = 1 << 63


def parse_int64(value: str | None) -> int | None:
    """Go's strconv.ParseInt(value, 10, 64): an optional sign and decimal digits, in int64 range."""
    if value is None or not _INT.match(value):
        return None
    n = int(value)
    return n if -_INT64 <= n < _INT64 else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key op values` requirement (labels.Requirement). An invalid one (unknown operator, Gt
    with a non-integer) never matches, as kube-scheduler treats a term it cannot parse."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        if self.op in ("In", "NotIn"):
            return len(self.values) > 0
        if self.op in ("Exists", "DoesNotExist"):
            return not self.values
        if self.op in ("Gt", "Lt"):
            return len(self.values) == 1 and parse_int64(self.values[0]) is not None
        return False

    def matches(self, labels: dict[str, str]) -> bool:
        v = labels.get(self.key)
        op = self.op
        if op == "In":
            return v is not None and v in self.values
        if op == "NotIn":
            return v is None or v not in self.values
        if op == "Exists":
            return v is not None
        if op == "DoesNotExist":
            return v is None
        if op in ("Gt", "Lt") and self.valid:
            n = parse_int64(v)
            bound = int(self.values[0])
            return n is not None and (n > bound if op == "Gt" else n < bound)
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector: AND of requirements (matchLabels become `In`). Empty = everything;
    a missing selector is `None` where it occurs (and matches nothing)."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def with_labels(self, pairs: dict[str, str]) -> LabelSelector:
        """This selector AND `key In (value)` for each pair (matchLabelKeys merged in)."""
        extra = tuple(Requirement(k, "In", (v,)) for k, v in sorted(pairs.items()))
        return LabelSelector(extra + self.requirements)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A node selector term: AND of label requirements and of `metadata.name` field requirements."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.expressions and not self.fields

    @property
    def valid(self) -> bool:
        return (all(r.valid for r in self.expressions)
                and all(r.op in ("In", "NotIn") and len(r.values) == 1 for r in self.fields))

    def matches(self, name: str, labels: dict[str, str]) -> bool:
        if not self.valid:
            return False
        fields = {"metadata.name": name} if name else {}
        return (all(r.matches(labels) for r in self.expressions)
                and all(r.matches(fields) for r in self.fields))


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """Required (OR of terms; None = no requirement) and preferred (weight, term) node affinity.
    Empty terms are dropped when decoded, as kube-scheduler does; `required=()` matches no node."""

    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()

    def required_matches(self, name: str, labels: dict[str, str]) -> bool:
        return self.required is None or any(t.matches(name, labels) for t in self.required)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A pod (anti-)affinity term. A pod P matches it iff P's namespace is in `namespaces` or its
    namespace's labels match `namespace_selector`, and `selector` matches P's labels (a None
    selector matches no pod). Decoding fills `namespaces` with the owner's namespace when both
    are unset, and merges `matchLabelKeys` / `mismatchLabelKeys` into `selector`."""

    selector: LabelSelector | None
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None

    def matches(self, namespace: str, labels: dict[str, str], ns_labels: dict[str, str] | None) -> bool:
        if self.selector is None:
            return False
        in_ns = namespace in self.namespaces or (
            self.namespace_selector is not None and self.namespace_selector.matches(ns_labels or {}))
        return in_ns and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """The four kinds of inter-pod terms of a pod (preferred ones with their weights)."""

    required: tuple[PodAffinityTerm, ...] = ()
    required_anti: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[tuple[int, PodAffinityTerm], ...] = ()
    preferred_anti: tuple[tuple[int, PodAffinityTerm], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.required or self.required_anti or self.preferred or self.preferred_anti)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topologySpreadConstraint, decoded (defaults applied, matchLabelKeys merged into `selector`)."""

    max_skew: int
    topology_key: str
    hard: bool  # DoNotSchedule (filter) vs ScheduleAnyway (score)
    selector: LabelSelector | None
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_node_taints: bool = False


@dataclass(frozen=True, slots=True)
class HostPort:
    """A host port a container binds: (IP, protocol, port); IP "" is normalised to 0.0.0.0."""

    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """kube-scheduler's HostPortInfo.CheckConflict for two ports."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip)
