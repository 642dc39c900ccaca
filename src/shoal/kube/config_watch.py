"""Live scheduler configuration: KAI's config format read from a ConfigMap and reloaded on change.

Contract: :class:`ConfigMapSource` watches one ConfigMap (an informer narrowed to
`metadata.name=<name>` in one namespace, which is what RBAC `resourceNames` permits) and calls
`on_config` with a new :class:`SchedulerConfig` each time the config key's text changes and parses.
A text that does not parse, or names an unknown action or plugin, is refused with a warning and the
running config stays in force; a deleted ConfigMap also leaves it in force. `synced` is set once the
first list has been seen (found or not), so the service can start with the right config.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import yaml

from shoal.cycle import open_session
from shoal.framework.config import ConfigError, SchedulerConfig, config_from_dict
from shoal.kube.client import CONFIGMAPS, JSON, KubeClient
from shoal.kube.informer import Informer
from shoal.model.snapshot import ClusterSnapshot

logger = logging.getLogger(__name__)

DEFAULT_KEY = "config.yaml"


def config_from_yaml(text: str, source: str) -> SchedulerConfig:
    """Parse KAI-format YAML and check it by opening a session on an empty cluster, so that an unknown
    plugin or action fails here (at start-up or reload) and never inside a cycle. Raises ConfigError."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not YAML: {e}") from None
    config = config_from_dict(data, source=source)
    try:
        open_session(ClusterSnapshot(now=0.0), config)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    return config


def parse_configmap_ref(ref: str, default_namespace: str) -> tuple[str, str]:
    """`NAMESPACE/NAME` or `NAME` (in `default_namespace`) -> (namespace, name)."""
    ns, _, name = ref.rpartition("/")
    if not name:
        raise ValueError(f"not a ConfigMap reference: {ref!r} (want NAME or NAMESPACE/NAME)")
    return ns or default_namespace, name


class ConfigMapSource:
    """The scheduler config kept in `data[key]` of ConfigMap `namespace/name`."""

    def __init__(self, client: KubeClient, namespace: str, name: str, on_config: Callable[[SchedulerConfig], None],
                 *, key: str = DEFAULT_KEY) -> None:
        self.namespace = namespace
        self.name = name
        self.key = key
        self.on_config = on_config
        self.informer = Informer(client, CONFIGMAPS, self._on_event, namespace=namespace,
                                 field_selector=f"metadata.name={name}")
        self.synced = self.informer.synced
        self.reloads = 0
        self.rejected = 0
        self._text: str | None = None

    @property
    def source(self) -> str:
        return f"configmap {self.namespace}/{self.name} key {self.key}"

    async def run(self) -> None:
        await self.informer.run()

    def _on_event(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if new is None:
            logger.warning("%s was deleted; the running config stays in force", self.source)
            return
        text = (new.get("data") or {}).get(self.key)
        if text is None:
            logger.warning("%s: no key %r; the running config stays in force", self.source, self.key)
            return
        if text == self._text:
            return
        self.apply_text(text)

    def apply_text(self, text: str) -> bool:
        """Parse and hand over a new config text; False (and a warning) when it is refused."""
        try:
            config = config_from_yaml(text, self.source)
        except ConfigError as e:
            self.rejected += 1
            logger.warning("config refused, the running config stays in force: %s", e)
            return False
        self._text = text
        self.reloads += 1
        logger.warning("config loaded from %s (load %d): actions %s; plugins %s", self.source, self.reloads,
                       ", ".join(config.actions), ", ".join(_plugin_text(p.name, p.arguments)
                                                            for p in config.plugins))
        self.on_config(config)
        return True


def _plugin_text(name: str, arguments: dict[str, str]) -> str:
    if not arguments:
        return name
    return f"{name}({', '.join(f'{k}={v}' for k, v in sorted(arguments.items()))})"
