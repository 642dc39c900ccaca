"""A fake Prometheus HTTP API on loopback for tests: `http.server` in a thread on 127.0.0.1.

`/api/v1/query` (any path, in fact) is answered by `answer(query) -> (HTTP status, JSON body)`;
every request's path and query arguments are recorded in `asked`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

Answer = Callable[[str], tuple[int, dict[str, Any]]]


def vector(rows: list[tuple[dict[str, str], float]]) -> dict[str, Any]:
    """A successful instant-query answer with these (labels, value) rows."""
    return {"status": "success", "data": {"resultType": "vector",
                                          "result": [{"metric": m, "value": [1.0, str(v)]} for m, v in rows]}}


class FakePrometheus:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.asked: list[dict[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                args = {k: v[0] for k, v in parse_qs(url.query).items()}
                fake.asked.append({"path": url.path, **args})
                code, body = fake.answer(args.get("query", ""))
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
