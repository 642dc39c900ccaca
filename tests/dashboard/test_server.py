"""The dashboard server: read-only routes, the report as JSON, nothing fetched from elsewhere."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from shoal.dashboard.server import asset, respond, serve_dashboard

REPORT = {"scheduler": "s", "cycle": 3, "time": 1.0, "queues": [], "pending": []}


@pytest.mark.parametrize(("method", "path", "status", "ctype"), [
    pytest.param("GET", "/", "200 OK", "text/html; charset=utf-8", id="the page"),
    pytest.param("GET", "/static/app.js?v=1", "200 OK", "text/javascript; charset=utf-8", id="the script"),
    pytest.param("GET", "/static/style.css", "200 OK", "text/css; charset=utf-8", id="the style"),
    pytest.param("GET", "/api/report", "200 OK", "application/json", id="the report"),
    pytest.param("GET", "/static/../server.py", "404 Not Found", "text/plain", id="nothing else is served"),
    pytest.param("POST", "/api/report", "405 Method Not Allowed", "text/plain", id="writes are refused"),
    pytest.param("DELETE", "/", "405 Method Not Allowed", "text/plain", id="deletes are refused"),
])
def test_routes(method: str, path: str, status: str, ctype: str) -> None:
    got = respond(method, path, lambda: REPORT)
    assert got[:2] == (status, ctype)


def test_report_before_the_first_cycle_is_503_and_after_it_is_the_report() -> None:
    assert respond("GET", "/api/report", lambda: None)[0].startswith("503")
    assert json.loads(respond("GET", "/api/report", lambda: REPORT)[2]) == REPORT


def test_assets_load_nothing_from_the_network() -> None:
    for name in ("index.html", "app.js", "style.css"):
        text = asset(name).decode()
        urls = set(re.findall(r"https?://[^\s\"'`)]+", text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, f"{name} references {urls}"
        assert ".innerHTML" not in text and "insertAdjacentHTML" not in text  # data never parsed as HTML


def test_serves_on_loopback() -> None:
    async def main() -> tuple[str, bytes]:
        server = await serve_dashboard(0, lambda: REPORT)
        host, port = server.sockets[0].getsockname()[:2]
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /api/report HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        data = await reader.read()
        writer.close()
        server.close()
        return host, data

    host, data = asyncio.run(main())
    assert host == "127.0.0.1"
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK") and b"Content-Security-Policy: default-src 'self'" in head
    assert json.loads(body) == REPORT
