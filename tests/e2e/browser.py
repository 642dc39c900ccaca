"""Headless Chromium driven over the DevTools protocol on a pipe (no websocket library needed).

`Browser.start()` launches `scripts/browser path` (through bash, which moves the pipe ends to fds 3 and
4) with --remote-debugging-pipe (fd 3 in, fd 4 out,
NUL-separated JSON) and the flags that keep it on loopback: headless, no sandbox (root in CI), no
GPU, no QUIC, no first run, no background networking, component updates or sync, and a fresh
user-data dir. `Page` opens a tab, evaluates JavaScript and takes screenshots.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cluster import REPO

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--no-default-browser-check", "--mute-audio",
         "--remote-debugging-pipe", "--window-size=1400,1100")


def browser_path() -> str | None:
    res = subprocess.run([str(REPO / "scripts" / "browser"), "path"], capture_output=True, text=True)
    return res.stdout.strip() or None if res.returncode == 0 else None


@dataclass
class Browser:
    binary: str
    profile: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    _out: int = -1
    _in: int = -1
    _buf: bytes = b""
    _next: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def start(self) -> Browser:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        script = f'exec "$0" "$@" 3<&{to_child_r} 4>&{from_child_w} {to_child_r}<&- {from_child_w}>&-'
        self.proc = subprocess.Popen(["bash", "-c", script, self.binary, *FLAGS, f"--user-data-dir={self.profile}",
                                      "about:blank"], pass_fds=(to_child_r, from_child_w),
                                     stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        os.close(to_child_r)
        os.close(from_child_w)
        self._out, self._in = to_child_w, from_child_r
        return self

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result") or {})
            self.events.append(reply)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from the browser")
            ready, _, _ = select.select([self._in], [], [], left)
            if ready:
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"the browser exited: {self.log.read_text(errors='replace')[-2000:]}")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return dict(json.loads(raw))

    def page(self) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.call("Page.enable")
        page.call("Runtime.enable")
        return page

    def close(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(Exception):
            self.call("Browser.close", timeout=5)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for fd in (self._out, self._in):
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass
class Page:
    browser: Browser
    session: str

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.call(method, params, self.session)

    def goto(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def js(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def text(self) -> str:
        return str(self.js("document.body ? document.body.innerText : ''"))

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
