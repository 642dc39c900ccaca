"""Small pieces of a scheduler's state kept across restarts and leader changes in a ConfigMap.

Contract: `write_state` stores a JSON document, gzipped, as one key of the ConfigMap's
`binaryData` (merge patch, or create when the ConfigMap does not exist yet; the Helm chart creates
them empty so the scheduler needs no `create`); `read_state` returns it, or None when the
ConfigMap or the key is absent or unreadable (logged: a state that cannot be read is started
afresh, never fatal). Used for the time-based fair-share usage history (`usage_feed`) and the
learned run times of the start-time forecast (`visibility`).
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
from typing import Any

from shoal.kube.client import CONFIGMAPS, ApiError, KubeClient

logger = logging.getLogger(__name__)


async def read_state(client: KubeClient, namespace: str, name: str, key: str) -> dict[str, Any] | None:
    try:
        cm = await client.get(CONFIGMAPS, name, namespace)
    except ApiError as e:
        if e.code != 404:
            logger.warning("state ConfigMap %s/%s: %s", namespace, name, e)
        return None
    data = (cm.get("binaryData") or {}).get(key)
    if not data:
        return None
    try:
        doc = json.loads(gzip.decompress(base64.b64decode(data)))
    except (TypeError, ValueError, OSError) as e:
        logger.warning("state ConfigMap %s/%s unreadable (%s): starting afresh", namespace, name, e)
        return None
    return doc if isinstance(doc, dict) else None


async def write_state(client: KubeClient, namespace: str, name: str, key: str, doc: dict[str, Any]) -> bool:
    """True if written; an API error is logged and returns False (the next write tries again)."""
    data = base64.b64encode(gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), 6)).decode()
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "shoal"}},
            "binaryData": {key: data}}
    try:
        try:
            await client.patch(CONFIGMAPS, name, {"binaryData": {key: data}}, namespace)
        except ApiError as e:
            if e.code != 404:
                raise
            await client.create(CONFIGMAPS, body, namespace)
    except ApiError as e:
        logger.warning("state ConfigMap %s/%s: %s", namespace, name, e)
        return False
    return True
