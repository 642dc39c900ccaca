"""The dashboard's HTTP server: the page, its two static assets and the report as JSON. Read-only.

`serve_dashboard(port, source, host)` serves on `host:port` (loopback by default):

* `GET /` — `static/index.html`; `GET /static/app.js`, `/static/style.css` (shipped with shoal: no
  CDN, nothing fetched from the internet);
* `GET /api/report` — `source()`, the scheduler's latest report (`shoal.visibility.report`, with the
  node x GPU grid), or 503 before the first cycle;
* `GET /healthz`. Any other method is refused (405): the dashboard changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from importlib import resources
from typing import Any

logger = logging.getLogger(__name__)

_TYPES = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "style.css": "text/css; charset=utf-8"}
_ROUTES = {"/": "index.html", "/index.html": "index.html", "/static/app.js": "app.js", "/static/style.css": "style.css"}
ReportSource = Callable[[], dict[str, Any] | None]


def asset(name: str) -> bytes:
    return (resources.files("shoal.dashboard") / "static" / name).read_bytes()


def respond(method: str, path: str, source: ReportSource) -> tuple[str, str, bytes]:
    """(status, content type, body) for one request; pure apart from reading the assets."""
    path = path.split("?", 1)[0]
    if method not in ("GET", "HEAD"):
        return "405 Method Not Allowed", "text/plain", b"the dashboard is read-only\n"
    if path == "/healthz":
        return "200 OK", "text/plain", b"ok\n"
    if path == "/api/report":
        report = source()
        if report is None:
            return "503 Service Unavailable", "application/json", b'{"error": "no cycle yet"}'
        return "200 OK", "application/json", json.dumps(report, separators=(",", ":"), default=str).encode()
    name = _ROUTES.get(path)
    if name is None:
        return "404 Not Found", "text/plain", b"not found\n"
    return "200 OK", _TYPES[name], asset(name)


async def serve_dashboard(port: int, source: ReportSource, host: str = "127.0.0.1") -> asyncio.Server:
    """Start serving (see the module doc); the caller closes the returned server."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode(errors="replace").split()
            method, path = (parts[0], parts[1]) if len(parts) > 1 else ("GET", "/")
            status, ctype, body = respond(method, path, source)
            head = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                    "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                    "Content-Security-Policy: default-src 'self'\r\nConnection: close\r\n\r\n")
            writer.write(head.encode() + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, port)
    logger.info("dashboard on http://%s:%d/", host, server.sockets[0].getsockname()[1])
    return server
