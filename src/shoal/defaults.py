"""The built-in plugins and actions, composed by name (the registry is built here, not global).

To add a plugin or an action: one module under `shoal.plugins` / `shoal.actions`, one line in
`plugin_registry()` / `action_registry()`. An action not in `DEFAULT_ACTIONS` is opt-in: it runs
only where a configuration names it."""

from __future__ import annotations

from shoal.actions import allocate, consolidation, preempt, reclaim, stalegangeviction
from shoal.framework.registry import Action, PluginOpen, Registry
from shoal.framework.session import Session
from shoal.plugins import (
    dynamicresources,
    fragaware,
    minruntime,
    ordering,
    podaffinity,
    predicates,
    proportion,
    scoring,
    topology,
)


def _noop(ssn: Session, args: dict[str, str]) -> None:
    """Plugins KAI has that shoal folds into the core or does not need (snapshot, subgrouporder...)."""


def plugin_registry() -> dict[str, PluginOpen]:
    return {
        "predicates": predicates.open_predicates,
        "proportion": proportion.open_proportion,
        "priority": ordering.open_priority,
        "elastic": ordering.open_elastic,
        "kubeflow": ordering.open_kubeflow,
        "ray": ordering.open_ray,
        "taskorder": ordering.open_taskorder,
        "nodeavailability": scoring.open_nodeavailability,
        "gpusharingorder": scoring.open_gpusharingorder,
        "gpupack": scoring.open_gpupack,
        "gpuspread": scoring.open_gpuspread,
        "resourcetype": scoring.open_resourcetype,
        "nodeplacement": scoring.open_nodeplacement,
        "fragaware": fragaware.open_fragaware,
        "nominatednode": scoring.open_nominatednode,
        # Pod-set order is built into the allocation (shoal.actions.common.job_allocation.pod_set_order).
        "subgrouporder": _noop,
        "dynamicresources": dynamicresources.open_dynamicresources,
        "minruntime": minruntime.open_minruntime,
        "topology": topology.open_topology,
        "snapshot": _noop,
        "podaffinity": podaffinity.open_podaffinity,
    }


def action_registry() -> dict[str, Action]:
    return {
        "allocate": allocate.run,
        "consolidation": consolidation.run,
        "reclaim": reclaim.run,
        "preempt": preempt.run,
        "stalegangeviction": stalegangeviction.run,
    }


def builtins() -> Registry:
    """shoal's plugins and actions, built fresh (callers may extend their own copy)."""
    return Registry(plugin_registry(), action_registry())
