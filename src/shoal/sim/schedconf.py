"""Scheduler configuration files for the simulator: KAI's config (`config_from_dict`) plus a few
SchedulingShard-style shortcuts and the simulator-only settings.

Keys on top of KAI's (`actions`, `tiers`, `queueDepthPerAction`, ...):

* `placementStrategy: {gpu: binpack|spread, cpu: binpack|spread}` — sets `nodeplacement`'s
  arguments and swaps `gpupack`/`gpuspread` (under GPU spread also drops `gpusharingorder`, and under
  any spread consolidation, like KAI's operator);
* `kValue: 1.0` — the proportion plugin's kValue;
* `usageDBConfig: {usageParams: {halfLifePeriod: 1h, windowSize: 1w, windowType: sliding}}` —
  time-based fair share with KAI's defaults (1-week sliding window, no decay without a
  half-life): the simulator feeds decayed usage into the snapshot (`shoal.history.usage`);
* `simulator: {queueLimitsFromQuota: true}` — static partitioning: every queue's limit is set to
  its quota, so no queue borrows (a baseline for comparisons).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shoal.cycle import check_config
from shoal.framework.config import ConfigError, PluginConfig, SchedulerConfig, config_from_dict
from shoal.history.usage import UsageParams
from shoal.sim.errors import SimInputError
from shoal.sim.loaders.yamlio import load_docs, mapping

SIM_KEYS = ("placementStrategy", "kValue", "usageDBConfig", "simulator", "name")


@dataclass(frozen=True, slots=True)
class SimSchedulerConfig:
    """The core's config plus what the simulator does around it."""

    name: str = "default"
    core: SchedulerConfig = field(default_factory=SchedulerConfig)
    usage: UsageParams | None = None  # None = no time-based fair share
    limits_from_quota: bool = False


def _placement(core: SchedulerConfig, strategy: dict[str, Any], at: str) -> SchedulerConfig:
    gpu = str(strategy.get("gpu", "binpack"))
    cpu = str(strategy.get("cpu", "binpack"))
    for key, value in (("gpu", gpu), ("cpu", cpu)):
        if value not in ("binpack", "spread"):
            raise SimInputError(f"{at}: placementStrategy.{key}: expected binpack or spread, got {value!r}")
    plugins = []
    for p in core.plugins:
        if p.name in ("gpupack", "gpuspread"):
            p = PluginConfig("gpuspread" if gpu == "spread" else "gpupack")
        elif p.name == "gpusharingorder" and gpu == "spread":
            continue  # KAI's operator: gpupack + gpusharingorder iff GPU binpack, else gpuspread alone
        elif p.name == "nodeplacement":
            p = PluginConfig("nodeplacement", {"gpu": gpu, "cpu": cpu})
        plugins.append(p)
    actions = core.actions
    if "spread" in (gpu, cpu):
        actions = tuple(a for a in actions if a != "consolidation")
    return replace(core, plugins=tuple(plugins), actions=actions)


def config_from_mapping(data: dict[str, Any], source: str, name: str) -> SimSchedulerConfig:
    try:
        core = config_from_dict({k: v for k, v in data.items() if k not in SIM_KEYS}, source=source)
        check_config(core, source)
    except ConfigError as err:
        raise SimInputError(str(err)) from None
    if "placementStrategy" in data:
        core = _placement(core, mapping(data["placementStrategy"], source, "placementStrategy"), source)
    if "kValue" in data:
        plugins = tuple(
            PluginConfig(p.name, {**p.arguments, "kValue": str(data["kValue"])})
            if p.name == "proportion"
            else p
            for p in core.plugins
        )
        core = replace(core, plugins=plugins)
    usage_db = mapping(data.get("usageDBConfig"), source, "usageDBConfig")
    usage = None
    if usage_db:
        try:
            usage = UsageParams.from_kai(mapping(usage_db.get("usageParams"), source, "usageDBConfig.usageParams"))
        except ValueError as err:
            raise SimInputError(f"{source}: usageDBConfig.{err}") from None
    sim = mapping(data.get("simulator"), source, "simulator")
    unknown = set(sim) - {"queueLimitsFromQuota"}
    if unknown:
        raise SimInputError(f"{source}: simulator: unknown field(s) {', '.join(sorted(unknown))}")
    return SimSchedulerConfig(
        name=str(data.get("name") or name),
        core=core,
        usage=usage,
        limits_from_quota=bool(sim.get("queueLimitsFromQuota", False)),
    )


def load_config(path: Path) -> SimSchedulerConfig:
    if not path.is_file():
        raise SimInputError(f"{path}: no such file")
    docs = load_docs(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise SimInputError(f"{path}: expected one YAML mapping (a scheduler config)")
    return config_from_mapping(docs[0], str(path), path.stem)
