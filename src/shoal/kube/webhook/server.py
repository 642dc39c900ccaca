"""The webhook's HTTPS endpoint: AdmissionReview v1 in, allowed / refused / JSON patch out.

Paths: `/mutate-pods`, `/validate-pods`, `/validate-podgroups`, `/healthz`. Contracts:
* pods of other schedulers and anything in `kube-system` are always allowed, untouched (the
  chart's namespace selector keeps them away too; this is the second line);
* a refusal is a 403 Status whose message names the field (`kai.admission`);
* queue checks use a Queue informer; before it has listed once they are skipped, never guessed;
* the serving certificate is reloaded when its files change, before the handshake that follows (`certs.CertFiles`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import string
from dataclasses import dataclass, field

from shoal.kai.admission import MutationOptions, pod_patch, pod_problem, podgroup_problem
from shoal.kai.names import QUEUE_LABEL
from shoal.kai.objects import JSON, meta
from shoal.kube.client import NAMESPACES, QUEUES, KubeClient
from shoal.kube.informer import Informer
from shoal.kube.webhook.certs import CertFiles

logger = logging.getLogger(__name__)

NEVER_WATCHED = ("kube-system",)
_TOKEN_CHARS = string.ascii_lowercase + string.digits


@dataclass(slots=True)
class WebhookOptions:
    scheduler_name: str = "kai-scheduler"
    mutation: MutationOptions = field(default_factory=MutationOptions)


class AdmissionWebhook:
    def __init__(self, client: KubeClient | None, options: WebhookOptions) -> None:
        self.opts = options
        self.parents: dict[str, str] = {}
        self.namespace_queue: dict[str, str] = {}
        self.informers = [] if client is None else [
            Informer(client, QUEUES, self._on_queue), Informer(client, NAMESPACES, self._on_namespace)]

    def _on_queue(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        obj = new or old or {}
        name = str(meta(obj).get("name"))
        if new is None or kind == "DELETED":
            self.parents.pop(name, None)
        else:
            self.parents[name] = str((new.get("spec") or {}).get("parentQueue") or "")

    def _on_namespace(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        obj = new or old or {}
        name = str(meta(obj).get("name"))
        queue = (meta(new).get("labels") or {}).get(QUEUE_LABEL) if new is not None and kind != "DELETED" else None
        if queue:
            self.namespace_queue[name] = str(queue)
        else:
            self.namespace_queue.pop(name, None)

    def queues(self) -> dict[str, list[str]] | None:
        """Queue -> child queues, or None while the Queue informer has not listed."""
        if not self.informers or not self.informers[0].synced.is_set():
            return None
        out: dict[str, list[str]] = {q: [] for q in self.parents}
        for q, parent in self.parents.items():
            if parent in out:
                out[parent].append(q)
        return out

    def review(self, path: str, body: JSON) -> JSON:
        """The AdmissionReview answer to `body` for the endpoint `path`."""
        req = body.get("request") or {}
        resp: JSON = {"uid": req.get("uid", ""), "allowed": True}
        obj = req.get("object") or {}
        if req.get("namespace") in NEVER_WATCHED:
            return _answer(resp)
        if path == "/validate-podgroups":
            problem = podgroup_problem(obj, self.queues())
            return _answer(_refuse(resp, problem, "PodGroup") if problem else resp)
        if (obj.get("spec") or {}).get("schedulerName") != self.opts.scheduler_name:
            return _answer(resp)
        if path == "/validate-pods":
            problem = pod_problem(obj, self.queues())
            return _answer(_refuse(resp, problem, "Pod") if problem else resp)
        if path == "/mutate-pods":
            token = "".join(secrets.choice(_TOKEN_CHARS) for _ in range(7))
            ops = pod_patch(obj, self.opts.mutation, self.namespace_queue.get(str(req.get("namespace"))), token)
            if ops:
                resp["patchType"] = "JSONPatch"
                resp["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        return _answer(resp)

    async def serve(self, certs: CertFiles, host: str, port: int) -> asyncio.Server:
        """Start the informers and the HTTPS server (HTTP/1.1); returns the server."""
        self._tasks = [asyncio.create_task(inf.run()) for inf in self.informers]
        return await asyncio.start_server(lambda r, w: self._handle(r, w, certs), host, port, ssl=certs.context)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, certs: CertFiles) -> None:
        try:
            line = (await asyncio.wait_for(reader.readline(), 10)).decode(errors="replace").split()
            length = 0
            while (h := await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                name, _, value = h.decode(errors="replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            path = line[1].split("?")[0] if len(line) > 1 else "/"
            raw = await asyncio.wait_for(reader.readexactly(length), 10) if length else b""
            if path == "/healthz":
                status, payload = "200 OK", b"ok\n"
            elif path in ("/mutate-pods", "/validate-pods", "/validate-podgroups"):
                status, payload = "200 OK", json.dumps(self.review(path, json.loads(raw or b"{}"))).encode()
            else:
                status, payload = "404 Not Found", b"not found\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + payload)
            await writer.drain()
        except (TimeoutError, ConnectionError, ValueError, asyncio.IncompleteReadError) as e:
            logger.debug("webhook request dropped: %r", e)
        finally:
            writer.close()


def _refuse(resp: JSON, problem: str, kind: str) -> JSON:
    return {**resp, "allowed": False,
            "status": {"code": 403, "reason": "Forbidden", "message": f"shoal: {kind} refused: {problem}"}}


def _answer(resp: JSON) -> JSON:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}
