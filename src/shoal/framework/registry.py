"""What a plugin and an action are, and the registry that names them.

A plugin is opened once per session: `open(ssn, arguments)` registers its hooks (ordering keys,
predicates, scorers, capacity checks, victim filters...) on `ssn.hooks`. An action runs once per
cycle on the session (`action(ssn)`) and changes it only through `Statement`s. A `Registry` maps
configuration names to them; `shoal.defaults.builtins()` composes shoal's own, and any registry
may hold actions that are not in the default action list (opt-in: a config names them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from shoal.framework.config import ConfigError, SchedulerConfig

if TYPE_CHECKING:
    from shoal.framework.session import Session


class PluginOpen(Protocol):
    """Register the plugin's hooks on the session; raise ValueError on a bad argument."""

    def __call__(self, ssn: Session, args: dict[str, str], /) -> None: ...


class Action(Protocol):
    """One action of the cycle (allocate, reclaim, ...): decisions only through statements."""

    def __call__(self, ssn: Session, /) -> None: ...


@dataclass(frozen=True, slots=True)
class Registry:
    """Plugins and actions by the names a configuration uses."""

    plugins: Mapping[str, PluginOpen]
    actions: Mapping[str, Action]

    def check(self, config: SchedulerConfig) -> None:
        """Raise ConfigError naming what `config` asks for that this registry does not have."""
        unknown = [a for a in config.actions if a not in self.actions]
        if unknown:
            raise ConfigError(f"actions: unknown action(s) {', '.join(unknown)}")
        for plugin in config.plugins:
            if plugin.name not in self.plugins:
                raise ConfigError(f"plugins: unknown plugin {plugin.name!r}")
