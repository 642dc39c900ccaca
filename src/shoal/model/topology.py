"""Topology (KAI `kai.scheduler/v1alpha1`): ordered node-label levels, top to bottom."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """Placement constraint of a job or pod set: the topology and its required/preferred level label."""

    topology: str
    required_level: str = ""
    preferred_level: str = ""
