"""Does KAI's own node accounting add up at the end of a decided scenario?

kai-oracle's `run --node-resources --all-tasks` writes, beside KAI's decisions, every node's idle
and releasing GPUs as KAI's session holds them at the end. In KAI's accounting a node's idle plus
releasing GPUs is its GPUs minus what the pods that hold it take: releasing pods give theirs
back, and a pipelined pod takes its GPUs out of releasing (which may go below zero). So, from the
final placements alone,

    idle + releasing == GPUs - whole GPUs of the pods holding the node - devices their shares occupy

where the pods holding the node are those Running, Pipelined, Allocated, Bound or Binding on it,
and the devices occupied by GPU shares lie between the shares' total rounded up and their number
of devices (at most the devices the whole-GPU pods leave). A node whose figures fall outside that
range was left with an accounting its own placements cannot give: a KAI bookkeeping artefact
(docs/reclaim.md, "KAI artefacts"), on which KAI's later choices in the session were made. Nodes
with MIG or DRA GPUs are not judged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from shoal.conformance.loader import Scenario, build_snapshot
from shoal.model.resources import MILLI
from shoal.model.status import ACTIVE_ALLOCATED_SET, PodStatus


@dataclass(frozen=True, slots=True)
class Break:
    """A node whose final idle + releasing GPUs its final pods cannot give."""

    node: str
    gpus: int
    idle: float
    releasing: float
    #: The range of idle + releasing that the pods holding the node allow.
    low: float
    high: float
    #: The pods holding the node at the end (KAI's decisions).
    pods: tuple[str, ...]

    @property
    def gap(self) -> float:
        """How far KAI's idle + releasing lies outside the allowed range (GPUs)."""
        free = self.idle + self.releasing
        return self.low - free if free < self.low else free - self.high

    def describe(self) -> str:
        allowed = f"{self.high:g}" if self.low == self.high else f"{self.low:g} to {self.high:g}"
        return (f"{self.node} ({self.gpus} GPUs): KAI ends with idle {self.idle:g}, releasing "
                f"{self.releasing:g}; its {len(self.pods)} pods there leave {allowed} free")


def node_accounting_breaks(sc: Scenario) -> list[Break]:
    """The nodes of a KAI-decided scenario (`expected.tasks` for every task and
    `expected.nodes_resources`, i.e. decided with `--all-tasks --node-resources`) whose final
    accounting breaks the rule above, largest gap first (ties: node name). A ValueError names
    what the scenario lacks."""
    expected = sc.data.get("expected") or {}
    resources = expected.get("nodes_resources")
    tasks = expected.get("tasks")
    if not resources or tasks is None:
        raise ValueError(f"{sc.id}: expected.nodes_resources and expected.tasks are needed "
                         "(decide it with kai-oracle run --all-tasks --node-resources)")
    snap = build_snapshot(sc)
    gpus = {n.name: int(n.allocatable.get("nvidia.com/gpu", 0)) for n in snap.nodes}
    unjudged = {n.name for n in snap.nodes if any("mig-" in k for k in n.allocatable)}
    whole: dict[str, int] = defaultdict(int)
    share_low: dict[str, float] = defaultdict(float)  # summed portions (devices x portion)
    share_high: dict[str, int] = defaultdict(int)  # devices the shares ask for
    holders: dict[str, list[str]] = defaultdict(list)
    for pod in snap.pods:
        final = tasks.get(pod.uid) or {}
        holds = "status" in final and PodStatus.parse(final["status"]) in ACTIVE_ALLOCATED_SET
        node = final.get("node_name")
        if "status" not in final or (holds and node is None):
            raise ValueError(f"{sc.id}: expected.tasks.{pod.uid} lacks its final status or node (KAI's runs "
                             "varied on it, or it was decided without --all-tasks): decide it with --repeat 1")
        if not node or not holds:
            continue
        holders[node].append(pod.uid)
        if pod.mig or pod.dra_gpus:
            unjudged.add(node)
        elif pod.gpu.whole:
            whole[node] += pod.gpu.whole
        elif pod.gpu.is_shared:
            share_low[node] += pod.gpu.portion_milli * pod.gpu.devices / MILLI
            share_high[node] += pod.gpu.devices
    breaks = []
    for node, got in sorted(resources.items()):
        if node in unjudged or node not in gpus:
            continue
        idle, releasing = float(got.get("idle_gpus", 0)), float(got.get("releasing_gpus", 0))
        high = gpus[node] - whole[node] - math.ceil(share_low[node] - 1e-9)
        # Shares on more devices than the node has left share devices: no fewer than 0 free.
        low = max(gpus[node] - whole[node] - share_high[node], min(high, 0))
        free = idle + releasing
        if free < low - 1e-9 or free > high + 1e-9:
            breaks.append(Break(node, gpus[node], idle, releasing, low, high, tuple(sorted(holders[node]))))
    breaks.sort(key=lambda b: (-b.gap, b.node))
    return breaks


def broken_nodes_touched(breaks: list[Break], differing: dict[str, tuple[Any, Any]]) -> list[str]:
    """The broken nodes among those where a differing task ends up in KAI's or shoal's decisions
    (`differing`: task uid -> (KAI's node, shoal's node)), in `breaks` order."""
    touched = {n for pair in differing.values() for n in pair if n}
    return [b.node for b in breaks if b.node in touched]
