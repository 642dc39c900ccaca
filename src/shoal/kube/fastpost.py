"""Lean HTTP/1.1 writes (binds first of all): a few keep-alive connections, requests pipelined on each.

Why: measured on the e2e bench, a bind through httpx (HTTP/2 via the pure-Python `h2`, or
HTTP/1.1 via `h11`) costs ~4 ms of scheduler CPU, so 4,000 binds took ~13 s of a 2-core machine
while the core had decided them in one. Here a request is a few formatted bytes written to an
asyncio TLS stream, and a response is a status line, headers and a Content-Length (or chunked)
body read back in order; requests may queue on a connection (HTTP/1.1 pipelining: the API server
answers them in order, one at a time), so the API server's parallelism is the number of
connections (32 by default, like 32 concurrent HTTP/2 streams).

Contract: `send(method, path, body, content_type)` (and `post(path, body)`, a JSON POST) returns
`(status, body bytes)` or raises `OSError`/`ConnectionError`
(the connection broke; every request queued on it fails the same way and the next call opens a
new one); an answer not back within `timeout` seconds raises `TimeoutError` (an `OSError`) and
drops that connection like a broken one. It never retries: a bind whose answer was lost is the
caller's to reconcile (the watch shows whether it landed). Only bearer-token or
client-certificate auth (`set_auth` replaces the token); other kubeconfigs keep using httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(slots=True)
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    waiting: deque[asyncio.Future[tuple[int, bytes]]] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None
    broken: bool = False


class FastPoster:
    """Send writes (POST, PATCH, PUT) to one API server over `connections` pipelined HTTP/1.1
    connections."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | None, auth_header: str | None, *,
                 connections: int = 32, depth: int = 8, timeout: float = 30.0) -> None:
        url = urlsplit(server)
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.ssl = ssl_context if url.scheme == "https" else None
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout
        self._netloc = url.netloc
        self._head = b""
        self.set_auth(auth_header)
        self._conns: list[_Conn | None] = [None] * connections
        self._opening: list[asyncio.Lock] = [asyncio.Lock() for _ in range(connections)]
        self._next = 0
        #: At most `depth` requests queued per connection (back-pressure, bounded memory).
        self._slots = asyncio.Semaphore(connections * depth)

    def set_auth(self, auth_header: str | None) -> None:
        """The Authorization header of the requests sent from now on (None: none)."""
        head = f"Host: {self._netloc}\r\nAccept: application/json\r\n"
        if auth_header:
            head += f"Authorization: {auth_header}\r\n"
        self._head = head.encode()

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        return await self.send("POST", path, body)

    async def send(self, method: str, path: str, body: bytes,
                   content_type: str = "application/json") -> tuple[int, bytes]:
        async with self._slots:
            k = self._next = (self._next + 1) % len(self._conns)
            conn = await self._conn(k)
            fut: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
            conn.waiting.append(fut)
            conn.writer.write(f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode() + self._head
                              + f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                              + body)
            try:
                return await asyncio.wait_for(fut, self.timeout)
            except TimeoutError:
                # A stalled connection holds every request queued behind this one: drop it (its
                # reader then fails them) so later posts open a fresh one.
                conn.broken = True
                conn.writer.close()
                raise

    async def _conn(self, k: int) -> _Conn:
        conn = self._conns[k]
        if conn is not None and not conn.broken:
            return conn
        async with self._opening[k]:
            conn = self._conns[k]
            if conn is None or conn.broken:
                reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self.ssl,
                                                               limit=1 << 20)
                conn = _Conn(reader, writer)
                conn.task = asyncio.create_task(self._read(conn), name="fastpost-reader")
                self._conns[k] = conn
            return conn

    async def _read(self, conn: _Conn) -> None:
        """Answer the queued requests in order until the connection ends."""
        error: BaseException = ConnectionError("connection closed by the API server")
        try:
            while True:
                status, closing, body = await _response(conn.reader)
                if conn.waiting:
                    fut = conn.waiting.popleft()
                    if not fut.done():
                        fut.set_result((status, body))
                if closing:
                    break
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            error = ConnectionError(f"API server connection: {e!r}")
        finally:
            conn.broken = True
            while conn.waiting:
                fut = conn.waiting.popleft()
                if not fut.done():
                    fut.set_exception(error)
            conn.writer.close()

    async def close(self) -> None:
        for conn in self._conns:
            if conn is not None:
                conn.broken = True
                conn.writer.close()
                if conn.task is not None:
                    conn.task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await conn.task
        self._conns = [None] * len(self._conns)


async def _response(reader: asyncio.StreamReader) -> tuple[int, bool, bytes]:
    """(status, connection closing, body) of the next response on `reader`."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, chunked, closing = 0, False, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding":
            chunked = "chunked" in value.lower()
        elif name == "connection":
            closing = "close" in value.lower()
    if not chunked:
        return status, closing, await reader.readexactly(length) if length else b""
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers from the API server
            return status, closing, b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
