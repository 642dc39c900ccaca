"""The start-time forecast's learned run times, kept across restarts and leader changes.

Contract: every replica learns run times from the pods it sees succeed (`VisibilityService.on_pod`),
so a standby that takes over has learned what it saw meanwhile; what a *restarted* scheduler (a
`helm upgrade`, a crash, a rollout) saw before is kept in the ConfigMap `<scheduler-name>-runtimes`
(key `runtimes.json.gz`, `RuntimeEstimator.export`: at most `window` (500) run times per owner kind
and queue, about 1.5 kB gzipped each). The leader writes it when something was learned since its
last write, at most every `persist_seconds` (default 5 min); each replica `load`s it once at
start-up, before its first forecast, and keeps the samples it learned meanwhile after the restored
ones. A document of another format is ignored (logged).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from shoal.kube.client import KubeClient
from shoal.kube.state_configmap import read_state, write_state
from shoal.visibility.runtimes import RuntimeEstimator

logger = logging.getLogger(__name__)

KEY = "runtimes.json.gz"
FORMAT = 1


def runtimes_configmap_name(scheduler_name: str) -> str:
    return f"{scheduler_name}-runtimes"


class RuntimeStore:
    def __init__(self, client: KubeClient, estimator: RuntimeEstimator, namespace: str, name: str, *,
                 persist_seconds: float = 300.0, leading: Callable[[], bool] = lambda: True) -> None:
        self.client, self.estimator = client, estimator
        self.namespace, self.name = namespace, name
        self.persist_seconds = persist_seconds
        self.leading = leading
        self.observed = 0  # run times learned so far (the service counts them)
        self._written = 0
        self._persisted_at = -math.inf
        self.writes = 0

    async def load(self) -> int:
        """Add the persisted run times to the estimator; returns how many (0: none or unreadable)."""
        doc = await read_state(self.client, self.namespace, self.name, KEY)
        if doc is None:
            return 0
        try:
            if doc.get("format") != FORMAT:
                raise ValueError(f"format {doc.get('format')!r}")
            taken = self.estimator.restore(doc["samples"])
        except (KeyError, TypeError, ValueError) as e:
            logger.warning("run-time ConfigMap %s/%s unreadable (%s): learning afresh", self.namespace, self.name, e)
            return 0
        logger.info("%d learned run times taken over from ConfigMap %s/%s", taken, self.namespace, self.name)
        return taken

    async def persist(self, now: float, *, force: bool = False) -> bool:
        """Write the learned run times if this replica leads, something was learned since the last
        write and `persist_seconds` passed (or `force`); True if written."""
        if not self.leading() or self.observed == self._written:
            return False
        if not force and now - self._persisted_at < self.persist_seconds:
            return False
        seen = self.observed
        doc = {"format": FORMAT, "samples": self.estimator.export()}
        if not await write_state(self.client, self.namespace, self.name, KEY, doc):
            return False
        self._written, self._persisted_at = seen, now
        self.writes += 1
        return True
