"""List-then-watch informer: a local copy of one kind, kept current from the watch stream.

Contract: `run()` lists (paginated) and remembers the list's resourceVersion, then watches from
it with bookmarks (bookmarks only advance the version). When the server answers 410 Gone (the
version is too old) it re-lists and diffs against the store, so handlers see the deletions they
missed. Handlers get `(event, old, new)` with event in ADDED/MODIFIED/DELETED; they must not
block. `synced` is set after the first list has been delivered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from shoal.kube.client import JSON, ApiError, KubeClient, Resource

logger = logging.getLogger(__name__)

Handler = Callable[[str, JSON | None, JSON | None], None]
#: Told when the handler raised on an object: (the object, the exception).
ErrorHandler = Callable[[JSON, Exception], None]


def object_key(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Gone(Exception):
    """The watch's resourceVersion is too old: re-list."""


class Informer:
    def __init__(self, client: KubeClient, res: Resource, handler: Handler, *, page: int = 500,
                 watch_timeout: int = 300, namespace: str | None = None, field_selector: str | None = None,
                 on_error: ErrorHandler | None = None, optional: bool = False,
                 label_selector: str | None = None) -> None:
        self.client = client
        self.res = res
        #: Narrow the informer to one namespace and/or a field selector (e.g. one object by
        #: `metadata.name=`, which is what RBAC `resourceNames` allows for list and watch).
        self.namespace = namespace
        self.field_selector = field_selector
        #: Only objects with these labels (a scheduling shard's nodes, queues, PodGroups); an
        #: object whose labels stop matching arrives as DELETED from the server's watch.
        self.label_selector = label_selector
        self.handler = handler
        self.on_error = on_error
        self.page = page
        self.watch_timeout = watch_timeout
        self.store: dict[str, JSON] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.relists = 0
        #: An API the cluster may not serve (e.g. resource.k8s.io): a 404 counts as an empty list
        #: (synced) and is retried every minute.
        self.optional = optional

    async def run(self) -> None:
        """List, then watch forever; re-list on 410 Gone; back off on other errors."""
        backoff = 0.2
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self._watch()
                backoff = 0.2
            except Gone:
                logger.info("%s: resourceVersion %s expired; re-listing", self.res.plural, self.resource_version)
                need_list = True
            except asyncio.CancelledError:
                raise
            except ApiError as e:
                if e.code == 410:
                    need_list = True
                    continue
                logger.warning("%s: watch failed (%s); retrying in %.1fs", self.res.plural, e, backoff)
                if e.code in (403, 404):
                    need_list = True
                if self.optional and e.code == 404:
                    self.synced.set()
                    await asyncio.sleep(60.0)
                    continue
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
            except Exception as e:  # network errors: keep the informer alive
                logger.warning("%s: watch error %r; retrying in %.1fs", self.res.plural, e, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    async def _list(self) -> None:
        items: dict[str, JSON] = {}
        cont: str | None = None
        rv = ""
        while True:
            page = await self.client.list_page(self.res, limit=self.page, cont=cont, namespace=self.namespace,
                                               field_selector=self.field_selector,
                                               label_selector=self.label_selector)
            meta = page.get("metadata") or {}
            # List items carry no apiVersion/kind (watch objects do); owner resolution needs them.
            api, kind = page.get("apiVersion"), str(page.get("kind", "")).removesuffix("List")
            for item in page.get("items") or []:
                if api and kind:
                    item.setdefault("apiVersion", api)
                    item.setdefault("kind", kind)
                items[object_key(item)] = item
            cont = meta.get("continue") or None
            rv = meta.get("resourceVersion", rv)
            if not cont:
                break
        self._replace(items)
        self.resource_version = rv
        self.relists += 1
        self.synced.set()

    def _replace(self, items: dict[str, JSON]) -> None:
        """Swap the store for a fresh list, telling the handler what was added, changed, deleted."""
        old = self.store
        self.store = items
        for key, obj in old.items():
            if key not in items:
                self._emit("DELETED", obj, None)
        for key, obj in items.items():
            prev = old.get(key)
            if prev is None:
                self._emit("ADDED", None, obj)
            elif _rv(prev) != _rv(obj):
                self._emit("MODIFIED", prev, obj)

    async def _watch(self) -> None:
        async for ev in self.client.watch(self.res, self.resource_version, timeout_seconds=self.watch_timeout,
                                          namespace=self.namespace, field_selector=self.field_selector,
                                          label_selector=self.label_selector):
            self.apply(ev)

    def apply(self, ev: JSON) -> None:
        """Apply one watch event to the store (public for tests)."""
        kind = ev.get("type")
        obj: Any = ev.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise ApiError(int(obj.get("code") or 500), str(obj.get("message", "")), str(obj.get("reason", "")))
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.resource_version = rv
        if kind == "BOOKMARK":
            return
        key = object_key(obj)
        if kind == "DELETED":
            prev = self.store.pop(key, None)
            self._emit("DELETED", prev or obj, None)
        elif kind in ("ADDED", "MODIFIED"):
            prev = self.store.get(key)
            self.store[key] = obj
            self._emit("MODIFIED" if prev is not None else "ADDED", prev, obj)

    def _emit(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        try:
            self.handler(kind, old, new)
        except Exception as e:  # a handler bug must not kill the informer
            logger.exception("%s: handler failed on %s", self.res.plural, kind)
            if self.on_error is not None:
                try:
                    self.on_error(new or old or {}, e)
                except Exception:
                    logger.exception("%s: error handler failed", self.res.plural)


def _rv(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
