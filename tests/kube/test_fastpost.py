"""The pipelined HTTP/1.1 poster of the bind path against a tiny loopback server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from shoal.kube.fastpost import FastPoster


class Server:
    """Answers each request in order with its path as the body; misbehaves on request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, bytes]] = []
        self.heads: list[list[str]] = []
        self.close_after: int | None = None
        self.chunked = False
        self.connections = 0
        self.stall = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                self.heads.append(lines)
                path = lines[0].split(" ")[1]
                length = next(int(h.split(":")[1]) for h in lines if h.lower().startswith("content-length"))
                body = await reader.readexactly(length)
                self.requests.append((path, body))
                if self.stall:
                    continue
                if self.close_after is not None and len(self.requests) >= self.close_after:
                    writer.close()
                    return
                out = path.encode()
                status = b"404 Not Found" if path.endswith("/missing") else b"201 Created"
                if self.chunked:
                    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (out[:3], out[3:]) if c)
                    writer.write(b"HTTP/1.1 " + status + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
                                 + b"0\r\n\r\n")
                else:
                    writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: %d\r\n\r\n" % len(out) + out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.fixture
async def served() -> AsyncIterator[tuple[Server, FastPoster]]:
    srv = Server()
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    poster = FastPoster(f"http://127.0.0.1:{port}", None, "Bearer t", connections=2, depth=4)
    yield srv, poster
    await poster.close()
    server.close()


@pytest.mark.parametrize("chunked", [pytest.param(False, id="content-length"), pytest.param(True, id="chunked")])
async def test_each_pipelined_request_gets_its_own_answer(served: tuple[Server, FastPoster], chunked: bool) -> None:
    srv, poster = served
    srv.chunked = chunked
    answers = await asyncio.gather(*(poster.post(f"/p/{i}", b'{"i": %d}' % i) for i in range(40)))
    assert answers == [(201, f"/p/{i}".encode()) for i in range(40)]
    assert srv.connections == 2 and sorted(b for _, b in srv.requests) == sorted(b'{"i": %d}' % i for i in range(40))
    assert await poster.post("/missing", b"{}") == (404, b"/missing")


async def test_a_broken_connection_fails_its_requests_and_the_next_post_reconnects(
        served: tuple[Server, FastPoster]) -> None:
    srv, poster = served
    srv.close_after = 1
    results = await asyncio.gather(*(poster.post(f"/p/{i}", b"{}") for i in range(6)), return_exceptions=True)
    assert any(isinstance(r, ConnectionError) for r in results)
    srv.close_after = None
    assert await poster.post("/again", b"{}") == (201, b"/again")


async def test_an_answer_not_back_in_time_raises_and_the_stalled_connection_is_dropped(
        served: tuple[Server, FastPoster]) -> None:
    srv, poster = served
    poster.timeout = 0.3
    srv.stall = True
    results = await asyncio.gather(*(poster.post(f"/p/{i}", b"{}") for i in range(4)), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results), results
    srv.stall = False
    assert await poster.post("/again", b"{}") == (201, b"/again")
    assert srv.connections == 3  # on a new connection, not a stalled one


async def test_send_carries_the_method_and_content_type_of_each_write(served: tuple[Server, FastPoster]) -> None:
    srv, poster = served
    answers = await asyncio.gather(
        poster.send("PATCH", "/apis/x/podgroups/a", b'{"metadata": {}}', "application/merge-patch+json"),
        poster.send("PUT", "/leases/l", b'{"spec": {}}'),
        poster.post("/pods/p/binding", b"{}"))
    assert [a[0] for a in answers] == [201, 201, 201]
    seen = {h[0].split(" ")[1]: (h[0].split(" ")[0], next(x for x in h if x.lower().startswith("content-type")))
            for h in srv.heads}
    assert seen == {"/apis/x/podgroups/a": ("PATCH", "Content-Type: application/merge-patch+json"),
                    "/leases/l": ("PUT", "Content-Type: application/json"),
                    "/pods/p/binding": ("POST", "Content-Type: application/json")}
    assert sorted(body for _, body in srv.requests) == [b'{"metadata": {}}', b'{"spec": {}}', b"{}"]
