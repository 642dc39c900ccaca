"""Typed scheduler configuration with KAI's defaults (kai-spec §9.1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
DEFAULT_PLUGINS: tuple[tuple[str, dict[str, str]], ...] = (
    ("predicates", {}),
    ("proportion", {}),
    ("priority", {}),
    ("elastic", {}),
    ("kubeflow", {}),
    ("ray", {}),
    ("nodeavailability", {}),
    ("gpusharingorder", {}),
    ("gpupack", {}),
    ("resourcetype", {}),
    ("podaffinity", {}),
    ("subgrouporder", {}),
    ("taskorder", {}),
    ("nominatednode", {}),
    ("dynamicresources", {}),
    ("nodeplacement", {"cpu": "binpack", "gpu": "binpack"}),
    ("minruntime", {}),
    ("topology", {}),
    ("snapshot", {}),
)


class ConfigError(ValueError):
    """A scheduler configuration that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class PluginConfig:
    name: str
    arguments: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Which actions run, which plugins are on (in order) and the scheduler-wide options."""

    actions: tuple[str, ...] = DEFAULT_ACTIONS
    plugins: tuple[PluginConfig, ...] = tuple(PluginConfig(n, dict(a)) for n, a in DEFAULT_PLUGINS)
    #: Seconds a gang may stay below its minimum before it is evicted; < 0 = never.
    staleness_grace_seconds: float = 60.0
    #: Max victims of one consolidation; -1 = unlimited, 0 disables consolidation.
    max_consolidation_preemptees: int = 16
    allow_consolidating_reclaim: bool = True
    #: Per-action cap on the number of jobs tried per queue (KAI `queueDepthPerAction`).
    queue_depth_per_action: dict[str, int] = field(default_factory=dict)
    #: KAI `usageDBConfig` as written (`clientType`, `connectionString`, `usageParams`): time-based
    #: fair share in the live service (read by the adapter, `shoal.kube.usage_feed`); None = off.
    usage_db: dict[str, Any] | None = None

    def plugin(self, name: str) -> PluginConfig | None:
        for p in self.plugins:
            if p.name == name:
                return p
        return None

    def has_plugin(self, name: str) -> bool:
        return self.plugin(name) is not None


def config_from_dict(data: dict[str, Any], *, source: str = "config") -> SchedulerConfig:
    """Build a config from a KAI-style dict (`actions: "a, b"`, `tiers[].plugins[]`, options)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    kwargs: dict[str, Any] = {}
    actions = data.get("actions")
    if actions is not None:
        if isinstance(actions, str):
            names = tuple(a.strip() for a in actions.split(",") if a.strip())
        elif isinstance(actions, list):
            names = tuple(str(a) for a in actions)
        else:
            raise ConfigError(f"{source}: actions: expected a comma-separated string or a list")
        # Any name: an opt-in action is not in the default list. Whether the scheduler has it is
        # checked against its registry (`Registry.check`, when a session opens).
        kwargs["actions"] = names
    tiers = data.get("tiers")
    if tiers:
        plugins: list[PluginConfig] = []
        for ti, tier in enumerate(tiers):
            for pi, p in enumerate((tier or {}).get("plugins") or []):
                if not isinstance(p, dict) or not isinstance(p.get("name"), str):
                    raise ConfigError(f"{source}: tiers[{ti}].plugins[{pi}].name: missing or not a string")
                args = p.get("arguments") or {}
                if not isinstance(args, dict):
                    raise ConfigError(f"{source}: tiers[{ti}].plugins[{pi}].arguments: expected a mapping")
                plugins.append(PluginConfig(p["name"], {str(k): str(v) for k, v in args.items()}))
        kwargs["plugins"] = tuple(plugins)
    for key, attr, typ in (
        ("stalenessGracePeriodSeconds", "staleness_grace_seconds", float),
        ("maxConsolidationPreemptees", "max_consolidation_preemptees", int),
        ("allowConsolidatingReclaim", "allow_consolidating_reclaim", bool),
    ):
        if key in data:
            try:
                kwargs[attr] = typ(data[key])
            except (TypeError, ValueError):
                raise ConfigError(f"{source}: {key}: expected {typ.__name__}, got {data[key]!r}") from None
    if "queueDepthPerAction" in data:
        qd = data["queueDepthPerAction"]
        if not isinstance(qd, dict):
            raise ConfigError(f"{source}: queueDepthPerAction: expected a mapping")
        kwargs["queue_depth_per_action"] = {str(k): int(v) for k, v in qd.items()}
    if data.get("usageDBConfig") is not None:
        if not isinstance(data["usageDBConfig"], dict):
            raise ConfigError(f"{source}: usageDBConfig: expected a mapping")
        kwargs["usage_db"] = dict(data["usageDBConfig"])
    return SchedulerConfig(**kwargs)
