"""Time-based fair share in the live service: queue usage measured from the scheduler's own view.

Contract: with `usageDBConfig` in the scheduler config (KAI's key: `usageParams` with
`windowSize`, `windowType`, `halfLifePeriod`; `kValue` stays a proportion argument),
`UsageFeed.fill(snapshot)` records what each queue holds in the snapshot (`allocation_sample`:
its pods' GPU/CPU/memory, departments included, against the ready nodes' capacity, in which pods
of other schedulers, in no queue, count as in KAI's `kube_node_status_capacity`) into the same
`UsageHistory` the simulator uses, and sets `snapshot.usage`. Records closer together than
`resolution` seconds are coalesced (the allocation then holds from the earlier one), which bounds
the records kept in the window to about window / resolution.

Persistence: the leader writes the history, compacted to at most 512 records and gzipped, to
ConfigMap `<lease name>-usage` in the lease's namespace every `persist_seconds` (default 60 s:
one small write a minute whatever the cluster's size; a ConfigMap rather than Queue status
because the history is one object per scheduler, not per queue, and a Lease is renewed every
two seconds by the elector). A new leader, and a restarted one, `load`s it before its first
cycle, so a turn in progress carries on; between the last write and the takeover the
allocation is taken to have held (nobody scheduled meanwhile). A state written with other
usage parameters is ignored (logged).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict
from typing import Any

from shoal.history.usage import UsageHistory, UsageParams, allocation_sample
from shoal.kube.client import KubeClient
from shoal.kube.prometheus_usage import PromConfig
from shoal.kube.state_configmap import read_state, write_state
from shoal.model.snapshot import ClusterSnapshot

logger = logging.getLogger(__name__)

KEY = "usage.json.gz"
FORMAT = 1


def usage_params(usage_db: dict[str, Any] | None) -> UsageParams | None:
    """KAI's `usageDBConfig` -> parameters (None = time-based fair share off). Raises ValueError."""
    if usage_db is None:
        return None
    raw = usage_db.get("usageParams") or {}
    if not isinstance(raw, dict):
        raise ValueError("usageDBConfig.usageParams: expected a mapping")
    return UsageParams.from_kai(raw)


def usage_settings(usage_db: dict[str, Any] | None) -> UsageParams | PromConfig | None:
    """Where usage comes from: None = time-based fair share off; `PromConfig` with KAI's
    `clientType: prometheus` (shoal.kube.prometheus_usage); else the parameters of shoal's own
    view (any other `clientType`, or none). Raises ValueError naming the field."""
    params = usage_params(usage_db)
    if params is None or usage_db is None or str(usage_db.get("clientType") or "") != "prometheus":
        return params
    return PromConfig.from_kai(usage_db, params)


def _params_key(params: UsageParams) -> dict[str, Any]:
    d = asdict(params)
    d["window"] = None if math.isinf(params.window) else params.window
    return d


class UsageFeed:
    """One scheduler's usage history, its persistence and its coalescing of records."""

    def __init__(self, client: KubeClient, params: UsageParams, namespace: str, name: str, *,
                 persist_seconds: float = 60.0, resolution: float | None = None) -> None:
        self.client = client
        self.params = params
        self.namespace, self.name = namespace, name
        self.persist_seconds = persist_seconds
        window = params.window if math.isfinite(params.window) else 7 * 86400.0
        self.resolution = min(60.0, window / 1024) if resolution is None else resolution
        self.history = UsageHistory(params)
        self._last: tuple[Any, Any] | None = None
        self._recorded_at = -math.inf
        self._persisted_at = -math.inf
        self.writes = 0

    @property
    def settings(self) -> UsageParams:
        return self.params

    def fill(self, snapshot: ClusterSnapshot) -> None:
        """Record the snapshot's allocation (if it changed, at most once per `resolution`) and set
        `snapshot.usage` from the history at `snapshot.now`."""
        now = snapshot.now
        if now < self.history.t:
            now = self.history.t  # a wall clock that stepped back: hold the last time
        sample = allocation_sample(snapshot)
        if sample != self._last and now - self._recorded_at >= self.resolution:
            self.history.record(now, *sample)
            self._last, self._recorded_at = sample, now
        snapshot.usage = self.history.usage(now)

    async def load(self) -> bool:
        """Take over the persisted history if there is one for these parameters. True if taken."""
        doc = await read_state(self.client, self.namespace, self.name, KEY)
        if doc is None:
            return False
        try:
            if doc.get("format") != FORMAT or doc.get("params") != _params_key(self.params):
                logger.info("usage ConfigMap %s/%s was written with other parameters: starting afresh",
                            self.namespace, self.name)
                return False
            self.history = UsageHistory.restore(self.params, doc["state"])
        except (KeyError, TypeError, ValueError) as e:
            logger.warning("usage ConfigMap %s/%s unreadable (%s): starting afresh", self.namespace, self.name, e)
            return False
        self._last, self._recorded_at = None, -math.inf
        logger.info("usage history taken over from ConfigMap %s/%s (last record at %.0f)",
                    self.namespace, self.name, self.history.t)
        return True

    async def persist(self, now: float, *, force: bool = False) -> None:
        """Write the history if `persist_seconds` passed since the last write (or `force`)."""
        if not force and now - self._persisted_at < self.persist_seconds:
            return
        doc = {"format": FORMAT, "params": _params_key(self.params), "state": self.history.export()}
        if not await write_state(self.client, self.namespace, self.name, KEY, doc):
            return
        self._persisted_at = now
        self.writes += 1
