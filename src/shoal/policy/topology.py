"""Topology domain math (kai-spec §3.12), pure and vectorised over nodes.

A `TopologyTree` is built once per session from a `Topology` (levels top to bottom) and the
node labels: depth 0 is the single `root` domain, depth d >= 1 the domains of `levels[d-1]`,
whose id joins the label values of levels 1..d with "." (so rack `r1` under zone `z1` is
`z1.r1`). A node belongs to the topology only if it carries every level label.

The functions below answer the questions the topology plugin asks for one (sub)group: the
lowest common domain of a node set, free capacity per domain, how many copies of the group's
largest task every domain can hold, the fill ratio used for bin-packing, the candidate domains
in KAI's order and the preferred-level node scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from shoal.model.resources import CPU_COL, GPU_COL, MILLI, PODS_COL
from shoal.model.topology import Topology

ROOT = "root"
#: Ratio of a resource the group needs but the domain has none of (KAI's requiredResourceNotInDomainRatio).
MISSING_RATIO = 1000.0
#: Per preferred-level domain rank (KAI's scores.Topology).
TOPOLOGY_SCORE = 10_000.0


@dataclass(slots=True)
class TopologyTree:
    """Domains of one topology. Arrays are indexed [depth][domain] or [depth][node]."""

    name: str
    levels: tuple[str, ...]
    #: Node carries every level label.
    member: np.ndarray
    #: node_domain[d][i] = index of node i's domain at depth d, -1 outside the topology.
    node_domain: list[np.ndarray] = field(default_factory=list)
    #: ids[d][k] = id of domain k at depth d (sorted by id).
    ids: list[list[str]] = field(default_factory=list)
    #: parent[d][k] = index at depth d-1 of the parent of domain k at depth d (parent[0] = [-1]).
    parent: list[np.ndarray] = field(default_factory=list)
    #: Membership of every domain (all depths stacked, root first) as a [n_domains, n_nodes]
    #: float matrix, so the sums over all domains are one matrix product; offsets[d] = first row
    #: of depth d (offsets[-1] = number of domains).
    onehot: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    offsets: list[int] = field(default_factory=list)

    @property
    def depth(self) -> int:
        """Number of levels below the root."""
        return len(self.levels)

    def level_name(self, d: int) -> str:
        return ROOT if d == 0 else self.levels[d - 1]

    def depth_of(self, level: str) -> int | None:
        """Depth of a level label (0 for "root"), None if the topology has no such level."""
        if level == ROOT:
            return 0
        try:
            return self.levels.index(level) + 1
        except ValueError:
            return None

    def domain_mask(self, d: int, k: int) -> np.ndarray:
        """Nodes of domain k at depth d."""
        return np.asarray(self.node_domain[d] == k)


def build_tree(topology: Topology, labels: list[dict[str, str]]) -> TopologyTree:
    """The domains of `topology` over nodes with these labels (nodes in session order)."""
    n = len(labels)
    member = np.array([all(lv in lb for lv in topology.levels) for lb in labels], dtype=bool)
    tree = TopologyTree(topology.name, tuple(topology.levels), member)
    tree.node_domain.append(np.where(member, 0, -1).astype(np.int64))
    tree.ids.append([ROOT])
    tree.parent.append(np.array([-1], dtype=np.int64))
    paths: list[str] = [""] * n
    for d, level in enumerate(topology.levels, start=1):
        for i in range(n):
            if member[i]:
                value = labels[i][level]
                paths[i] = value if d == 1 else f"{paths[i]}.{value}"
        ids = sorted({paths[i] for i in range(n) if member[i]})
        index = {dom: k for k, dom in enumerate(ids)}
        node_dom = np.full(n, -1, dtype=np.int64)
        parent = np.zeros(len(ids), dtype=np.int64)
        up = tree.node_domain[d - 1]
        for i in range(n):
            if member[i]:
                k = index[paths[i]]
                node_dom[i] = k
                parent[k] = up[i]
        tree.node_domain.append(node_dom)
        tree.ids.append(ids)
        tree.parent.append(parent)
    tree.offsets = [0]
    for d in range(tree.depth + 1):
        tree.offsets.append(tree.offsets[-1] + len(tree.ids[d]))
    tree.onehot = np.zeros((tree.offsets[-1], n))
    for d in range(tree.depth + 1):
        rows = tree.node_domain[d]
        cols = np.flatnonzero(rows >= 0)
        tree.onehot[tree.offsets[d] + rows[cols], cols] = 1.0
    return tree


def lowest_common_domain(tree: TopologyTree, node_set: np.ndarray, preferred_level: str) -> tuple[int, int]:
    """(depth, index) of the lowest domain holding every topology node of `node_set`; the walk
    stops at the preferred level (nothing below it is ever looked at). Root when none."""
    valid = node_set & tree.member
    stop = tree.depth_of(preferred_level) if preferred_level else None
    best = (0, 0)
    if not valid.any():
        return best
    for d in range(1, tree.depth + 1):
        doms = tree.node_domain[d][valid]
        first = int(doms[0])
        if first != int(doms.min()) or first != int(doms.max()):
            break
        best = (d, first)
        if stop is not None and d == stop:
            break
    return best


def in_subtree(tree: TopologyTree, top: tuple[int, int]) -> list[np.ndarray]:
    """Per depth, a boolean mask of the domains inside the subtree of domain `top` (depth, index)."""
    d0, k0 = top
    out: list[np.ndarray] = []
    for d in range(tree.depth + 1):
        n_dom = len(tree.ids[d])
        if d < d0:
            out.append(np.zeros(n_dom, dtype=bool))
        elif d == d0:
            m = np.zeros(n_dom, dtype=bool)
            m[k0] = True
            out.append(m)
        else:
            out.append(out[d - 1][tree.parent[d]])
    return out


def domain_sums(tree: TopologyTree, per_node: np.ndarray) -> list[np.ndarray]:
    """Per depth, the sum of `per_node` rows ([n_nodes] or [n_nodes, R]) over each domain's nodes
    (float64; exact for integer amounts below 2^53)."""
    total = tree.onehot @ per_node.astype(np.float64)
    o = tree.offsets
    return [total[o[d]:o[d + 1]] for d in range(tree.depth + 1)]


def node_accommodation(free: np.ndarray, max_req: np.ndarray, n_tasks: int) -> np.ndarray:
    """Per node, how many copies of the largest task fit what is free (idle + releasing),
    capped at the number of tasks; a task asking for nothing but a pod slot fits `n_tasks`."""
    need = max_req.copy()
    need_wo_pods = need.copy()
    need_wo_pods[PODS_COL] = 0
    n = free.shape[0]
    if not need_wo_pods.any() and need[PODS_COL] <= 1:
        return np.full(n, n_tasks, dtype=np.int64)
    cols = np.flatnonzero(need > 0)
    copies = free[:, cols] // need[cols]
    out = copies.min(axis=1)
    return np.asarray(np.clip(out, 0, n_tasks), dtype=np.int64)


def quantity_value(vec: np.ndarray) -> np.ndarray:
    """Resource amounts as KAI's `Quantity.Value()` sees them: CPU rounded up to whole cores,
    GPU in devices (fractions kept), the rest as is. Works on [R] and [k, R] arrays."""
    out = vec.astype(np.float64)
    out[..., CPU_COL] = np.ceil(out[..., CPU_COL] / MILLI)
    out[..., GPU_COL] = out[..., GPU_COL] / MILLI
    return out


def fill_ratio(request: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Dominant share of each domain's free resources the group would take ([k, R] free).
    > 1 means it cannot fit; higher = fuller afterwards (bin-packing prefers it)."""
    req = quantity_value(request)
    have = quantity_value(free)
    req[PODS_COL] = 0
    cols = np.flatnonzero(req > 0)
    if len(cols) == 0:
        return np.zeros(free.shape[0])
    f = have[:, cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(f > 0, req[cols] / np.where(f > 0, f, 1.0), MISSING_RATIO)
    return np.asarray(r.max(axis=1), dtype=np.float64)


def relevant_depths(tree: TopologyTree, required: str, preferred: str) -> list[int] | str:
    """Candidate depths from the preferred (else required) level up to the required level
    (else the root), bottom first; or an error text when a level is not in the topology."""
    for kind, level in (("required", required), ("preferred", preferred)):
        if level and tree.depth_of(level) is None:
            return (f"the topology {tree.name} has no level {level!r} named as the {kind} level")
    if not required and not preferred:
        return f"no topology levels given for topology {tree.name}"
    start = tree.depth_of(preferred or required)
    stop = tree.depth_of(required) if required else 0
    assert start is not None and stop is not None
    if preferred and required and stop > start:
        start = stop  # preferred above required: only the required level is relevant
    return list(range(start, stop - 1, -1))


def sort_keys(tree: TopologyTree, top: tuple[int, int], ratios: list[np.ndarray], max_depth: int
              ) -> list[list[tuple[float, str]]]:
    """Per depth, each domain's position key in the sorted tree below `top`: children ordered by
    ratio descending (fuller first), then id; a domain's key is its parent's key + its own.
    Only depths top+1..max_depth+1 are sorted (like KAI's sortTree); others keep id order."""
    d0, _ = top
    keys: list[list[tuple[float, str]]] = []
    for d in range(tree.depth + 1):
        if d <= d0 or d > max_depth + 1:
            keys.append([(0.0, dom) for dom in tree.ids[d]])
        else:
            keys.append([(-float(ratios[d][k]), dom) for k, dom in enumerate(tree.ids[d])])
    return keys


def path_key(tree: TopologyTree, keys: list[list[tuple[float, str]]], d: int, k: int, d0: int
             ) -> tuple[tuple[float, str], ...]:
    """The sort path of domain (d, k) below depth d0 (BFS order within one depth)."""
    out: list[tuple[float, str]] = []
    while d > d0:
        out.append(keys[d][k])
        k = int(tree.parent[d][k])
        d -= 1
    return tuple(reversed(out))


def preferred_scores(tree: TopologyTree, top: tuple[int, int], keys: list[list[tuple[float, str]]],
                     preferred_depth: int) -> np.ndarray:
    """Node scores `floor(10 (i+1) / N) * 10^4` for the i-th of the N preferred-level domains
    under `top` in sorted order (emptier domains come later and score higher); 0 elsewhere."""
    d0, _ = top
    inside = in_subtree(tree, top)[preferred_depth]
    doms = [int(k) for k in np.flatnonzero(inside)]
    doms.sort(key=lambda k: path_key(tree, keys, preferred_depth, k, d0))
    n_nodes = len(tree.member)
    score_of = np.zeros(len(tree.ids[preferred_depth]))
    total = len(doms)
    for i, k in enumerate(doms):
        score_of[k] = math.floor((i + 1) / total * 10) * TOPOLOGY_SCORE
    node_dom = tree.node_domain[preferred_depth]
    out = np.zeros(n_nodes)
    has = node_dom >= 0
    out[has] = score_of[node_dom[has]]
    return out
